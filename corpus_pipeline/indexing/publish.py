"""Stage 6, publish: the search table of a version (the ``search_index`` asset), then the
version becomes the KB's active one if it is the one kb.yaml yields now, and versions past
the retention count are retired.

``search_index`` runs only after the blocking checks upstream passed, so a version whose
chunks or vectors are bad is never searched. Activation is one small file replaced
atomically (``store.versions.set_active``): searches during the switch read the old
version or the new, never half of one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from corpus_pipeline import freshness
from corpus_pipeline.errors import StoreError
from corpus_pipeline.indexing.embed import vectors_of
from corpus_pipeline.indexing.stats import PublishStats
from corpus_pipeline.store.layout import Layout, search_table_name
from corpus_pipeline.store.versions import (
    active_version,
    build_kb,
    current_version,
    retire_version,
    set_active,
    versions_to_retire,
)

if TYPE_CHECKING:
    from corpus_pipeline.store.lance import TableWrite


def write_search_index(layout: Layout, kb: str, version: str, children: pa.Table, embeddings: pa.Table) -> TableWrite:
    """Bring the LanceDB table of (kb, version) to the chunks and their vectors (only the
    changed documents' rows are written to an existing table: ``store.lance.write_search_table``)."""
    from corpus_pipeline.store.lance import write_search_table

    ids = children.column("chunk_id").to_pylist()
    emb_ids = embeddings.column("chunk_id").to_pylist()
    if ids != emb_ids:
        # Produced in the same order, but never trust that silently: align by id.
        order = {cid: i for i, cid in enumerate(emb_ids)}
        missing = [c for c in ids if c not in order]
        if missing:
            raise StoreError(f"{len(missing)} chunks of {kb}|{version} have no vector (first: {missing[0]})")
        embeddings = embeddings.take([order[c] for c in ids])
    return write_search_table(
        layout, kb, version, children, vectors_of(embeddings), ann_min_rows=ann_min_rows(layout, kb)
    )


def ann_min_rows(layout: Layout, kb: str) -> int:
    """``search.ann_min_rows`` of the KB's kb.yaml as it is now (search settings are read
    live, like ``corpus search`` does, not from the version's registration)."""
    from corpus_pipeline.kbconfig import load_kb_config

    return load_kb_config(layout.kb_dir(kb)).search.ann_min_rows


def publish_version(layout: Layout, kb: str, version: str, children: pa.Table, embeddings: pa.Table) -> PublishStats:
    """Write the search table, record the build, activate the version if it is the KB's
    current one, and retire versions past ``retention.keep_versions``."""
    write = write_search_index(layout, kb, version, children, embeddings)
    freshness.record_indexed(layout, kb, version)
    stats = PublishStats(
        rows=write.rows,
        table=search_table_name(kb, version),
        write=write.mode,
        rows_written=write.rows_written,
        rows_deleted=write.rows_deleted,
        docs_changed=write.docs_changed,
    )
    stats.retired_versions = activate_if_current(layout, kb, version)
    stats.activated = active_version(layout, kb) == version and current_version(layout, kb) == version
    stats.active_version = active_version(layout, kb)
    return stats


def activate_if_current(layout: Layout, kb: str, version: str) -> list[str]:
    """Make ``version`` the active one when kb.yaml yields it now (CURRENT) and its search
    table is built, then retire versions past ``retention.keep_versions``; returns the
    retired ones. Called after a build, and when kb.yaml was reverted to a version that is
    already built (nothing to run, but search must serve what kb.yaml says). A built table
    means its blocking checks passed: ``search_index`` runs only after them."""
    if current_version(layout, kb) != version or not layout.search_table_dir(kb, version).is_dir():
        return []
    if active_version(layout, kb) != version:
        set_active(layout, kb, version)
    keep = build_kb(layout, kb, version).config.retention.keep_versions
    retired = []
    for old in versions_to_retire(layout, kb, keep):
        retire_version(layout, kb, old)
        retired.append(old)
    return retired


def maintain_kb(layout: Layout, kb: str) -> dict[str, dict[str, object]]:
    """``store.lance.maintain_search_table`` on every built search table of ``kb`` (by
    strategy version), under the KB's write lock (``KBBusyError`` when a writer holds it: an
    index in progress does this work's part itself)."""
    from corpus_pipeline.store.lance import maintain_search_table, open_search_table
    from corpus_pipeline.store.locks import kb_lock
    from corpus_pipeline.store.versions import known_versions

    out: dict[str, dict[str, object]] = {}
    with kb_lock(layout, kb):
        for version in known_versions(layout, kb):
            if layout.search_table_dir(kb, version).is_dir():
                tbl = open_search_table(layout, kb, version)
                out[version] = maintain_search_table(tbl, ann_min_rows(layout, kb))
    return out
