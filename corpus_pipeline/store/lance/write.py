"""Writing a search table: whole, or only the changed documents' rows merged in, one commit."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from corpus_pipeline.errors import StoreError
from corpus_pipeline.store.defaults import VECTOR_INDEX_MIN_ROWS
from corpus_pipeline.store.lance import rows as lance_rows
from corpus_pipeline.store.lance.ann import ensure_vector_index
from corpus_pipeline.store.lance.connection import connect, list_table_names, storage_options
from corpus_pipeline.store.lance.indexes import update_fts, update_scalar_indexes
from corpus_pipeline.store.lance.maintenance import prune_history, purge_deleted_rows
from corpus_pipeline.store.lance.rows import (
    ROW_HASH_COLUMN,
    SearchInput,
    TableInput,
    TableSummary,
    add_sums,
    fixed_sum,
    input_sum,
    rows_digest,
    search_rows,
    table_schema,
)
from corpus_pipeline.store.layout import Layout, search_table_name
from corpus_pipeline.store.memory import give_back
from corpus_pipeline.store.schemas import vector_matrix
from corpus_pipeline.store.sql import sql_string

#: When more than this share of a table's rows is new (or of its old rows deleted), replacing
#: the whole table is cheaper than merging: it is written anew.
REWRITE_SHARE = 0.5


@dataclass(frozen=True)
class TableWrite:
    """What one ``write_search_table`` did: ``mode`` ``create`` (a new table), ``replace``
    (the table written anew), ``merge`` (only changed documents' rows) or ``unchanged``;
    ``rows`` in the table after it; rows inserted and deleted, and documents changed."""

    rows: int
    mode: Literal["create", "replace", "merge", "unchanged"]
    rows_written: int = 0
    rows_deleted: int = 0
    docs_changed: int = 0


def write_search_table(
    layout: Layout,
    kb: str,
    version: str,
    chunks: pa.Table,
    vectors: np.ndarray,
    *,
    ann_min_rows: int = VECTOR_INDEX_MIN_ROWS,
) -> TableWrite:
    """``write_search_input`` of chunks and vectors in memory."""
    try:
        source = TableInput(chunks, vectors)
    except StoreError as exc:
        raise StoreError(f"{exc} for {kb}|{version}") from None
    return write_search_input(layout, kb, version, source, ann_min_rows=ann_min_rows)


def write_search_input(
    layout: Layout,
    kb: str,
    version: str,
    source: SearchInput,
    *,
    ann_min_rows: int = VECTOR_INDEX_MIN_ROWS,
) -> TableWrite:
    """Bring the search table of one partition to ``source``'s chunks and vectors; an ANN
    index on the vectors when there are at least ``ann_min_rows`` (``search.ann_min_rows``).

    A new table (or one of another layout, or one where more than ``REWRITE_SHARE`` of the
    rows changed) is written whole, in fragments of ``lance_rows.FRAGMENT_ROWS`` rows, in one commit,
    streamed from ``source`` a slice at a time. Otherwise only the documents whose rows
    changed are written (``_merge_changes``): one ``merge_insert`` (a single commit) inserts
    their new rows and deletes their old ones and the rows of documents that are gone; the
    fragments that held deleted rows are then rewritten without them and old versions
    removed, so deleted text is gone from disk, and the full-text and ANN indexes get the new
    rows as delta segments. Readers see the table before the commit or after it, never half
    of it. The schema metadata (``TableSummary``) is written last, so what it says of the
    rows is true or, after a crash, ignored."""
    db = connect(layout)
    name = search_table_name(kb, version)
    exists = name in list_table_names(db)
    result: TableWrite | None = None
    if exists:
        tbl = db.open_table(name)
        result = _merge_changes(tbl, source)
    if result is None:
        total = input_sum(source)
        summary = TableSummary(source.rows, total, source.sources(), "")
        docs, digest = _write_whole(
            layout.search_table_dir(kb, version), source, table_schema(source.dim, summary), storage_options(layout)
        )
        tbl = db.open_table(name)
        _set_summary(tbl, TableSummary(source.rows, total, source.sources(), digest))
        result = TableWrite(source.rows, "replace" if exists else "create", source.rows, 0, docs)
    give_back()  # (what the write freed, before the indexes' builds: see store.memory)
    if source.rows:
        update_fts(tbl)
        update_scalar_indexes(tbl)
        give_back()
    ensure_vector_index(tbl, ann_min_rows)
    if result.mode != "create":
        purge_deleted_rows(tbl)
    prune_history(tbl)
    return result


def _set_summary(tbl: Any, summary: TableSummary) -> None:
    """Replace the table's schema metadata by ``summary``'s (a commit of the manifest only)."""
    meta = summary.metadata()
    if {k.decode(): v.decode() for k, v in (tbl.schema.metadata or {}).items()} != meta:
        tbl.to_lance().update_schema_metadata(meta, replace=True)
        tbl.checkout_latest()


def _write_whole(
    uri: Any, source: SearchInput, schema: pa.Schema, options: dict[str, str] | None = None
) -> tuple[int, str]:
    """``source``'s rows as the whole dataset at ``uri`` (one commit; fragments of
    ``lance_rows.FRAGMENT_ROWS``), streamed: each slice's rows are built, analysed and handed to Lance
    before the next is read. Returns the number of documents written and the rows' digest."""
    import lance

    docs: set[str] = set()
    hashes: list[pa.Array[Any]] = []
    failed: list[BaseException] = []

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            for chunks, vecs in source.slices():
                rows = search_rows(chunks, vecs)
                docs.update(str(d) for d in pc.unique(rows.column("doc_id")).to_pylist())
                hashes.extend(rows.column(ROW_HASH_COLUMN).chunks)
                yield from pa.Table.from_batches(rows.to_batches(), schema=schema).to_batches()
        except BaseException as exc:  # Lance reports a reader's error as its own: keep ours
            failed.append(exc)
            raise

    reader = pa.RecordBatchReader.from_batches(schema, batches())
    try:
        lance.write_dataset(
            reader, str(uri), schema=schema, mode="overwrite", max_rows_per_file=lance_rows.FRAGMENT_ROWS,
            storage_options=options or None,
        )  # fmt: skip
    except Exception:
        if failed:
            raise failed[0] from None
        raise
    return len(docs), rows_digest(pa.chunked_array(hashes, pa.string()))


