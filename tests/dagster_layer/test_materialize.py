"""Real Dagster runs of a tiny KB into a temporary CORPUS_HOME: Parquet partitions in
hive folders, a LanceDB table with vectors and full-text search, idempotent re-runs."""

from __future__ import annotations

import duckdb
import pytest
from dagster import DagsterInstance, instance_for_test

from assets.definitions import build_definitions
from assets.runner import index_kb
from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.retrieval import search_children
from corpus_pipeline.store.lance import open_search_table
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.versions import active_version, register_version

pytestmark = pytest.mark.slow


def _index(instance: DagsterInstance, layout: Layout, force: bool = False):
    kb = resolve_kb(layout.kb_dir("tiny"))
    version = register_version(layout, kb)
    defs = build_definitions(str(layout.home))
    return index_kb(defs, instance, layout, kb, version, say=lambda s: None, force=force), version


def test_a_tiny_kb_is_indexed_end_to_end_and_a_rerun_duplicates_nothing(tiny_kb, corpus_home):
    layout = Layout(corpus_home)
    with instance_for_test() as instance:
        summary, version = _index(instance, layout)
        assert summary.status == "ok", summary.error
        assert summary.documents == 2 and summary.failed_documents == []
        assert summary.child_chunks > summary.parent_blocks >= 2
        assert summary.embedded == summary.child_chunks and summary.reused == 0
        assert active_version(layout, "tiny") == version

        # Hive-style partitions DuckDB can read directly.
        folder = layout.warehouse / "child_chunks" / "kb=tiny" / f"strategy_version={version}"
        part = f"{folder}/data-*.parquet"  # one file per batch of documents
        assert list(folder.glob("data-*.parquet"))
        rows = duckdb.sql(
            f"select kb, strategy_version, count(*) n, count(distinct chunk_id) ids "
            f"from read_parquet('{layout.warehouse}/child_chunks/*/*/*.parquet', hive_partitioning=true) group by all"
        ).fetchall()
        assert rows == [("tiny", version, summary.child_chunks, summary.child_chunks)]

        # Every child lies inside its parent and has exact offsets into the canonical text.
        texts = {
            r["doc_id"]: r["text"]
            for r in duckdb.sql(
                f"select doc_id, text from read_parquet('{layout.warehouse}/parsed_blocks/kb=tiny/texts-*.parquet')"
            )
            .to_arrow_table()
            .to_pylist()
        }
        chunks = (
            duckdb.sql(
                f"select c.*, p.start_offset ps, p.end_offset pe from read_parquet('{part}') c "
                f"join read_parquet('{layout.warehouse}/parent_blocks/*/*/*.parquet') p using (parent_id)"
            )
            .to_arrow_table()
            .to_pylist()
        )
        assert len(chunks) == summary.child_chunks
        for c in chunks:
            assert texts[c["doc_id"]][c["start_offset"] : c["end_offset"]] == c["text"]
            assert c["ps"] <= c["start_offset"] < c["end_offset"] <= c["pe"]
            assert c["char_count"] <= 120

        tbl = open_search_table(layout, "tiny", version)
        assert tbl.count_rows() == summary.child_chunks
        runs_before = len(instance.get_runs())

        again, _ = _index(instance, layout)  # nothing changed: no run at all
        assert again.up_to_date and again.partitions_run == [] and again.runs == []
        assert (again.documents, again.child_chunks, again.reused) == (2, summary.child_chunks, summary.child_chunks)
        assert len(instance.get_runs()) == runs_before

        forced, _ = _index(instance, layout, force=True)  # re-run everything: same rows, no duplicates
        assert forced.status == "ok" and len(forced.runs) == 2
        assert (forced.documents_parsed, forced.documents_reused) == (0, 2)
        assert forced.embedded == 0 and forced.reused == summary.child_chunks  # the cache answers
        assert open_search_table(layout, "tiny", version).count_rows() == summary.child_chunks
        assert len(instance.get_runs()) == runs_before + 2  # both runs are on the instance

        hits = search_children(
            layout, "tiny", version, "which port does the web console use", embedding="all-MiniLM-L6-v2"
        )
        assert "8443" in hits[0].text
        hits = search_children(layout, "tiny", version, "扩容", embedding="all-MiniLM-L6-v2")
        assert any("16 个实例" in h.text and "keyword" in h.channels for h in hits)


def test_a_bad_document_is_recorded_and_the_rest_is_indexed(tiny_kb, corpus_home):
    (tiny_kb / "junk.md").write_bytes(b"\x00\x01\x02binary junk\x00" * 100)
    (tiny_kb / "empty.txt").write_text("")
    with instance_for_test() as instance:
        summary, _ = _index(instance, Layout(corpus_home))
    assert summary.status == "ok"
    assert summary.documents == 4
    failed = {f["path"]: f["error"] for f in summary.failed_documents}
    assert set(failed) == {"junk.md", "empty.txt"}
    assert "binary" in failed["junk.md"] and "empty" in failed["empty.txt"]
    assert summary.child_chunks > 0


def test_a_serial_run_keeps_no_step_output_in_memory(tiny_kb, corpus_home):
    """A serial ``corpus index`` runs the steps one after another in its own process: an
    output lives in its partition on disk, not in the run. (``execute_in_process`` keeps
    every step's output until the run ends, so a serial index of a large KB held all of
    its batches and stages at once: its peak memory grew with the KB.)"""
    import gc

    from assets.runner import _run_job, register_partitions
    from corpus_pipeline.indexing.stats import StageResult

    layout = Layout(corpus_home)
    kb = resolve_kb(layout.kb_dir("tiny"))
    defs = build_definitions(str(layout.home))
    gc.collect()
    before = {id(o) for o in gc.get_objects() if type(o) is StageResult}  # (earlier tests')
    with instance_for_test() as instance:
        register_partitions(instance, kb.name, register_version(layout, kb))
        result = _run_job(defs, "parse_kb", kb.name, instance, {}, 1, str(layout.home))
        assert result.success
        gc.collect()
        held = [o for o in gc.get_objects() if type(o) is StageResult and id(o) not in before]
        assert held == [], f"{len(held)} stage outputs still in memory after the run"
