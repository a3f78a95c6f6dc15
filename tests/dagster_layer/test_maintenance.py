"""Search-table maintenance as a Dagster job per KB and a weekly schedule: full-text index
segments and small fragments left by merged writes are merged, old versions dropped; a KB
being written is skipped, not waited for."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pytest
from dagster import SkipReason, build_schedule_context, instance_for_test

from assets.definitions import build_definitions
from assets.maintenance import weekly_maintenance
from assets.runner import index_kb
from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.store import lance as store_lance
from corpus_pipeline.store.lance import FTS_INDEX_NAME, open_search_table, write_search_table
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.locks import kb_lock
from corpus_pipeline.store.snapshots import published_table_version
from corpus_pipeline.store.versions import register_version

pytestmark = pytest.mark.slow

DOC = "# Pumps\n\nPump {n} runs at {p} bar. It is checked every week by the operators.\n"


def _edit(layout: Layout, version: str, n: int) -> None:
    """Document ``n``'s text changed in the table as an index run would write it."""
    tbl = open_search_table(layout, "plant", version)
    rows = tbl.to_arrow()
    vectors = np.stack(rows.column("vector").to_numpy(zero_copy_only=False))
    texts = [
        t.replace("runs at", f"runs (edit {n}) at") if p == f"doc{n}.md" else t
        for t, p in zip(rows.column("text").to_pylist(), rows.column("doc_path").to_pylist(), strict=True)
    ]
    chunks = rows.drop_columns(["vector", "keyword_text", "row_hash"]).set_column(
        rows.schema.get_field_index("text"), "text", pa.array(texts, pa.string())
    )
    assert write_search_table(layout, "plant", version, chunks, vectors).mode == "merge"


def test_the_job_merges_what_writes_left_and_skips_a_busy_kb(corpus_home, monkeypatch):
    monkeypatch.setattr(store_lance.indexes, "FTS_MAX_SEGMENTS", 100)  # writes never merge: maintenance must
    layout = Layout(corpus_home)
    folder = corpus_home / "kbs" / "plant"
    folder.mkdir(parents=True)
    for n in range(6):
        (folder / f"doc{n}.md").write_text(DOC.format(n=n, p=10 + n))
    defs = build_definitions(str(corpus_home))
    kb = resolve_kb(folder)
    version = register_version(layout, kb)
    with instance_for_test() as instance:
        assert index_kb(defs, instance, layout, kb, version, say=lambda s: None).status == "ok"
        for n in range(4):
            _edit(layout, version, n)
        before = open_search_table(layout, "plant", version).index_stats(FTS_INDEX_NAME)
        assert before.num_indices > 1
        job = defs.resolve_job_def("maintain_search_tables")

        with kb_lock(layout, "plant"):  # an index of the KB is writing: skipped, not failed
            busy = job.execute_in_process(instance=instance, partition_key="plant")
        assert busy.success
        assert open_search_table(layout, "plant", version).index_stats(FTS_INDEX_NAME).num_indices == before.num_indices

        done = job.execute_in_process(instance=instance, partition_key="plant")
        assert done.success
        tbl = open_search_table(layout, "plant", version)
        after = tbl.index_stats(FTS_INDEX_NAME)
        assert (after.num_indices, after.num_unindexed_rows) == (1, 0)
        # The edits above were written beside the pipeline, not published: the version the
        # published snapshot names is kept (its readers read it) and the latest; nothing else.
        published = published_table_version(layout, "plant", version)
        assert sorted(v["version"] for v in tbl.list_versions()) == sorted({published, tbl.version})
        hits = tbl.search("edit 3", query_type="fts", fts_columns="keyword_text").limit(3).to_list()
        assert hits and hits[0]["doc_path"] == "doc3.md"


def test_the_weekly_schedule_requests_one_run_per_kb():
    with instance_for_test() as instance:
        ctx = build_schedule_context(instance=instance, scheduled_execution_time=datetime(2026, 12, 6, 3, tzinfo=UTC))
        assert isinstance(weekly_maintenance(ctx), SkipReason)
        instance.add_dynamic_partitions("kb", ["one", "two"])
        reqs = weekly_maintenance(ctx)
        assert isinstance(reqs, list)
        assert [(r.partition_key, r.run_key, r.tags["corpus/kb"]) for r in reqs] == [
            ("one", "maintain|one|2026-12-06", "one"),
            ("two", "maintain|two|2026-12-06", "two"),
        ]