def changed_docs(old: pa.Table, new: pa.Table) -> list[str]:
    """The documents whose rows differ between two tables of (doc_id, chunk_id, row_hash),
    sorted: a chunk added, gone, changed, or moved to another document marks its
    document(s). In Arrow (a join on chunk_id), not in Python objects per row."""
    cols = ["chunk_id", "doc_id", ROW_HASH_COLUMN]

    def keys(t: pa.Table, side: str) -> pa.Table:
        names = ["chunk_id", f"doc_{side}", f"hash_{side}"]
        return pa.table([t.column(c).cast(pa.string()) for c in cols], names=names)

    o, n = keys(old, "old"), keys(new, "new")
    j = n.join(o, "chunk_id", join_type="full outer")
    equal: Any = [
        pc.fill_null(pc.equal(j.column(f"{c}_old"), j.column(f"{c}_new")), pa.scalar(False)) for c in ("hash", "doc")
    ]
    differs = j.filter(pc.invert(pc.and_(*equal)))
    docs = pa.chunked_array(differs.column("doc_old").chunks + differs.column("doc_new").chunks, pa.string())
    return sorted(str(d) for d in pc.unique(pc.drop_null(docs)).to_pylist())


def _columns(schema: pa.Schema) -> list[tuple[str, str]]:
    """A schema's columns and types (not its metadata, nor its fields': the ANN index records
    its trained row count on ``vector``)."""
    return [(f.name, str(f.type)) for f in schema]


