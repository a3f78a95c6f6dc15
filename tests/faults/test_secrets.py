"""No key survives anywhere: an endpoint that echoes the caller's key in its errors (the bare
key and its ``Authorization`` header), keys that do not look like ``sk-...``, one per
section (``llm``, ``vision``, ``embedding``, ``rerank``, each through ``api_key_env``).

End to end, as a user runs it: ``corpus index`` (a first run that fails at the embedding
endpoint, then one that succeeds), ``corpus search`` (its reranker refused), ``corpus
lineage`` of a chunk whose LLM call failed; then every string of every Parquet file and
LanceDB table under the warehouse, and the bytes of every other file under CORPUS_HOME
(manifests, stats, version snapshots, caches, the Dagster instance's sqlite event log and
compute logs) are searched for each key. Plus the masking rules themselves.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import TINY_EN, TINY_ZH
from PIL import Image
from support.openai_server import OpenAIServer, key_echo_handler

from corpus_pipeline import secrets
from corpus_pipeline.errors import ModelError
from corpus_pipeline.store.parquet import read_table

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]

# Keys of no known shape (not sk-, no prefix a pattern knows), one per section; the vision
# one has characters a JSON or URL encoder may escape.
KEYS = {
    "VAULT_LLM_KEY": "mykey-ABC123xyz",
    "VAULT_VISION_KEY": "vis.9f3K+q/Zt",
    "VAULT_EMB_KEY": "emb7QwErTyU",
    "VAULT_RERANK_KEY": "rr:Secret-42",
}


def _forms(key: str) -> set[str]:
    """The ways a key could be written in a file: as is, JSON-escaped, URL-quoted."""
    from urllib.parse import quote

    return {key, json.dumps(key)[1:-1], quote(key, safe="")}


def _leaks(text: str) -> list[str]:
    return sorted(name for name, key in KEYS.items() if any(f in text for f in _forms(key)))


# ---------------------------------------------------------------------------- the rules


def test_a_registered_key_of_any_shape_is_masked_whole_with_its_escaped_forms() -> None:
    key = 'pl41n"k3y/+é'
    secrets.register_secret(key)
    for form in (key, json.dumps(key)[1:-1], json.dumps(key, ensure_ascii=False)[1:-1], repr(key)[1:-1]):
        assert secrets.mask(f"invalid key <{form}>") == "invalid key <***>"
    assert secrets.mask(f"401: {{'error': {{'message': {key!r}}}}}").count("***") == 1


def test_known_key_shapes_are_masked_without_registration_and_ordinary_words_are_not() -> None:
    cases = {
        "Incorrect API key provided: sk-proj-abcdef123456": "Incorrect API key provided: sk-***",
        "header Authorization: Bearer abc.def+ghi/jkl=": "header Authorization: Bearer ***",
        "GET /v1?api_key=zz99yy88xx&x=1": "GET /v1?api_key=***&x=1",
        "token hf_abcdefghijklmnopqrstuvwx used": "token *** used",
        "http://user:hunter2@host/v1 refused": "http://***@host/v1 refused",
    }
    for text, masked in cases.items():
        assert secrets.mask(text) == masked
    for text in ("task-management-system failed", "disk-space alert", "Bearer", "the secret of the harbor"):
        assert secrets.mask(text) == text


def test_values_under_the_minimum_are_not_registered_and_errors_are_capped() -> None:
    for short in ("", "x", "abc", "  ab  "):
        secrets.register_secret(short)
        assert not secrets.is_registered(short.strip() or short)
    assert secrets.MIN_SECRET_CHARS == 4
    secrets.register_secret("Q7z!")  # four characters: masked, since configured
    assert secrets.mask("key Q7z! refused") == "key *** refused"
    body = "x" * 5000 + " key Q7z!"
    capped = secrets.mask_error(body)
    assert len(capped) == secrets.ERROR_LIMIT and capped.endswith("…")
    # masked before the cut: no half of a key survives at the boundary
    assert "Q7z" not in secrets.mask_error("y" * 498 + "Q7z!", 500)


def test_a_model_error_is_masked_when_it_is_made() -> None:
    secrets.register_secret("zz-model-err-key")
    assert str(ModelError("endpoint said: zz-model-err-key is wrong")) == "endpoint said: *** is wrong"


def test_a_key_read_from_the_environment_through_a_kb_yaml_is_registered_before_any_call(
    corpus_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from corpus_pipeline.kbconfig import resolve_kb

    monkeypatch.setenv("VAULT_UNCALLED_KEY", "never-sent-1234")
    kb = corpus_home / "kbs" / "quiet"
    kb.mkdir()
    (kb / "kb.yaml").write_text("rerank: {url: 'http://127.0.0.1:9/rerank', api_key_env: VAULT_UNCALLED_KEY}\n")
    assert not secrets.is_registered("never-sent-1234")
    resolve_kb(kb)
    assert secrets.is_registered("never-sent-1234")


# ---------------------------------------------------------------------------- end to end


def _corpus(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "corpus"), *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=600)


def _write_kb(home: Path, server: OpenAIServer) -> Path:
    kb = home / "kbs" / "vault"
    kb.mkdir(parents=True)
    (kb / "harbor.md").write_text(TINY_EN + "\n![console screen](console.png)\n", encoding="utf-8")
    (kb / "cpu.txt").write_text(TINY_ZH, encoding="utf-8")
    Image.new("RGB", (160, 60), "white").save(kb / "console.png")
    url = server.base_url
    (kb / "kb.yaml").write_text(
        "chunking:\n"
        "  plan: PARENT:RECURSIVE;CHILD:PROPOSITION\n"
        "  parent: {RECURSIVE: {max_chars: 300, overlap_chars: 0}}\n"
        "  child: {PROPOSITION: {max_chunk_size: 200, min_chunk_size: 20}}\n"
        f"llm: {{base_url: '{url}', model: vault-llm, api_key_env: VAULT_LLM_KEY, max_retries: 0, timeout_s: 20}}\n"
        f"vision: {{base_url: '{url}', model: vault-vlm, api_key_env: VAULT_VISION_KEY, ocr: false,"
        " max_retries: 0}\n"
        f"embedding: {{provider: openai, base_url: '{url}', model: vault-embed, api_key_env: VAULT_EMB_KEY,"
        " max_retries: 0, batch_size: 16}\n"
        f"rerank: {{url: '{url}/rerank', api_key_env: VAULT_RERANK_KEY, max_retries: 0}}\n"
        "search: {keyword_relative_score_floor: 0.0}\n",  # several parents to rerank
        encoding="utf-8",
    )
    return kb


def _stored_strings(home: Path) -> dict[str, str]:
    """Every file under ``home`` as text: Parquet files and LanceDB tables decoded (every
    column, every row; their bytes may be compressed), every other file's raw bytes."""
    import lancedb

    from corpus_pipeline.store.lance import list_table_names

    out: dict[str, str] = {}
    for path in sorted(p for p in home.rglob("*") if p.is_file()):
        raw = path.read_bytes().decode("utf-8", "replace")
        if path.suffix == ".parquet":
            raw += json.dumps(pq.read_table(path).to_pylist(), default=str, ensure_ascii=False)
        out[str(path.relative_to(home))] = raw
    lance_roots = {p.parent for p in home.rglob("*.lance") if p.is_dir()}
    for root in sorted(lance_roots):
        db = lancedb.connect(str(root))
        for name in list_table_names(db):
            rows = db.open_table(name).to_arrow().drop_columns(["vector"]).to_pylist()
            out[f"lancedb:{root.relative_to(home)}/{name}"] = json.dumps(rows, default=str, ensure_ascii=False)
    return out


