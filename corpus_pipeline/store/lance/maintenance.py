"""Keeping a table small and its history short: purging deleted rows, merging fragments and
index segments, pruning old versions (never a tagged, published one), tagging the published one."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from corpus_pipeline.store.defaults import VECTOR_INDEX_MIN_ROWS
from corpus_pipeline.store.lance import rows as lance_rows
from corpus_pipeline.store.lance.ann import VECTOR_INDEX_NAME, ensure_vector_index
from corpus_pipeline.store.lance.indexes import FTS_INDEX_NAME, update_scalar_indexes

#: The tags of the version the published snapshot of a table names (``store.snapshots``),
#: and, while a publish switches, of the one it names until then: ``prune_history`` keeps
#: tagged versions.
PUBLISHED_TAG, SWITCHING_FROM_TAG = "published", "published-before"


def purge_deleted_rows(tbl: Any) -> None:
    """Rewrite every fragment of ``tbl`` that holds deleted rows without them (a deleted or
    edited document's old text stays in a fragment's file until then), merging small
    fragments up to ``lance_rows.FRAGMENT_ROWS``; the fragments of unchanged rows are not touched."""
    ds = tbl.to_lance()
    if not any(f.metadata.deletion_file is not None for f in ds.get_fragments()) and len(ds.get_fragments()) <= 1:
        return
    ds.optimize.compact_files(target_rows_per_fragment=lance_rows.FRAGMENT_ROWS, materialize_deletions_threshold=0.0)
    tbl.checkout_latest()


def maintain_search_table(tbl: Any, ann_min_rows: int = VECTOR_INDEX_MIN_ROWS) -> dict[str, Any]:
    """The maintenance that writes do not pay for each time (the ``maintain_search_tables``
    job, weekly): small fragments merged up to ``lance_rows.FRAGMENT_ROWS`` (and any with deleted rows
    rewritten), the full-text index's delta segments merged into one, the ``parent_id`` and
    ``doc_id`` indexes created when missing (a table written before them), the ANN index brought up
    to date (retrained when the table outgrew it) and its delta segments merged (each costs
    every query a search: at 1M children one delta doubled p50, ``benchmarks/ann``), old
    versions removed. Returns what it did."""
    ds = tbl.to_lance()
    before = len(ds.get_fragments())
    metrics = ds.optimize.compact_files(
        target_rows_per_fragment=lance_rows.FRAGMENT_ROWS, materialize_deletions_threshold=0.0
    )
    tbl.checkout_latest()
    stats = tbl.index_stats(FTS_INDEX_NAME)
    segments = int(getattr(stats, "num_indices", 0) or 0) if stats is not None else 0
    if segments > 1 or (stats is not None and stats.num_unindexed_rows):
        tbl.to_lance().optimize.optimize_indices(index_names=[FTS_INDEX_NAME], num_indices_to_merge=max(segments, 1))
        tbl.checkout_latest()
    scalar = update_scalar_indexes(tbl) if tbl.count_rows() else []
    ann: str = ensure_vector_index(tbl, ann_min_rows)
    vstats = tbl.index_stats(VECTOR_INDEX_NAME)
    deltas = int(getattr(vstats, "num_indices", 0) or 0) if vstats is not None else 0
    if deltas > 1:  # each incremental optimize left a delta segment; every query searches them all
        tbl.to_lance().optimize.optimize_indices(index_names=[VECTOR_INDEX_NAME], num_indices_to_merge=deltas)
        tbl.checkout_latest()
        ann = f"{ann}, {deltas} segments merged" if ann != "none" else f"{deltas} segments merged"
    prune_history(tbl)
    return {
        "fragments_before": before,
        "fragments_after": len(tbl.to_lance().get_fragments()),
        "fragments_rewritten": int(metrics.fragments_removed),
        "fts_segments_merged": segments if segments > 1 else 0,
        "scalar_indexes_updated": scalar,
        "ann": ann,
    }


def prune_history(tbl: Any) -> None:
    """Drop every older version of a search table (and files no version uses, e.g. from a
    write killed half way): old versions are only the text of deleted and edited documents,
    readable through ``checkout``, and a table would grow with every write. Rollback is
    between strategy versions, which are separate tables (kept by
    ``retention.keep_versions``). The version the published snapshot names is tagged
    (``pin_table_version``) and kept: its readers read on while the next one is built. One writer per KB (``store.locks``) makes ``delete_unverified`` safe: no other
    transaction can be in progress on this table."""
    tbl.to_lance().cleanup_old_versions(
        older_than=timedelta(0), delete_unverified=True, error_if_tagged_old_versions=False
    )
    tbl.checkout_latest()


def pin_table_version(tbl: Any, version: int, keep: int | None = None) -> None:
    """Tag ``version`` as the published one and ``keep`` (the version the snapshot file still
    names, while a publish switches) as well, so that no prune removes either: a publish
    killed before its switch leaves the version its readers read tagged. Without ``keep``
    only ``version`` stays tagged (the next prune removes the rest)."""
    tags = tbl.to_lance().tags
    have = {name: info.get("version") for name, info in tags.list().items()}
    wanted = {PUBLISHED_TAG: version, SWITCHING_FROM_TAG: keep if keep != version else None}
    for name, v in wanted.items():
        if v is None:
            if name in have:
                tags.delete(name)
        elif name not in have:
            tags.create(name, int(v))
        elif have[name] != v:
            tags.update(name, int(v))
