"""Indexing a KB whose plan calls an LLM: the client comes from kb.yaml's ``llm:`` section,
usage is reported in the chunk stats, a re-run pays for nothing, a document whose calls
failed is redone once the endpoint works, and the strategy version names the model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import TINY_EN, TINY_ZH
from support.openai_server import OpenAIServer, Reply

from corpus_pipeline import indexing
from corpus_pipeline.chunking.context import ContextFactory
from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.versions import register_version
from corpus_pipeline.versioning import strategy_version, version_inputs
from llm.conftest import KEY

PLAN = "PARENT:RECURSIVE;CHILD:PROPOSITION"


def write_kb(home: Path, server: OpenAIServer, plan: str = PLAN, llm: str = "") -> Path:
    kb = home / "kbs" / "facts"
    kb.mkdir(parents=True, exist_ok=True)
    (kb / "harbor.md").write_text(TINY_EN, encoding="utf-8")
    (kb / "cpu.txt").write_text(TINY_ZH, encoding="utf-8")
    (kb / "kb.yaml").write_text(
        "chunking:\n"
        f"  plan: {plan}\n"
        "  parent: {RECURSIVE: {max_chars: 400, overlap_chars: 0}}\n"
        "  child: {PROPOSITION: {max_chunk_size: 200, min_chunk_size: 20}, LLM: {llm_enabled: true}}\n"
        f"llm: {{base_url: '{server.base_url}', model: facts-model, api_key_env: FACTS_KEY, max_retries: 0,"
        f" timeout_s: 20{llm}}}\n",
        encoding="utf-8",
    )
    return kb


@pytest.fixture
def kb_env(corpus_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FACTS_KEY", KEY)
    for name in ("OPENAI_BASE_URL", "CORPUS_LLM_MODEL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return corpus_home


def tools(kb):
    """Each stage opens its own tools, as each asset does (the LLM client counts per stage)."""
    return ContextFactory.for_kb(kb, cache_dir=Layout.from_env().cache)


def chunk(kb_dir: Path, previous: dict | None = None):
    kb = resolve_kb(kb_dir)
    version = strategy_version(kb)
    parsed = indexing.parse_documents(kb, indexing.discover_documents(kb).tables).tables
    with tools(kb) as t:
        parents = indexing.build_parent_blocks(kb, version, parsed, (previous or {}).get("parents"), t).tables
    with tools(kb) as t:
        result = indexing.build_child_chunks(kb, version, parents, parsed, {}, (previous or {}).get("children"), t)
    return parsed, parents, result.tables, result.stats


def test_children_are_propositions_with_llm_usage_in_the_stats_and_a_rerun_is_free(
    model_server: OpenAIServer, kb_env: Path
) -> None:
    kb_dir = write_kb(kb_env, model_server)
    _, parents, children, stats = chunk(kb_dir)
    rows = children.to_pylist()
    assert rows and {r["chunk_type"] for r in rows} == {"PROPOSITION"} and all(r["derived"] for r in rows)
    assert all(json.loads(r["metadata"])["llm_model"] == "facts-model" for r in rows)
    calls = len(model_server.calls())
    assert calls >= 2 and (stats.llm_calls, stats.llm_cache_hits, stats.llm_errors) == (calls, 0, 0)
    assert stats.llm_prompt_tokens == calls and stats.fallbacks == 0
    assert model_server.calls()[0].headers["authorization"] == f"Bearer {KEY}"
    # each child's span is its batch, inside its parent
    by_parent = {r["parent_id"]: r for r in parents.to_pylist()}
    assert all(
        by_parent[r["parent_id"]]["start_offset"]
        <= r["start_offset"]
        < r["end_offset"]
        <= by_parent[r["parent_id"]]["end_offset"]
        for r in rows
    )

    # the same chunking again, without the previous output: every answer from the cache
    _, _, again, stats2 = chunk(kb_dir)
    assert again.column("chunk_id").to_pylist() == children.column("chunk_id").to_pylist()
    assert len(model_server.calls()) == calls and (stats2.llm_calls, stats2.llm_cache_hits) == (0, calls)
    stored = "".join(p.read_text() for p in Layout.from_env().cache.rglob("*.json"))
    assert KEY not in stored


def test_documents_whose_calls_failed_are_redone_when_the_endpoint_works(
    openai_server: OpenAIServer, kb_env: Path
) -> None:
    from llm.conftest import fake_model

    openai_server.default = Reply.error(500)
    kb_dir = write_kb(kb_env, openai_server)
    _, parents, children, stats = chunk(kb_dir)
    metas = [json.loads(m) for m in children.column("metadata").to_pylist()]
    assert all(m["fallback_from"] == "PROPOSITION" and m["llm_retry"] for m in metas)
    assert "InternalServerError" in metas[0]["fallback_reason"]
    assert (stats.fallbacks, stats.llm_calls, stats.llm_errors) == (2, 2, 2)  # one batch per document

    openai_server.handler = fake_model
    openai_server.default = None  # type: ignore[assignment]
    _, _, redone, stats2 = chunk(kb_dir, {"parents": parents, "children": children})
    assert stats2.reused == 0 and stats2.documents == 2 and stats2.fallbacks == 0
    assert {r["chunk_type"] for r in redone.to_pylist()} == {"PROPOSITION"}
    # and now they are kept: nothing to retry, nothing called
    n = len(openai_server.calls())
    _, _, _, stats3 = chunk(kb_dir, {"parents": parents, "children": redone})
    assert stats3.reused == 2 and len(openai_server.calls()) == n


def test_the_version_names_the_llm_model_only_for_plans_that_call_one(
    openai_server: OpenAIServer, kb_env: Path
) -> None:
    kb_dir = write_kb(kb_env, openai_server)
    v1 = strategy_version(resolve_kb(kb_dir))
    assert version_inputs(resolve_kb(kb_dir))["llm"] == {"model": "facts-model", "enabled": True}
    text = (kb_dir / "kb.yaml").read_text()
    (kb_dir / "kb.yaml").write_text(text.replace("timeout_s: 20", "timeout_s: 30"))
    assert strategy_version(resolve_kb(kb_dir)) == v1  # endpoint settings shape no chunk
    (kb_dir / "kb.yaml").write_text(text.replace("facts-model", "other-model"))
    assert strategy_version(resolve_kb(kb_dir)) != v1
    (kb_dir / "kb.yaml").write_text(text.replace(PLAN, "PARENT:RECURSIVE;CHILD:RECURSIVE"))
    assert "llm" not in version_inputs(resolve_kb(kb_dir))
    (kb_dir / "kb.yaml").write_text(
        text.replace(PLAN, "PARENT:RECURSIVE;CHILD:LLM").replace(
            "LLM: {llm_enabled: true}", "LLM: {llm_enabled: false}"
        )
    )
    assert "llm" not in version_inputs(resolve_kb(kb_dir))


@pytest.mark.slow
def test_indexing_through_dagster_again_makes_no_new_calls(model_server: OpenAIServer, kb_env: Path) -> None:
    from dagster import instance_for_test

    from assets.definitions import build_definitions
    from assets.runner import index_kb

    kb_dir = write_kb(kb_env, model_server, plan="PARENT:RECURSIVE;CHILD:LLM")
    layout = Layout(kb_env)
    kb = resolve_kb(kb_dir)
    version = register_version(layout, kb)
    defs = build_definitions(str(layout.home))
    with instance_for_test() as instance:
        first = index_kb(defs, instance, layout, kb, version, say=lambda s: None)
        assert first.status == "ok", first.error
        calls = len(model_server.calls())
        assert calls >= 2

        from corpus_pipeline.store.parquet import read_table

        rows = read_table(layout.partition_dir("child_chunks", "facts", version)).to_pylist()
        texts = {
            r["doc_id"]: r["text"]
            for r in read_table(layout.partition_dir("parsed_blocks", "facts"), "texts").to_pylist()
        }
        assert all(json.loads(r["metadata"]).get("llm_verbatim") for r in rows)
        assert all(texts[r["doc_id"]][r["start_offset"] : r["end_offset"]] == r["text"] for r in rows)

        # a forced re-run with the chunk partitions gone (nothing to reuse): answers from the cache
        for asset in ("parent_blocks", "child_chunks"):
            shutil.rmtree(layout.partition_dir(asset, "facts", version))
        rebuilt = index_kb(defs, instance, layout, kb, version, say=lambda s: None, force=True)
        assert rebuilt.status == "ok" and len(model_server.calls()) == calls
        assert read_table(layout.partition_dir("child_chunks", "facts", version)).column("chunk_id").to_pylist() == [
            r["chunk_id"] for r in rows
        ]


def test_stats_are_zero_for_a_kb_without_llm_steps(tiny_kb: Path) -> None:
    _, _, children, stats = chunk(tiny_kb)
    assert isinstance(children, pa.Table) and children.num_rows
    assert (stats.llm_calls, stats.llm_cache_hits, stats.llm_prompt_tokens, stats.llm_errors) == (0, 0, 0, 0)
