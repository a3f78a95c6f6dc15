"""``corpus serve --workers N`` as a load balancer meets it (issue 40): worker processes that
share nothing but the warehouse, each moving to a newly published version on its own; a
readiness probe; SIGTERM finishing the requests in flight instead of cutting them.

A real ``corpus serve`` process; the KB's reranker is a local OpenAI-compatible server that
takes 3 s to answer, so a search is still in flight when the signal comes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from support.openai_server import OpenAIServer, Reply, Request
from support.served import free_port

pytestmark = pytest.mark.slow
CORPUS = str(Path(sys.executable).with_name("corpus"))


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "CORPUS_HOME": str(home), "DAGSTER_HOME": str(home / "dagster"), "HF_HUB_OFFLINE": "1"}


def _rerank(request: Request) -> Reply:
    texts = request.body["texts"]
    return Reply.json([{"index": i, "score": 1.0 / (i + 1)} for i, _ in enumerate(texts)]).after(3.0)


def _search(url: str, query: str) -> dict[str, Any]:
    r = httpx.post(f"{url}/search", json={"query": query, "kb": "ops"}, timeout=60)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def test_workers_share_the_warehouse_and_sigterm_finishes_requests_in_flight(tmp_path: Path) -> None:
    home = tmp_path / "corpus"
    kb = home / "kbs" / "ops"
    kb.mkdir(parents=True)
    (kb / "ports.md").write_text("# Console\n\nThe console listens on port 8443 behind the gateway.\n")
    (kb / "backup.md").write_text("# Backups\n\nSnapshots are kept for 14 days, then pruned.\n")
    with OpenAIServer() as rerank:
        rerank.handler = _rerank
        (kb / "kb.yaml").write_text(
            f"rerank: {{url: '{rerank.base_url.removesuffix('/v1')}/rerank', api: tei, max_retries: 0}}\n"
        )
        r = subprocess.run([CORPUS, "index", "--kb", "ops"], env=_env(home), capture_output=True, text=True)
        assert r.returncode == 0, r.stderr

        port = free_port()
        url = f"http://127.0.0.1:{port}"
        proc = subprocess.Popen([CORPUS, "serve", "--port", str(port), "--workers", "2", "--rate", "0"],
                                env=_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        try:
            t0, ready = time.monotonic(), None
            while ready != 200:
                try:
                    ready = httpx.get(f"{url}/readyz", timeout=2).status_code
                    assert ready in (200, 503)
                except httpx.TransportError:
                    pass
                assert proc.poll() is None and time.monotonic() - t0 < 240, "corpus serve did not become ready"
                time.sleep(0.3)
            workers = [p for p in psutil.Process(proc.pid).children(recursive=True) if "resource_tracker" not in
                       " ".join(p.cmdline())]  # fmt: skip
            assert len(workers) == 2, [p.cmdline() for p in workers]

            assert "8443" in _search(url, "which port does the console use")["results"][0]["text"]

            # A new published version: every worker moves to it (whichever answers).
            (kb / "ports.md").write_text("# Console\n\nThe console listens on port 9443 behind the gateway.\n")
            r = subprocess.run([CORPUS, "index", "--kb", "ops"], env=_env(home), capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
            seen = set()
            for _ in range(6):
                text = " ".join(x["text"] for x in _search(url, "which port does the console use")["results"])
                seen.add("9443" in text and "8443" not in text)
            assert seen == {True}

            # SIGTERM while a search waits on the slow reranker: it is answered, then the server exits.
            answers: list[int] = []

            def slow() -> None:
                r = httpx.post(f"{url}/search", json={"query": "how long are snapshots kept", "kb": "ops"}, timeout=60)
                answers.append(r.status_code)

            th = threading.Thread(target=slow)
            th.start()
            t0 = time.monotonic()
            while not any(q.path.endswith("/rerank") for q in rerank.requests[-3:]) and time.monotonic() - t0 < 30:
                time.sleep(0.05)
            proc.send_signal(signal.SIGTERM)
            th.join(60)
            assert answers == [200]
            assert proc.wait(timeout=60) == 0
            with pytest.raises(httpx.TransportError):
                httpx.get(f"{url}/healthz", timeout=2)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=30)
