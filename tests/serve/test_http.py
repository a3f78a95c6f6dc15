"""`corpus serve` over real HTTP: the JSON API, Dify's external knowledge API, keys, bounds,
errors, reloading after a re-index, and the Python API giving the same answers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import TINY_EN, TINY_ZH
from support.served import Served, free_port

from corpus_pipeline.serve.app import create_app

pytestmark = pytest.mark.slow
CORPUS = str(Path(sys.executable).with_name("corpus"))
KEY = "test-key-123456"


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "CORPUS_HOME": str(home), "DAGSTER_HOME": str(home / "dagster"), "HF_HUB_OFFLINE": "1"}


def _cli(home: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CORPUS, *args], env=_env(home), capture_output=True, text=True, timeout=timeout)


_Server = Served  # (test_browser imports it from here)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("serve") / "corpus"
    kb = home / "kbs" / "tiny"
    kb.mkdir(parents=True)
    (kb / "harbor.md").write_text(TINY_EN, encoding="utf-8")
    (kb / "cpu.txt").write_text(TINY_ZH, encoding="utf-8")
    (kb / "kb.yaml").write_text(
        "chunking:\n  plan: PARENT:RECURSIVE;CHILD:RECURSIVE\n"
        "  parent: {RECURSIVE: {max_chars: 300, overlap_chars: 40}}\n"
        "  child: {RECURSIVE: {max_chars: 120, overlap_chars: 20}}\n",
        encoding="utf-8",
    )
    r = _cli(home, "index", "--kb", "tiny")
    assert r.returncode == 0, r.stderr
    return home


@pytest.fixture(scope="module")
def served(home: Path) -> Iterator[str]:
    with _Server(create_app(home, api_keys=[KEY], rate_per_s=0)) as url:
        yield url


def _auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {KEY}"}


def test_search_over_http_is_the_json_of_corpus_search(home: Path, served: str) -> None:
    q = "Which port does the web console listen on?"
    r = httpx.post(f"{served}/search", json={"query": q, "kb": "tiny", "top_k": 3}, headers=_auth(), timeout=120)
    assert r.status_code == 200, r.text
    got = r.json()
    cli = _cli(home, "search", q, "--kb", "tiny", "--top-k", "3", "--json")
    assert cli.returncode == 0, cli.stderr
    want = json.loads(cli.stdout)
    strip = lambda d: {k: v for k, v in d.items() if k not in ("timings_ms",)}  # noqa: E731
    assert strip(got) == strip(want)
    assert "8443" in got["results"][0]["text"]
    # Chinese, same process, same model
    zh = httpx.post(f"{served}/search", json={"query": "CPU 使用率持续超过 85% 怎么排查", "kb": "tiny"},
                    headers=_auth(), timeout=60).json()  # fmt: skip
    assert "top -Hp" in zh["results"][0]["text"]


def test_kbs_versions_chunks_and_health(served: str) -> None:
    assert httpx.get(f"{served}/healthz").json()["status"] == "ok"  # no key needed
    kbs = httpx.get(f"{served}/kbs", headers=_auth()).json()
    assert kbs[0]["kb"] == "tiny" and kbs[0]["active_version"]
    versions = httpx.get(f"{served}/kbs/tiny/versions", headers=_auth()).json()
    assert [v["strategy_version"] for v in versions if v["active"]] == [kbs[0]["active_version"]]
    hit = httpx.post(f"{served}/search", json={"query": "restore a file", "kb": "tiny"}, headers=_auth()).json()
    chunk_id = hit["results"][0]["hits"][0]["chunk_id"]
    lineage = httpx.get(f"{served}/chunks/{chunk_id}", headers=_auth()).json()
    assert lineage["chunk"]["chunk_id"] == chunk_id and lineage["document"]["path"] == "harbor.md"
    r = httpx.get(f"{served}/chunks/nope", headers=_auth())
    assert r.status_code == 404 and r.json()["error"]["code"] == "chunk_not_found"
    r = httpx.get(f"{served}/kbs/missing/versions", headers=_auth())
    assert r.status_code == 404 and r.json()["error"]["code"] == "kb_not_found"
    assert httpx.get(f"{served}/openapi.json", headers=_auth()).json()["paths"]["/retrieval"]


def test_dify_external_knowledge_api(served: str) -> None:
    body = {"knowledge_id": "tiny", "query": "How long are monthly snapshots kept?",
            "retrieval_setting": {"top_k": 2, "score_threshold": 0.0}}  # fmt: skip
    r = httpx.post(f"{served}/retrieval", json=body, headers=_auth(), timeout=60)
    assert r.status_code == 200, r.text
    records = r.json()["records"]
    assert 1 <= len(records) <= 2
    first = records[0]
    assert "12 months" in first["content"] and first["title"] == "Harbor backup appliance"  # (its first heading)
    assert 0.0 <= first["score"] <= 1.0 and isinstance(first["metadata"], dict) and first["metadata"]["chunk_ids"]
    # the score is the parent's relevance; score_threshold keeps exactly those at or above it
    same = httpx.post(f"{served}/search", json={"query": body["query"], "kb": "tiny", "top_k": 4}, headers=_auth())
    rel = [r["relevance"] for r in same.json()["results"]]
    four = {**body, "retrieval_setting": {"top_k": 4, "score_threshold": 0.0}}
    scores = [rec["score"] for rec in httpx.post(f"{served}/retrieval", json=four, headers=_auth()).json()["records"]]
    assert scores == pytest.approx(rel, abs=1e-4)  # /search rounds to 4 places
    cut = sorted(scores)[len(scores) // 2]
    mid = {**body, "retrieval_setting": {"top_k": 4, "score_threshold": cut}}
    kept = httpx.post(f"{served}/retrieval", json=mid, headers=_auth()).json()["records"]
    assert len(kept) == sum(s >= cut for s in scores) and all(rec["score"] >= cut for rec in kept)
    strict = {**body, "retrieval_setting": {"top_k": 2, "score_threshold": 1.0}}
    assert all(
        rec["score"] >= 1.0 for rec in httpx.post(f"{served}/retrieval", json=strict, headers=_auth()).json()["records"]
    )
    # Dify's documented errors
    r = httpx.post(f"{served}/retrieval", json=body)
    assert r.status_code == 401 and r.json()["error_code"] == 1001
    r = httpx.post(f"{served}/retrieval", json=body, headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 403 and r.json()["error_code"] == 1002
    r = httpx.post(f"{served}/retrieval", json={**body, "knowledge_id": "nope"}, headers=_auth())
    assert r.status_code == 404 and r.json()["error_code"] == 2001


def test_keys_bounds_and_errors_are_json(served: str) -> None:
    r = httpx.get(f"{served}/kbs")
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
    r = httpx.get(f"{served}/kbs", headers={"Authorization": "Bearer nope"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"
    r = httpx.post(f"{served}/search", content=b"x" * 70_000, headers={**_auth(), "content-type": "application/json"})
    assert r.status_code == 413 and r.json()["error"]["code"] == "body_too_large"
    r = httpx.post(f"{served}/search", json={"query": "", "kb": "tiny", "bogus": 1}, headers=_auth())
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request"
    assert "bogus" in r.json()["error"]["message"] and "query" in r.json()["error"]["message"]
    r = httpx.post(f"{served}/search", json={"query": "x" * 3000, "kb": "tiny"}, headers=_auth())
    assert r.status_code == 422


def test_requests_are_rate_limited_per_client(home: Path) -> None:
    with _Server(create_app(home, api_keys=[], rate_per_s=0.5, burst=3)) as url:
        codes = [httpx.get(f"{url}/healthz").status_code for _ in range(5)]
    assert codes[:3] == [200, 200, 200] and 429 in codes[3:]


def test_a_reindex_is_served_without_a_restart(home: Path, tmp_path: Path) -> None:
    """The server reopens a KB when its active version changes (or its version is rebuilt)."""
    copy = tmp_path / "corpus"
    shutil.copytree(home, copy)
    with _Server(create_app(copy, api_keys=[], rate_per_s=0)) as url:
        q = {"query": "Which port does the web console listen on?", "kb": "tiny", "top_k": 1}
        before = httpx.post(f"{url}/search", json=q, timeout=120).json()
        assert "8443" in before["results"][0]["text"]
        doc = copy / "kbs" / "tiny" / "harbor.md"
        doc.write_text(doc.read_text().replace("port 8443", "port 9443"))
        (copy / "kbs" / "tiny" / "kb.yaml").write_text(
            (copy / "kbs" / "tiny" / "kb.yaml").read_text().replace("max_chars: 120", "max_chars: 140")
        )
        r = _cli(copy, "index", "--kb", "tiny")
        assert r.returncode == 0, r.stderr
        after = httpx.post(f"{url}/search", json=q, timeout=120).json()
    assert after["strategy_version"] != before["strategy_version"]
    assert "9443" in after["results"][0]["text"]


def test_the_python_api_answers_as_the_server(home: Path, served: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import corpus_pipeline

    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))

    kb = corpus_pipeline.open_kb("tiny", home=home)
    try:
        q = "How long are daily snapshots kept?"
        mine = kb.search(q, top_k=2)
        theirs = httpx.post(f"{served}/search", json={"query": q, "kb": "tiny", "top_k": 2}, headers=_auth()).json()
        assert [r.parent_id for r in mine.results] == [r["parent_id"] for r in theirs["results"]]
        assert [v["strategy_version"] for v in kb.versions() if v["active"]] == [kb.active_version]
        chunk = mine.results[0].hits[0].chunk_id
        assert kb.lineage(chunk)["chunk"]["chunk_id"] == chunk
        assert corpus_pipeline.list_kbs(home) == ["tiny"]
        summary = kb.index()  # nothing changed: no run, the same active version
        assert summary["status"] == "ok" and summary["up_to_date"] and summary["active_version"] == kb.active_version
    finally:
        kb.close()


def test_corpus_serve_refuses_a_public_address_without_a_key(home: Path) -> None:
    env = {k: v for k, v in _env(home).items() if k != "CORPUS_API_KEYS"}
    r = subprocess.run([CORPUS, "serve", "--host", "0.0.0.0"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "refusing to listen on 0.0.0.0 without an API key" in r.stderr


def test_corpus_serve_starts_and_answers(home: Path) -> None:
    port = free_port()
    env = {**_env(home), "CORPUS_API_KEYS": KEY}
    proc = subprocess.Popen([CORPUS, "serve", "--port", str(port)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        t0 = time.monotonic()
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None and time.monotonic() - t0 < 60, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.2)
        body = {"knowledge_id": "tiny", "query": "restore", "retrieval_setting": {"top_k": 1, "score_threshold": 0}}
        r = httpx.post(f"http://127.0.0.1:{port}/retrieval", json=body, headers=_auth(), timeout=120)
        assert r.status_code == 200 and r.json()["records"]
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def test_concurrent_searches_of_one_kb_run_in_parallel_and_answer_as_one_at_a_time(served: str) -> None:
    """No lock around a search: 16 clients at once, four questions; every answer is the one
    the question gets alone (the query embeddings are batched, the table read concurrently)."""
    from concurrent.futures import ThreadPoolExecutor

    questions = [
        "Which port does the web console listen on?",
        "how long are snapshots kept",
        "CPU 使用率持续超过 85% 怎么排查",
        "restore a single file",
    ]

    def ask(q: str) -> list[str]:
        r = httpx.post(f"{served}/search", json={"query": q, "kb": "tiny", "top_k": 3}, headers=_auth(), timeout=120)
        assert r.status_code == 200, r.text
        return [x["parent_id"] for x in r.json()["results"]]

    alone = {q: ask(q) for q in questions}
    with ThreadPoolExecutor(16) as pool:
        together = list(pool.map(ask, [questions[i % 4] for i in range(48)]))
    assert together == [alone[questions[i % 4]] for i in range(48)]
