"""Columnar incremental reuse: how a stage carries a partition's previous rows over.

A stage decides which documents keep their previous rows from a few small key columns
(``doc_values``), carries those rows over as Arrow slices (``of_docs``), builds Python
records only for the documents it processes, and puts the two together in document order
(``in_doc_order``). Nothing turns the whole previous partition into Python objects, so a
one-document change costs one document's work plus a few column scans, not the KB's.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

_RANK = "__doc_rank"
#: Documents a stage turns into Python records at a time (then into Arrow): what it holds
#: as objects is one group's, not the KB's.
GROUP_DOCS = 256


def groups(doc_ids: Sequence[str], size: int | None = None) -> list[list[str]]:
    """``doc_ids`` in consecutive groups of ``size`` (``GROUP_DOCS``), in order."""
    n = size or GROUP_DOCS
    return [list(doc_ids[i : i + n]) for i in range(0, len(doc_ids), n)]


def doc_values(table: pa.Table | None, *columns: str) -> dict[str, set[tuple[Any, ...]]]:
    """The distinct values of ``columns`` among each document's rows (by ``doc_id``): a
    document keeps its rows when this set is exactly the one value it has now."""
    out: dict[str, set[tuple[Any, ...]]] = {}
    if table is None or table.num_rows == 0:
        return out
    names = [c for c in columns if c in table.column_names]
    values = [table.column(c).to_pylist() for c in names]
    missing = [None] * table.num_rows
    cols = [values[names.index(c)] if c in names else missing for c in columns]
    for doc_id, *vals in zip(table.column("doc_id").to_pylist(), *cols, strict=True):
        out.setdefault(doc_id, set()).add(tuple(vals))
    return out


def strings(table: pa.Table, column: str) -> list[str]:
    """A string column as Python strings (null as "")."""
    return [str(v) if v is not None else "" for v in table.column(column).to_pylist()]


def where_equal(table: pa.Table, column: str, value: str) -> pa.Table:
    """The rows of ``table`` whose ``column`` is ``value``."""
    return table.filter(pc.equal(table.column(column), pa.scalar(value, pa.string())))


def count_in(table: pa.Table, column: str, values: Collection[str]) -> int:
    """How many rows of ``table`` have their ``column`` in ``values``."""
    if table.num_rows == 0:
        return 0
    hits = pc.is_in(table.column(column), value_set=pa.array(sorted(values), pa.string()))
    return int(pc.sum(hits.cast(pa.int64())).as_py() or 0)


def column_max(table: pa.Table, column: str) -> int:
    """The largest value of an integer ``column`` (0 for an empty table)."""
    return int(pc.max(table.column(column)).as_py() or 0) if table.num_rows else 0


def docs_containing(table: pa.Table | None, column: str, needle: str) -> set[str]:
    """The documents with a row whose ``column`` (a string) contains ``needle``."""
    if table is None or table.num_rows == 0 or column not in table.column_names:
        return set()
    hit: Any = pc.fill_null(pc.match_substring(table.column(column).cast(pa.string()), needle), pa.scalar(False))
    return set(strings(table.filter(hit), "doc_id"))


def of_docs(table: pa.Table | pads.Dataset, doc_ids: Collection[str]) -> pa.Table:
    """The rows of ``table`` whose ``doc_id`` is in ``doc_ids`` (table order kept). Of a
    dataset (a partition not read yet) only those rows are read."""
    ids = pa.array(list(doc_ids), pa.string())
    if isinstance(table, pads.Dataset):
        return _dataset_rows(table, ids)
    if not doc_ids or table.num_rows == 0:
        return table.slice(0, 0)
    return table.filter(pc.is_in(table.column("doc_id"), value_set=ids))


def _dataset_rows(ds: pads.Dataset, ids: pa.Array[Any]) -> pa.Table:
    """The rows of a partition's dataset whose ``doc_id`` is in ``ids``: only the files that
    hold some are read (a batch's documents are a run of the partition's order, so they sit
    in a few of its files). Which files those are, the partition's manifest says
    (``store.parquet.file_docs``); for a file it does not list, its ``doc_id`` column."""
    from corpus_pipeline.store.parquet import file_docs

    if len(ids) == 0 or not isinstance(ds, pads.FileSystemDataset):
        return ds.schema.empty_table() if len(ids) == 0 else ds.to_table(filter=pc.field("doc_id").isin(ids))
    wanted = {str(d) for d in ids.to_pylist()}

    def holds(frag: Any) -> bool:
        known = file_docs(str(frag.path))
        if known is not None:
            return not known.isdisjoint(wanted)
        return bool(pc.any(pc.is_in(frag.to_table(columns=["doc_id"]).column("doc_id"), value_set=ids)).as_py())

    hits = [frag for frag in ds.get_fragments() if holds(frag)]
    if not hits:
        return ds.schema.empty_table()
    found = pads.FileSystemDataset(hits, ds.schema, ds.format, ds.filesystem)
    return found.to_table(filter=pc.field("doc_id").isin(ids))


def file_spans(ds: pads.Dataset) -> list[tuple[int, int]]:
    """Each file's rows as [start, end) of the dataset's row order (counts from the footers)."""
    out, start = [], 0
    for fragment in ds.get_fragments():
        n = fragment.count_rows()
        out.append((start, start + n))
        start += n
    return out


def take_at(ds: pads.Dataset, spans: list[tuple[int, int]], columns: list[str], at: Any) -> pa.Table:
    """``columns`` of the dataset's rows at the sorted positions ``at`` (a NumPy array; its
    files' ``spans``, ``file_spans``), reading only the files that hold them."""
    parts = []
    for fragment, (start, end) in zip(ds.get_fragments(), spans, strict=True):
        local = at[(at >= start) & (at < end)] - start
        if len(local):
            parts.append(fragment.take(pa.array(local), columns=columns))
    return pa.concat_tables(parts) if parts else ds.schema.empty_table().select(columns)