def _merge_changes(tbl: Any, source: SearchInput) -> TableWrite | None:
    """Write only the documents of ``source`` whose rows differ from ``tbl``'s (None: the
    table is to be written whole: another layout, or too much changed).

    Which documents may differ: when the table's summary names the files it was written from
    and ``source`` reads files, only the documents with rows in files new since (edited,
    added, or moved to another file) and the documents gone; their rows are read and hashed,
    nothing else. Otherwise every row of ``source`` is read and hashed. Either way, the row
    hashes then decide. The vectors' sum is updated by the rows deleted and written alone."""
    old_schema = tbl.schema
    if _columns(old_schema) != _columns(table_schema(source.dim)) or not source.rows:
        return None
    keep = ["doc_id", "chunk_id", ROW_HASH_COLUMN]
    table = tbl.to_lance().to_table(columns=keep)
    old = table
    summary = TableSummary.stored(old_schema, table.column(ROW_HASH_COLUMN))
    sources = source.sources()
    maybe = source.docs_from(summary.sources) if summary is not None and summary.sources is not None else None
    if maybe is None:
        new = _keys(source.slices())
    else:
        now = pc.unique(source.doc_ids().cast(pa.string())).to_pylist()
        gone = set(pc.unique(old.column("doc_id").cast(pa.string())).to_pylist()) - set(now)
        maybe |= gone
        old = old.filter(
            pc.is_in(old.column("doc_id").cast(pa.string()), value_set=pa.array(sorted(maybe), pa.string()))
        )
        new = _keys(source.rows_of(maybe))
    changed = changed_docs(old, new)
    if not changed:  # (a summary missing or not the rows' is written anew, once)
        if summary is None:
            summary = TableSummary(
                table.num_rows, input_sum(source), sources, rows_digest(table.column(ROW_HASH_COLUMN))
            )
        _set_summary(tbl, TableSummary(summary.rows, summary.total, sources, summary.digest))
        return TableWrite(source.rows, "unchanged")
    value_set = pa.array(changed, pa.string())
    gone_rows: Any = pc.is_in(old.column("doc_id").cast(pa.string()), value_set=value_set)
    new_rows: Any = pc.is_in(new.column("doc_id").cast(pa.string()), value_set=value_set)
    deleted, written = (int(pc.sum(m.cast(pa.int64())).as_py() or 0) for m in (gone_rows, new_rows))
    if written > REWRITE_SHARE * source.rows or deleted > REWRITE_SHARE * table.num_rows:
        return None

    where = f"doc_id IN ({', '.join(sql_string(d) for d in changed)})"
    parts = [search_rows(c, v) for c, v in source.rows_of(set(changed))]
    if summary is not None:  # the sum less the deleted rows' vectors, plus the written ones'
        total = summary.total
        for batch in tbl.to_lance().to_batches(columns=["vector"], filter=where):
            total = add_sums(total, fixed_sum(vector_matrix(batch.column("vector"))), -1)
        for part in parts:
            total = add_sums(total, fixed_sum(vector_matrix(part.column("vector"))))
    else:
        total = input_sum(source)
    kept = table.filter(pc.invert(pc.is_in(table.column("doc_id").cast(pa.string()), value_set=value_set)))
    hashes = [*kept.column(ROW_HASH_COLUMN).chunks, *(c for p in parts for c in p.column(ROW_HASH_COLUMN).chunks)]
    digest = rows_digest(pa.chunked_array(hashes, pa.string()))
    if parts:
        (
            tbl.merge_insert("chunk_id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .when_not_matched_by_source_delete(where)
            .execute(pa.concat_tables(parts))
        )
    else:
        tbl.delete(where)
    tbl.checkout_latest()
    _set_summary(tbl, TableSummary(source.rows, total, sources, digest))
    return TableWrite(source.rows, "merge", written, deleted, len(changed))


def _keys(slices: Iterator[tuple[pa.Table, np.ndarray]]) -> pa.Table:
    """(doc_id, chunk_id, row_hash) of the rows of ``slices``."""
    keep = ["doc_id", "chunk_id", ROW_HASH_COLUMN]
    parts = [search_rows(c, v, keywords=False).select(keep) for c, v in slices]
    if not parts:
        return pa.table({k: pa.array([], pa.string()) for k in keep})
    return pa.concat_tables(parts)