@pytest.mark.slow
def test_keys_echoed_by_every_endpoint_are_nowhere_in_the_warehouse_the_instance_or_the_output(
    corpus_home: Path,
) -> None:
    env = {**os.environ, **KEYS}
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CORPUS_LLM_MODEL", "CORPUS_VISION_MODEL"):
        env.pop(name, None)
    printed: dict[str, str] = {}
    with OpenAIServer() as server:
        _write_kb(corpus_home, server)

        # 1. every endpoint refuses, echoing the key: the run fails at the embeddings
        server.handler = key_echo_handler()
        r = _corpus("index", "--kb", "vault", env=env)
        printed["index (failed)"] = r.stdout + r.stderr
        assert r.returncode == 1, r.stdout + r.stderr
        assert "AuthenticationError" in printed["index (failed)"]

        # 2. the embedding endpoint answers; the LLM and vision endpoints still refuse
        server.handler = key_echo_handler(embeddings=True)
        r = _corpus("index", "--kb", "vault", "--json", env=env)
        printed["index"] = r.stdout + r.stderr
        assert r.returncode == 0, r.stdout + r.stderr
        [summary] = json.loads(r.stdout)
        assert summary["status"] == "ok" and summary["child_chunks"] > 0

        # 3. search: the reranker refuses, the fused order is kept and the warning printed
        r = _corpus("search", "console CPU snapshots restore", "--kb", "vault", "--json", env=env)
        printed["search"] = r.stdout + r.stderr
        assert r.returncode == 0, r.stdout + r.stderr
        found = json.loads(r.stdout)
        assert any("rerank failed" in w and "***" in w for w in found["warnings"]), (
            len(found["results"]),
            found["channel_hits_before_gates"],
            found["warnings"],
        )
        chunk_id = found["results"][0]["hits"][0]["chunk_id"]

        # every kind of endpoint was called with its key, and refused it echoing it back
        sent = {r.headers.get("authorization") for r in server.requests}
        assert {f"Bearer {k}" for k in KEYS.values()} <= sent

    # 4. lineage of a chunk whose LLM call failed: the fallback's reason is shown, masked
    for flags in ((), ("--json",)):
        r = _corpus("lineage", chunk_id, *flags, env=env)
        printed[f"lineage {' '.join(flags)}"] = r.stdout + r.stderr
        assert r.returncode == 0, r.stdout + r.stderr
    assert "invalid key ***" in printed["lineage --json"]

    # the errors were stored (masked), so the scan below looks where the keys would be
    warehouse = corpus_home / "warehouse"
    [images] = warehouse.glob("image_descriptions/kb=*")
    errors = read_table(images).column("error").to_pylist()
    assert errors and all(e and "invalid key ***" in e for e in errors), errors
    metadata = [
        m for p in warehouse.glob("child_chunks/kb=*/strategy_version=*") for m in read_table(p)["metadata"].to_pylist()
    ]
    reasons = [json.loads(m).get("fallback_reason") or "" for m in metadata]
    assert any("invalid key ***" in r for r in reasons), reasons

    leaks = {where: _leaks(text) for where, text in {**printed, **_stored_strings(corpus_home)}.items()}
    assert not {where: names for where, names in leaks.items() if names}
    assert any(where.startswith("lancedb:") for where in leaks) and any(".parquet" in w for w in leaks)
    assert any(w.endswith(".db") or "sqlite" in w for w in leaks), "the Dagster instance was not scanned"


