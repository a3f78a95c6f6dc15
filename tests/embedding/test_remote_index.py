"""A KB embedded by an OpenAI-compatible endpoint, end to end: real Dagster runs, real HTTP
to a local server, LanceDB vectors of the endpoint's size, search through the same
endpoint (with the query prefix); an endpoint that fails leaves the previous version
active and a re-run after the fix gives the rows a clean run gives."""

from __future__ import annotations

import pytest
from dagster import instance_for_test
from support.openai_server import OpenAIServer, Reply, embeddings_handler

from assets.definitions import build_definitions
from assets.runner import index_kb
from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.retrieval import search_kb
from corpus_pipeline.store.lance import open_search_table
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.parquet import read_partition
from corpus_pipeline.store.versions import active_version, register_version, version_embedding

pytestmark = pytest.mark.slow


def _kb_yaml(base_url: str, extra: str = "") -> str:
    return (
        "chunking:\n"
        "  plan: PARENT:RECURSIVE;CHILD:RECURSIVE\n"
        "  parent: {RECURSIVE: {max_chars: 300, overlap_chars: 40}}\n"
        "  child: {RECURSIVE: {max_chars: 120, overlap_chars: 20}}\n"
        "embedding:\n"
        "  provider: openai\n"
        f"  base_url: {base_url}\n"
        "  model: acme-embed\n"
        "  api_key_env: ACME_KEY\n"
        "  query_prefix: 'query: '\n"
        "  passage_prefix: 'passage: '\n"
        "  batch_size: 4\n"
        "  max_retries: 0\n" + extra
    )


def _index(layout: Layout, instance):
    kb = resolve_kb(layout.kb_dir("tiny"))
    version = register_version(layout, kb)
    return index_kb(build_definitions(str(layout.home)), instance, layout, kb, version, say=lambda s: None), version


def test_a_kb_embedded_and_searched_through_an_endpoint(tiny_kb, corpus_home, monkeypatch):
    monkeypatch.setenv("ACME_KEY", "k-123456")
    layout = Layout(corpus_home)
    with OpenAIServer() as server, instance_for_test() as instance:
        server.handler = embeddings_handler(48)
        (tiny_kb / "kb.yaml").write_text(_kb_yaml(server.base_url), encoding="utf-8")
        summary, version = _index(layout, instance)
        assert summary.status == "ok", summary.error
        calls = server.calls("/v1/embeddings")
        sent = [t for c in calls for t in c.body["input"]]
        assert calls and all(len(c.body["input"]) <= 4 for c in calls)
        assert all(t.startswith("passage: ") for t in sent) and len(sent) == summary.child_chunks
        assert {c.headers["authorization"] for c in calls} == {"Bearer k-123456"}
        table = open_search_table(layout, "tiny", version)
        assert table.schema.field("vector").type.list_size == 48
        stored = read_partition(layout.partition_dir("chunk_embeddings", "tiny", version))
        assert set(stored.column("model").to_pylist()) == {"openai:acme-embed|passage: "}

        kb = resolve_kb(layout.kb_dir("tiny"))
        emb = version_embedding(layout, "tiny", version, kb.config.embedding)
        before = len(server.calls("/v1/embeddings"))
        result = search_kb(layout, "tiny", version, "which port does the web console listen on", embedding=emb)
        query_call = server.calls("/v1/embeddings")[before]
        assert query_call.body["input"] == ["query: which port does the web console listen on"]
        assert result.results and "8443" in result.results[0].text
        assert result.raw_hits["vector"] > 0

        # A second run with nothing changed asks the endpoint for nothing (the vector cache).
        n = len(server.calls("/v1/embeddings"))
        again, _ = _index(layout, instance)
        assert again.up_to_date and len(server.calls("/v1/embeddings")) == n


def test_a_failing_endpoint_fails_the_run_names_it_and_keeps_the_previous_version(tiny_kb, corpus_home, monkeypatch):
    layout = Layout(corpus_home)
    with OpenAIServer() as server, instance_for_test() as instance:
        server.handler = embeddings_handler(48)
        (tiny_kb / "kb.yaml").write_text(_kb_yaml(server.base_url), encoding="utf-8")
        first, v1 = _index(layout, instance)
        assert first.status == "ok", first.error
        rows = sorted(open_search_table(layout, "tiny", v1).to_arrow().column("chunk_id").to_pylist())

        # A new version (another child size) while the endpoint is down.
        (tiny_kb / "kb.yaml").write_text(
            _kb_yaml(server.base_url).replace("max_chars: 120", "max_chars: 100"), encoding="utf-8"
        )
        server.handler = lambda request: Reply.error(503, "model is loading")
        failed, v2 = _index(layout, instance)
        assert v2 != v1 and failed.status == "failed"
        assert "embedding endpoint http://127.0.0.1" in failed.error and "model is loading" in failed.error
        assert active_version(layout, "tiny") == v1
        assert sorted(open_search_table(layout, "tiny", v1).to_arrow().column("chunk_id").to_pylist()) == rows

        server.handler = embeddings_handler(48)
        fixed, v2_again = _index(layout, instance)
        assert fixed.status == "ok" and v2_again == v2 and active_version(layout, "tiny") == v2


def test_an_endpoint_moved_in_kb_yaml_is_used_by_the_next_run(tiny_kb, corpus_home, monkeypatch):
    """The endpoint's URL and key variable are not part of the version: after a move, the
    next run of the same version embeds through the new endpoint (not the one registered
    with the version, which is gone), and search does too."""
    layout = Layout(corpus_home)
    monkeypatch.setenv("ACME_KEY", "k-old")
    with instance_for_test() as instance:
        with OpenAIServer() as old:
            old.handler = embeddings_handler(48)
            (tiny_kb / "kb.yaml").write_text(_kb_yaml(old.base_url), encoding="utf-8")
            first, v1 = _index(layout, instance)
            assert first.status == "ok", first.error
        monkeypatch.setenv("ACME_KEY_2", "k-new")
        with OpenAIServer() as new:
            new.handler = embeddings_handler(48)
            (tiny_kb / "kb.yaml").write_text(
                _kb_yaml(new.base_url).replace("api_key_env: ACME_KEY", "api_key_env: ACME_KEY_2"), encoding="utf-8"
            )
            with open(tiny_kb / "harbor.md", "a", encoding="utf-8") as f:
                f.write("\n\nThe audit log is exported to the archive bucket every night at two.\n")
            second, v2 = _index(layout, instance)
            assert second.status == "ok", second.error
            assert v2 == v1 and second.documents_parsed == 1
            calls = new.calls("/v1/embeddings")
            assert calls and {c.headers["authorization"] for c in calls} == {"Bearer k-new"}
            assert any("archive bucket" in t for c in calls for t in c.body["input"])
            kb = resolve_kb(layout.kb_dir("tiny"))
            emb = version_embedding(layout, "tiny", v2, kb.config.embedding)
            result = search_kb(layout, "tiny", v2, "when is the audit log exported", embedding=emb)
            assert result.results and "archive bucket" in result.results[0].text
