"""Stage 6, publish: the search table of a version (the ``search_index`` asset), then the
version's snapshot (its partitions' manifests and the table's version, switched by one
write: ``store.snapshots.publish``), then the version becomes the KB's active one if it is
the one kb.yaml yields now, and versions past the retention count are retired.

``search_index`` runs only after the blocking checks upstream passed, so a version whose
chunks or vectors are bad is never searched. Until the snapshot is switched every reader
(search, lineage, the page, stats, eval) reads the previous one, whole. Activation is one
small file replaced atomically (``store.versions.set_active``): searches during the switch
read the old version or the new, never half of one.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

import corpus_pipeline.indexing.rows as rows
from corpus_pipeline import freshness
from corpus_pipeline.errors import StoreError
from corpus_pipeline.indexing.embed import vectors_of
from corpus_pipeline.indexing.stats import PublishStats
from corpus_pipeline.store.layout import Layout, search_table_name
from corpus_pipeline.store.parquet import iter_slices
from corpus_pipeline.store.schemas import SEARCH_COLUMNS
from corpus_pipeline.store.versions import (
    active_version,
    build_kb,
    current_version,
    failed_versions,
    retire_version,
    set_active,
    versions_to_retire,
)

if TYPE_CHECKING:
    from corpus_pipeline.store.lance import SearchInput, TableWrite


def write_search_index(
    layout: Layout, kb: str, version: str, children: pa.Table | pads.Dataset, embeddings: pa.Table | pads.Dataset
) -> TableWrite:
    """Bring the LanceDB table of (kb, version) to the chunks and their vectors (only the
    changed documents' rows are written to an existing table: ``store.lance.write_search_input``).
    ``children`` and ``embeddings`` are tables, or the partitions' Parquet datasets: then
    they are read a slice at a time (``PartitionInput``), never whole."""
    from corpus_pipeline.store.lance import write_search_input

    source = search_input(kb, version, children, embeddings)
    return write_search_input(layout, kb, version, source, ann_min_rows=ann_min_rows(layout, kb))


def search_input(
    kb: str, version: str, children: pa.Table | pads.Dataset, embeddings: pa.Table | pads.Dataset
) -> SearchInput:
    """The chunks and their vectors, lined up row by row. Both are produced in the same
    order; when they are not (never silently trusted), the vectors are aligned by chunk id,
    in memory."""
    from corpus_pipeline.store.lance import TableInput

    ids = _column(children, "chunk_id")
    emb_ids = _column(embeddings, "chunk_id")
    if ids.equals(emb_ids) and len(ids) and isinstance(children, pads.Dataset) and isinstance(embeddings, pads.Dataset):
        dim = int(embeddings.schema.field("vector").type.list_size)
        return PartitionInput(children, embeddings, len(ids), dim)
    chunks = children if isinstance(children, pa.Table) else children.to_table()
    vectors = embeddings if isinstance(embeddings, pa.Table) else embeddings.to_table()
    if not ids.equals(emb_ids):
        order = {cid: i for i, cid in enumerate(emb_ids.to_pylist())}
        missing = [c for c in ids.to_pylist() if c not in order]
        if missing:
            raise StoreError(f"{len(missing)} chunks of {kb}|{version} have no vector (first: {missing[0]})")
        vectors = vectors.take([order[c] for c in ids.to_pylist()])
    try:
        return TableInput(chunks, vectors_of(vectors))
    except StoreError as exc:
        raise StoreError(f"{exc} for {kb}|{version}") from None


def _column(data: pa.Table | pads.Dataset, name: str) -> pa.ChunkedArray[Any]:
    return data.column(name) if isinstance(data, pa.Table) else data.to_table(columns=[name]).column(name)


@dataclass(frozen=True)
class PartitionInput:
    """A ``store.lance.SearchInput`` read from the Parquet files of the ``child_chunks``
    and ``chunk_embeddings`` partitions, a slice at a time, in the same row order (their
    chunk ids were compared whole; each slice's are checked again). A file's name is a hash
    of its bytes (``store.parquet``): a merge reads only the files new since the last write
    (``docs_from``) and the rows of the documents it writes (``rows_of``)."""

    children: pads.Dataset
    embeddings: pads.Dataset
    rows: int
    dim: int

    def slices(self) -> Iterator[tuple[pa.Table, np.ndarray]]:
        from corpus_pipeline.store.lance.rows import PY_SLICE_ROWS  # (read when called: tests change it)

        chunks = iter_slices(self.children, list(SEARCH_COLUMNS), PY_SLICE_ROWS)
        vectors = iter_slices(self.embeddings, ["chunk_id", "vector"], PY_SLICE_ROWS)
        for c, e in zip(chunks, vectors, strict=True):
            yield c, _vectors(c, e)

    def vector_slices(self) -> Iterator[np.ndarray]:
        from corpus_pipeline.store.lance.rows import PY_SLICE_ROWS  # (read when called: tests change it)

        return (vectors_of(e) for e in iter_slices(self.embeddings, ["vector"], PY_SLICE_ROWS))

    def sources(self) -> dict[str, list[str]]:
        return {"children": _names(self.children), "embeddings": _names(self.embeddings)}

    def doc_ids(self) -> pa.ChunkedArray[Any]:
        return self._doc_ids

    @functools.cached_property
    def _doc_ids(self) -> pa.ChunkedArray[Any]:  # (read once: a merge asks three times)
        return self.children.to_table(columns=["doc_id"]).column("doc_id")

    @functools.cached_property
    def _file_spans(self) -> dict[str, list[tuple[int, int]]]:  # (each file's rows, from its footer: once)
        return {"children": rows.file_spans(self.children), "embeddings": rows.file_spans(self.embeddings)}

    def docs_from(self, sources: dict[str, list[str]]) -> set[str]:
        """The documents with a row in a file ``sources`` does not list: their rows may be
        new (a file of children, by document) or have a new vector (a file of vectors, by
        chunk: its rows' documents, by position, the two partitions' rows lining up)."""
        known = {k: set(v) for k, v in sources.items()}
        docs: set[str] = set()
        new_vectors = [i for i, name in enumerate(_names(self.embeddings)) if name not in known.get("embeddings", ())]
        doc_ids = self.doc_ids() if new_vectors else None
        for fragment in self.children.get_fragments():
            if _name(fragment) not in known.get("children", ()):
                docs.update(
                    str(d) for d in pc.unique(fragment.to_table(columns=["doc_id"]).column("doc_id")).to_pylist()
                )
        if doc_ids is not None:
            spans = self._file_spans["embeddings"]
            for i in new_vectors:
                start, end = spans[i]
                docs.update(str(d) for d in pc.unique(doc_ids.slice(start, end - start)).to_pylist())
        return docs

    def rows_of(self, docs: set[str]) -> Iterator[tuple[pa.Table, np.ndarray]]:
        """The chunks and vectors of ``docs``: only the files that hold them are read."""
        if not docs:
            return
        hit: Any = pc.is_in(self.doc_ids().cast(pa.string()), value_set=pa.array(sorted(docs), pa.string()))
        at = np.flatnonzero(np.asarray(hit.to_numpy(zero_copy_only=False), dtype=bool))
        if not len(at):
            return
        chunks = rows.take_at(self.children, self._file_spans["children"], list(SEARCH_COLUMNS), at)
        vectors = rows.take_at(self.embeddings, self._file_spans["embeddings"], ["chunk_id", "vector"], at)
        yield chunks, _vectors(chunks, vectors)


def _vectors(chunks: pa.Table, embeddings: pa.Table) -> np.ndarray:
    if not chunks.column("chunk_id").equals(embeddings.column("chunk_id")):
        raise StoreError("child_chunks and chunk_embeddings changed while the search table was written")
    return vectors_of(embeddings)


def _name(fragment: Any) -> str:
    return str(fragment.path).rsplit("/", 1)[-1]


def _names(ds: pads.Dataset) -> list[str]:
    return [_name(f) for f in ds.get_fragments()]


def ann_min_rows(layout: Layout, kb: str) -> int:
    """``search.ann_min_rows`` of the KB's kb.yaml as it is now (search settings are read
    live, like ``corpus search`` does, not from the version's registration)."""
    from corpus_pipeline.kbconfig import load_kb_config

    return load_kb_config(layout.kb_dir(kb)).search.ann_min_rows


def publish_version(
    layout: Layout, kb: str, version: str, children: pa.Table | pads.Dataset, embeddings: pa.Table | pads.Dataset
) -> PublishStats:
    """Write the search table, record the build, activate the version if it is the KB's
    current one, and retire versions past ``retention.keep_versions``."""
    from corpus_pipeline.store.snapshots import publish

    write = write_search_index(layout, kb, version, children, embeddings)
    publish(layout, kb, version)
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
    retired ones: built versions past ``keep_versions`` and older versions that were never
    built (``failed_versions``: their text goes once a newer one is built). Called after a build, and when kb.yaml was reverted to a version that is
    already built (nothing to run, but search must serve what kb.yaml says). A built table
    means its blocking checks passed: ``search_index`` runs only after them."""
    if current_version(layout, kb) != version or not layout.search_table_dir(kb, version).is_dir():
        return []
    if active_version(layout, kb) != version:
        set_active(layout, kb, version)
    keep = build_kb(layout, kb, version).config.retention.keep_versions
    retired = []
    for old in [*versions_to_retire(layout, kb, keep), *failed_versions(layout, kb, version)]:
        retire_version(layout, kb, old)
        retired.append(old)
    return retired


def maintain_kb(layout: Layout, kb: str) -> dict[str, dict[str, object]]:
    """``store.lance.maintain_search_table`` on every built search table of ``kb`` (by
    strategy version), under the KB's write lock (``KBBusyError`` when a writer holds it: an
    index in progress does this work's part itself)."""
    from corpus_pipeline.store.lance import maintain_search_table, open_search_table
    from corpus_pipeline.store.locks import kb_lock
    from corpus_pipeline.store.snapshots import move_table, published_table_version
    from corpus_pipeline.store.versions import known_versions

    out: dict[str, dict[str, object]] = {}
    with kb_lock(layout, kb):
        for version in known_versions(layout, kb):
            if layout.search_table_dir(kb, version).is_dir():
                tbl = open_search_table(layout, kb, version)
                published = published_table_version(layout, kb, version)
                unchanged = published is not None and published == int(tbl.version)
                out[version] = maintain_search_table(tbl, ann_min_rows(layout, kb))
                if unchanged:  # (the same rows, compacted and indexed: readers move to them)
                    move_table(layout, kb, version, int(tbl.version))
    return out