def narrowed(
    tables: Mapping[str, pa.Table | pads.Dataset], doc_ids: Collection[str]
) -> dict[str, pa.Table | pads.Dataset]:
    """``tables`` with each dataset read for ``doc_ids`` only (one scan each: a batch's rows,
    which its groups of documents then slice); tables as they are."""
    return {k: narrow(t, doc_ids) for k, t in tables.items()}


def narrow(table: pa.Table | pads.Dataset, doc_ids: Collection[str]) -> pa.Table:
    """A dataset's rows of ``doc_ids`` (one scan); a table as it is."""
    return of_docs(table, doc_ids) if isinstance(table, pads.Dataset) else table


def whole(table: pa.Table | pads.Dataset) -> pa.Table:
    """``table``, read if it is a dataset."""
    return table.to_table() if isinstance(table, pads.Dataset) else table


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with exactly ``schema``'s columns, in its order and types: a column an
    older release did not write is null (as ``Table.from_pylist`` would make it)."""
    cols = [
        table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(table.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(cols, schema=schema)


def in_doc_order(parts: Sequence[pa.Table], order: Sequence[str], schema: pa.Schema) -> pa.Table:
    """``parts`` (of ``schema``) concatenated, rows ordered by their document's place in
    ``order``; a document's rows keep their order (the sort is stable). Rows of
    documents not in ``order`` are dropped."""
    table = pa.concat_tables([conform(p, schema) for p in parts]) if parts else schema.empty_table()
    if table.num_rows == 0:
        return table.combine_chunks()
    rank = pc.index_in(table.column("doc_id"), value_set=pa.array(list(order), pa.string()))
    if rank.null_count == 0 and _non_decreasing(rank):
        # (the parts already in order, a full build's batches: no copy but the one that
        # makes the columns contiguous)
        return table.combine_chunks()
    # One copy: the rows' numbers in the order (a stable sort; rows of documents not in it,
    # null, sort last and are left out), then one take of every column.
    last: Any = pc.fill_null(rank, pa.scalar(len(order), rank.type))
    at = pc.sort_indices(pa.table({_RANK: last}), sort_keys=[(_RANK, "ascending")])
    return table.take(at.slice(0, len(at) - rank.null_count)).combine_chunks()


#: Documents a partition's checks read at a time (``by_document_groups``): ~13,000 chunks
#: of the scale benchmark's documents, a few MB of frames, ~20 groups at 20,000 documents.
CHECK_GROUP_DOCS = 1000


def by_document_groups(
    tables: Mapping[str, Any], order: Sequence[str], size: int = CHECK_GROUP_DOCS
) -> Iterator[dict[str, Any]]:
    """``tables`` (those with a ``doc_id`` column; the others whole in each group) cut into
    the rows of consecutive groups of ``size`` documents of ``order``, each group's rows in
    table order. Rows of a document not in ``order`` go with the last group (checked, and
    found wanting, not dropped). A table may be a partition's dataset, nothing read yet:
    then each group reads its documents' rows only, from the files that hold them
    (``of_docs``), so the partition's rows (a KB's document texts) are never held at once."""
    ids = pa.array(list(order), pa.string())
    ranks: dict[str, Any] = {
        name: pc.fill_null(pc.index_in(t.column("doc_id"), value_set=ids), pa.scalar(len(order), pa.int32()))
        for name, t in tables.items()
        if isinstance(t, pa.Table) and "doc_id" in t.column_names
    }
    # (of a dataset: the documents it holds that ``order`` does not, read from its doc_id column)
    strays: dict[str, list[str]] = {
        name: [str(d) for d in pc.unique(pc.filter(col, pc.invert(pc.is_in(col, value_set=ids)))).to_pylist()]
        for name, t in tables.items()
        if isinstance(t, pads.Dataset) and "doc_id" in t.schema.names
        for col in [t.to_table(columns=["doc_id"]).column("doc_id")]
    }
    starts = list(range(0, len(order), size)) or [0]
    for i, start in enumerate(starts):
        last = i + 1 == len(starts)
        end = start + size if not last else len(order) + 1
        group: dict[str, Any] = {}
        for name, t in tables.items():
            if name in ranks:
                group[name] = t.filter(_in_range(ranks[name], start, end))
            elif name in strays:
                group[name] = of_docs(t, [*order[start : start + size], *(strays[name] if last else [])])
            else:
                group[name] = t
        yield group


def batch_groups(
    order: Sequence[str],
    batches: Iterable[Mapping[str, pa.Table]],
    key: str,
    todo: Collection[str],
    size: int = CHECK_GROUP_DOCS,
) -> Iterator[tuple[list[str], dict[str, list[pa.Table]]]]:
    """The rows of a fanned-out stage's ``batches`` (each a mapping of table name to rows,
    drawn from the iterable when needed) handed out a group of ``size`` documents of
    ``order`` at a time: (the group's documents, each table's rows of them, as pieces in
    batch order). The batches are contiguous slices of ``todo`` (the documents they hold)
    in order, so each is drawn once, when a group holds a document of ``todo`` that the
    batches drawn so far have not reached (by their ``key`` table's documents); what is
    held is the group's rows and the rest of the last batch drawn. A batch holding a
    document of a group already handed out is refused; rows of documents not in ``order``
    are dropped. What the streamed merges (``ParseMerge``, ``ChunkMerge``) are built on."""
    ids = pa.array(list(order), pa.string())
    pending: list[dict[str, tuple[pa.Table, Any]]] = []  # rows not handed out yet, with their ranks
    drawn = iter(batches)
    reached = -1  # the highest rank a drawn batch has reached
    wanted = set(todo)
    for start in list(range(0, len(order), size)) or [0]:
        end = start + size
        due_up_to = max((i for i in range(start, min(end, len(order))) if order[i] in wanted), default=-1)
        while reached < due_up_to:
            batch = next(drawn, None)
            if batch is None:
                reached = len(order)
                break
            ranked: dict[str, tuple[pa.Table, Any]] = {
                name: (t, pc.index_in(t.column("doc_id"), value_set=ids)) for name, t in batch.items()
            }
            high = _check_drawn(order, ranked[key], start)
            if high is not None:
                reached = max(reached, high)
            pending.append(ranked)
        due: dict[str, list[pa.Table]] = {}
        rest: list[dict[str, tuple[pa.Table, Any]]] = []
        for ranked in pending:
            left: dict[str, tuple[pa.Table, Any]] = {}
            for name, (table, rank) in ranked.items():
                now: Any = pc.fill_null(pc.less(rank, pa.scalar(end)), False)
                later: Any = pc.fill_null(pc.greater_equal(rank, pa.scalar(end)), False)
                due.setdefault(name, []).append(table.filter(now))
                if pc.any(later).as_py():
                    left[name] = (table.filter(later), rank.filter(later))
            if left:
                rest.append(left)
        pending = rest
        yield list(order[start:end]), due
    for batch in drawn:  # (none when the batches come in order: their documents were all due)
        table = batch[key]
        _check_drawn(order, (table, pc.index_in(table.column("doc_id"), value_set=ids)), len(order))


def _check_drawn(order: Sequence[str], ranked: tuple[pa.Table, Any], start: int) -> int | None:
    """The highest rank of a drawn batch's rows (None: no rows of a document of ``order``);
    refused when one is before ``start``, the first document not handed out yet."""
    table, rank = ranked
    span = pc.min_max(rank) if table.num_rows else None
    low, high = (span["min"].as_py(), span["max"].as_py()) if span is not None else (None, None)
    if low is not None and low < start:
        raise ValueError(
            f"a batch holds document {order[low]!r}, whose group was merged already: "
            "the batches must be slices of the work's todo, in order"
        )
    return None if high is None else int(high)


def _in_range(values: Any, start: int, end: int) -> Any:
    """``start <= values < end``, a boolean mask."""
    return pc.and_(pc.greater_equal(values, pa.scalar(start)), pc.less(values, pa.scalar(end)))


def _non_decreasing(values: pa.ChunkedArray[Any] | pa.Array[Any]) -> bool:
    """Whether an integer column never goes down (row after row, across its chunks)."""
    flat = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if len(flat) < 2:
        return True
    return bool(pc.all(pc.greater_equal(flat.slice(1), flat.slice(0, len(flat) - 1))).as_py())