def test_a_key_a_model_echoes_in_a_successful_answer_is_masked_before_it_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An endpoint that answers (200) with the caller's key in it, as is, base64 or hex:
    the LLM answer, its cache, the image description and the vision cache never hold it."""
    import base64
    import hashlib

    from parsing.builders import png
    from support.openai_server import Reply

    from corpus_pipeline.llm import LLMClient, LLMConfig
    from corpus_pipeline.models import ExtractedImage
    from corpus_pipeline.vision import VisionConfig, describe_images

    key = "corp-TOKEN-123456789"
    monkeypatch.setenv("VAULT_ECHO_KEY", key)
    encoded = (base64.b64encode(key.encode()).decode(), key.encode().hex())
    echo = f"Bearer {key}, also {encoded[0]} and {encoded[1]}"
    with OpenAIServer() as server:
        server.default = Reply.chat(f"The answer. {echo}")
        llm = LLMConfig(model="m", base_url=server.base_url, max_retries=0, api_key_env="VAULT_ECHO_KEY")
        from corpus_pipeline.llm import llm_settings

        client = LLMClient(llm_settings(llm, env={"VAULT_ECHO_KEY": key}), cache_root=tmp_path / "llm")
        first = client.chat([{"role": "user", "content": "hi"}])
        again = client.chat([{"role": "user", "content": "hi"}])
        client.close()
        assert again.cached and first.content == again.content and first.content.startswith("The answer.")
        server.default = Reply.chat(
            json.dumps({"description": f"A console. {echo}", "keywords": [key], "image_type": "IMAGE",
                        "embedding_text": f"console {key}"})
        )  # fmt: skip
        data = png("CONSOLE")
        sha = hashlib.sha256(data).hexdigest()
        (tmp_path / "img.png").write_bytes(data)
        image = ExtractedImage(sha, "doc1", 0, 1, "image/png", str(tmp_path / "img.png"), width=360, height=120)
        vision = VisionConfig(model="vlm", base_url=server.base_url, api_key_env="VAULT_ECHO_KEY", ocr=False)
        (described,) = describe_images([image], vision, tmp_path / "cache")
    assert described.status == "DESCRIBED" and described.description.startswith("A console.")
    kept = [first.content, repr(described)] + [
        p.read_bytes().decode("utf-8", "replace") for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".png"
    ]
    for text in kept:
        assert key not in text and not any(e in text for e in encoded), text[:300]
