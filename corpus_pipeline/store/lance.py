"""The LanceDB search tables: one table per (kb, strategy_version).

A partition's run brings exactly its own table to its chunks: a new table is written whole,
an existing one gets only the rows of the documents that changed (``write_search_table``);
each is one commit (a new Lance version), so readers never see half a write and a re-run
never duplicates rows. Other KBs and versions are other tables. Each table has the child chunks, their vectors, and ``keyword_text``: the text as
the keyword channel analyses it (CJK as overlapping bigrams, identifiers whole and in parts, see
``corpus_pipeline.keywords``) with a full-text index on it (split on spaces, lower-cased, English
stemmed, stop words removed). Tables written before that column existed have the ICU
full-text index on ``text``; search handles both.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal, Protocol, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from corpus_pipeline.errors import StoreError
from corpus_pipeline.keywords import keyword_text
from corpus_pipeline.store.defaults import VECTOR_INDEX_MIN_ROWS
from corpus_pipeline.store.layout import Layout, search_table_name
from corpus_pipeline.store.memory import give_back
from corpus_pipeline.store.schemas import search_schema, vector_matrix
from corpus_pipeline.store.sql import sql_string

os.environ.setdefault("LANCE_LOG", "error")


def index_name(column: str) -> str:
    """LanceDB's default name for the index on ``column`` (the name every index here has)."""
    return f"{column}_idx"


#: The default of ``search.ann_min_rows``: a table with at least this many rows gets an ANN
#: index on its vectors (``ensure_vector_index``); below it search is a flat, exact scan.
#: The vector column's ANN index.
VECTOR_INDEX_NAME = index_name("vector")
#: Retrain the ANN index (a full rebuild) when more than this share of the table's rows was
#: not in the table the index was trained on (appended or replaced since); below it, new
#: rows are added to the existing index (``optimize``: their IVF partitions and PQ codes
#: from the trained centroids and codebooks, no retraining).
VECTOR_INDEX_REBUILD_SHARE = 0.25
#: k-means iterations of the IVF centroids and PQ codebooks (LanceDB's default: 50).
VECTOR_INDEX_KMEANS_ITERATIONS = 50
#: At most this many vectors train the IVF centroids (k-means), and this many the PQ codebooks
#: (64 per code: FAISS asks for at least 39): the training samples, which Lance holds in
#: memory, do not grow with the table (``build_vector_index``).
VECTOR_INDEX_IVF_SAMPLE = 65_536
VECTOR_INDEX_PQ_SAMPLE = 16_384
#: Rows of the table encoded per call into a segment of the ANN index (``build_vector_index``):
#: what the encoding holds at once.
VECTOR_INDEX_SEGMENT_ROWS = 32_768
#: Field metadata of ``vector``: the row count the ANN index was trained on.
VECTOR_INDEX_TRAINED_KEY = "corpus.ann_trained_rows"
#: Bump when the table's layout or indexing changes: every version's table is then stale
#: (``corpus_pipeline.freshness``) and rebuilt by the next ``corpus index`` or sensor tick.
SEARCH_TABLE_VERSION = "5"  # 2: keyword_text column (CJK bigrams) carries the FTS index; 3: vector mean; 4: ANN index (ensure_vector_index); 5: row_hash, fragments of FRAGMENT_ROWS (writes by document)
# The analysed text the keyword channel searches (beside the search_schema columns).
KEYWORD_COLUMN = "keyword_text"
#: Schema metadata key: the mean of the table's vectors, as JSON (the vector gate's baseline).
VECTOR_MEAN_KEY = b"corpus.vector_mean"
#: Schema metadata key: the vectors' sum in fixed point (integers of ``1 / SUM_SCALE``), as
#: JSON. Integer sums are exact in any order, so a merge updates it from the rows it deletes
#: and writes alone and gets the mean a whole write of the same rows gets, to the bit.
VECTOR_SUM_KEY = b"corpus.vector_sum"
SUM_SCALE = 2**32
#: Schema metadata key: the names of the Parquet files the rows were written from
#: (``{"children": [...], "embeddings": [...]}``; a file's name is a hash of its bytes), so
#: a merge looks for changed documents only in the files that are new since.
SOURCES_KEY = b"corpus.sources"
#: Schema metadata key: a digest of the table's row hashes (sorted), which the sum and the
#: sources above describe. A write that stopped between its rows and its metadata leaves
#: them disagreeing with the rows: the next write then compares every row and sums anew.
ROWS_DIGEST_KEY = b"corpus.rows_digest"


def storage_options(layout: Layout) -> dict[str, str]:
    """LanceDB's object-store options for the warehouse: credentials, region and endpoint
    come from the usual environment (``AWS_*``, ``GOOGLE_*``, ``AZURE_*``); an ``http://``
    endpoint (MinIO, a local S3 server) needs ``allow_http``."""
    if not layout.remote:
        return {}
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or ""
    opts = {"aws_endpoint": endpoint} if endpoint else {}
    if endpoint.startswith("http://"):
        opts["allow_http"] = "true"
    return opts


def connect(layout: Layout) -> Any:
    """The LanceDB database of a CORPUS_HOME's warehouse, local or on an object store
    (created if missing)."""
    import lancedb

    if not layout.remote:
        layout.lancedb.mkdir(parents=True, exist_ok=True)
    return lancedb.connect(str(layout.lancedb), storage_options=storage_options(layout) or None)


#: Rows per Lance fragment (data file) of a search table. A document edit rewrites only the
#: fragments that held the document's old rows (to purge them) and appends its new rows, so
#: its cost is bounded by this, not by the size of the KB.
FRAGMENT_ROWS = 8192
#: When more than this share of a table's rows is new (or of its old rows deleted), replacing
#: the whole table is cheaper than merging: it is written anew.
REWRITE_SHARE = 0.5
#: A digest of each row's values (vector included): what tells an unchanged document's rows
#: from changed ones without reading their text back.
ROW_HASH_COLUMN = "row_hash"
#: Rows turned into Python values at a time by a write (row hashes, keyword text): what
#: a write holds as Python objects is this slice's, not the table's.
PY_SLICE_ROWS = 8192
#: Delta segments of the full-text index past which a write merges them into one (index
#: maintenance paid once every so many writes, not on each).
FTS_MAX_SEGMENTS = 8
FTS_INDEX_NAME = index_name(KEYWORD_COLUMN)
#: Columns of a search table with a BTREE (scalar) index: ``parent_id``, which finds a returned
#: parent's children (``retrieval.passages``: two filtered queries a search, each a scan of the
#: column without it: 38 and 36 ms at 640k rows, 6 and 3 ms with it), and ``doc_id``, which finds
#: a document's rows (an edit's merge; a scan 60 ms at 640k rows, 9 ms with it). Built in
#: 0.2 s each at that size; a write brings them up to date with the FTS index.
SCALAR_INDEX_COLUMNS = ("parent_id", "doc_id")


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


class SearchInput(Protocol):
    """What a search table is written from, read slice by slice so that a write holds one
    slice, not the KB: ``rows`` chunks (the ``SEARCH_COLUMNS`` at least, ``doc_id`` among
    them) and their ``dim``-dimensional vectors, in the same order."""

    @property
    def rows(self) -> int: ...

    @property
    def dim(self) -> int: ...

    def slices(self) -> Iterator[tuple[pa.Table, np.ndarray]]:
        """The chunks and their vectors, in order, ``PY_SLICE_ROWS`` rows at a time."""
        ...

    def vector_slices(self) -> Iterator[np.ndarray]:
        """The vectors alone, in order."""
        ...

    def sources(self) -> dict[str, list[str]] | None:
        """The names of the files the rows are read from (each a hash of its bytes), or None
        (rows in memory)."""
        ...

    def doc_ids(self) -> pa.ChunkedArray[Any]:
        """``doc_id`` of every row, in order."""
        ...

    def docs_from(self, sources: dict[str, list[str]]) -> set[str] | None:
        """The documents with a row in a file that ``sources`` does not name: the only ones
        whose rows can differ from a table written from ``sources`` (None: not known)."""
        ...

    def rows_of(self, docs: set[str]) -> Iterator[tuple[pa.Table, np.ndarray]]:
        """The chunks and vectors of ``docs`` only, in order (what a merge writes)."""
        ...


@dataclass(frozen=True)
class TableInput:
    """A ``SearchInput`` of chunks and vectors in memory."""

    chunks: pa.Table
    vectors: np.ndarray

    def __post_init__(self) -> None:
        if len(self.chunks) != len(self.vectors):
            raise StoreError(f"{len(self.chunks)} chunks but {len(self.vectors)} vectors")

    @property
    def rows(self) -> int:
        return len(self.chunks)

    @property
    def dim(self) -> int:
        # (an empty table's vectors are 1-dimensional: there is nothing to say otherwise)
        return int(self.vectors.shape[1]) if self.vectors.ndim == 2 and self.vectors.shape[0] else 1

    def slices(self) -> Iterator[tuple[pa.Table, np.ndarray]]:
        vecs = np.asarray(self.vectors, dtype=np.float32).reshape(self.rows, self.dim)
        for s in range(0, self.rows, PY_SLICE_ROWS):
            yield self.chunks.slice(s, PY_SLICE_ROWS), vecs[s : s + PY_SLICE_ROWS]

    def vector_slices(self) -> Iterator[np.ndarray]:
        return (v for _c, v in self.slices())

    def sources(self) -> dict[str, list[str]] | None:
        return None

    def doc_ids(self) -> pa.ChunkedArray[Any]:
        return self.chunks.column("doc_id")

    def docs_from(self, sources: dict[str, list[str]]) -> set[str] | None:
        return None

    def rows_of(self, docs: set[str]) -> Iterator[tuple[pa.Table, np.ndarray]]:
        return rows_of_docs(self.slices(), docs)


def rows_of_docs(
    slices: Iterator[tuple[pa.Table, np.ndarray]], docs: set[str]
) -> Iterator[tuple[pa.Table, np.ndarray]]:
    """The rows of ``docs`` in ``slices`` (chunks and vectors), slice by slice."""
    value_set = pa.array(sorted(docs), pa.string())
    for chunks, vecs in slices:
        hit: Any = pc.is_in(chunks.column("doc_id").cast(pa.string()), value_set=value_set)
        picked = np.asarray(hit.to_numpy(zero_copy_only=False), dtype=bool)
        if picked.any():
            yield chunks.filter(hit), vecs[picked]


def table_schema(dim: int, summary: TableSummary | None = None) -> pa.Schema:
    """The schema of a search table: ``search_schema``'s columns, ``keyword_text`` and
    ``row_hash``; in its metadata, ``summary``: the vectors' mean and sum, the source files
    and the rows' digest."""
    fields = [*search_schema(dim), pa.field(KEYWORD_COLUMN, pa.string()), pa.field(ROW_HASH_COLUMN, pa.string())]
    meta = cast("dict[bytes | str, bytes | str]", summary.metadata()) if summary is not None else None
    return pa.schema(fields, metadata=meta)


#: Rows ``fixed_sum`` converts at a time: its float64 and int64 temporaries stay ~3 MB each
#: at 384 dimensions, not four copies of a whole slice (glibc keeps such freed blocks).
SUM_BLOCK_ROWS = 1024


def fixed_sum(vecs: np.ndarray) -> list[int]:
    """The sum of ``vecs``' rows in fixed point (integers of ``1 / SUM_SCALE``; NaN and
    infinities, which the blocking checks keep out of a table, count as 0). Integer sums
    are exact in any order, so the blocks' sum is the whole's."""
    if not len(vecs):
        return [0] * (int(vecs.shape[1]) if vecs.ndim == 2 else 0)
    total = np.zeros(int(vecs.shape[1]), dtype=np.int64)
    for start in range(0, len(vecs), SUM_BLOCK_ROWS):
        block = np.asarray(vecs[start : start + SUM_BLOCK_ROWS], dtype=np.float64)
        q = np.rint(np.nan_to_num(block, nan=0.0, posinf=0.0, neginf=0.0) * SUM_SCALE)
        total += q.astype(np.int64).sum(axis=0, dtype=np.int64)  # (|v| < 2**18 per 8192-row slice)
    return [int(x) for x in total]


def _add(a: list[int], b: list[int], sign: int = 1) -> list[int]:
    return [x + sign * y for x, y in zip(a, b, strict=True)] if a else [sign * y for y in b]


def input_sum(source: SearchInput) -> list[int]:
    """``fixed_sum`` of every vector of ``source``, slice by slice."""
    total: list[int] = []
    for vecs in source.vector_slices():
        total = _add(total, fixed_sum(vecs))
    return total


def rows_digest(row_hashes: pa.ChunkedArray[Any] | pa.Array[Any]) -> str:
    """A digest of a table's row hashes in sorted order: the same rows give the same digest
    whatever their order or fragments."""
    values = pc.cast(row_hashes, pa.string())
    ordered = pc.take(values, pc.sort_indices(values)).to_pylist()
    return hashlib.blake2b(("\n".join(str(v) for v in ordered) + "\n").encode(), digest_size=16).hexdigest()


@dataclass(frozen=True)
class TableSummary:
    """What a search table's schema metadata says of its rows: ``rows``, the vectors'
    ``total`` (``fixed_sum``), the files they were written from (``sources``, None for rows
    from memory) and the rows' ``digest`` (``rows_digest``)."""

    rows: int
    total: list[int]
    sources: dict[str, list[str]] | None
    digest: str

    @property
    def mean(self) -> np.ndarray | None:
        if not self.rows or not self.total:
            return None
        return np.asarray(self.total, dtype=np.float64) / SUM_SCALE / self.rows

    def metadata(self) -> dict[str, str]:
        """The schema metadata that says it (keys and values as text)."""
        out = {VECTOR_SUM_KEY.decode(): json.dumps(self.total), ROWS_DIGEST_KEY.decode(): self.digest}
        mean = self.mean
        if mean is not None:
            out[VECTOR_MEAN_KEY.decode()] = json.dumps([round(float(x), 7) for x in mean])
        if self.sources is not None:
            out[SOURCES_KEY.decode()] = json.dumps(self.sources, sort_keys=True)
        return out

    @classmethod
    def stored(cls, schema: pa.Schema, row_hashes: pa.ChunkedArray[Any]) -> TableSummary | None:
        """The summary in a table's schema metadata, if it is there and describes the
        table's rows (its digest is theirs); None otherwise."""
        meta = schema.metadata or {}
        try:
            digest = meta[ROWS_DIGEST_KEY].decode()
            total = [int(x) for x in json.loads(meta[VECTOR_SUM_KEY])]
            sources = json.loads(meta[SOURCES_KEY]) if SOURCES_KEY in meta else None
        except (KeyError, ValueError, TypeError, UnicodeDecodeError):
            return None
        if digest != rows_digest(row_hashes):
            return None
        return cls(len(row_hashes), total, sources, digest)


def search_rows(chunks: pa.Table, vectors: np.ndarray, *, keywords: bool = True) -> pa.Table:
    """The search table's rows: ``chunks``' search columns, their ``vectors``, each row's
    ``row_hash`` and, with ``keywords``, the analysed ``keyword_text`` (``with_keywords``: a
    write analyses only the rows it writes). No schema metadata: that is the table's
    (``TableSummary``)."""
    dim = int(vectors.shape[1]) if vectors.ndim == 2 and vectors.shape[0] else 0
    if len(chunks) != len(vectors):
        raise StoreError(f"{len(chunks)} chunks but {len(vectors)} vectors")
    if dim == 0:
        dim = 1 if len(chunks) == 0 else int(vectors.shape[1])
    schema = search_schema(dim)
    vecs = np.asarray(vectors, dtype=np.float32).reshape(len(chunks), dim)
    cols: dict[str, Any] = {}
    for f in schema:
        if f.name == "vector":
            cols["vector"] = pa.FixedSizeListArray.from_arrays(pa.array(vecs.reshape(-1), type=pa.float32()), dim)
        else:
            cols[f.name] = chunks.column(f.name).cast(f.type)
    table = pa.table(cols, schema=schema)
    # (keyword_text is a function of text, and the analyser's version is SEARCH_TABLE_VERSION's)
    table = table.append_column(ROW_HASH_COLUMN, _in_slices(table, lambda t, s: _row_hashes(t, vecs[s : s + len(t)])))
    return with_keywords(table) if keywords else table


def _in_slices(table: pa.Table, values: Callable[[pa.Table, int], list[str]]) -> pa.ChunkedArray[Any]:
    """A string column of ``values(slice, start)`` over ``table``'s slices of
    ``PY_SLICE_ROWS`` rows: each slice's Python values become Arrow before the next."""
    step = PY_SLICE_ROWS
    parts = [pa.array(values(table.slice(s, step), s), pa.string()) for s in range(0, table.num_rows, step)]
    return pa.chunked_array(parts, pa.string())


def _row_hashes(table: pa.Table, vecs: np.ndarray) -> list[str]:
    """A hash of each row's values and vector: its columns (but ``vector``) as text, joined
    by Arrow (a null is "\\x00", not ""), then the vector's bytes."""
    cols: list[Any] = [
        pc.fill_null(table.column(f.name).cast(pa.string()), pa.scalar("\x00"))
        for f in table.schema
        if f.name != "vector"
    ]
    if not cols or table.num_rows == 0:
        return []
    joined = pc.binary_join_element_wise(*cols, "\x1f").to_pylist()
    return [
        hashlib.blake2b(str(v).encode() + vecs[i].tobytes(), digest_size=16).hexdigest() for i, v in enumerate(joined)
    ]


def with_keywords(table: pa.Table) -> pa.Table:
    """``table`` (of ``search_rows``) with its ``keyword_text`` column (CJK bigrams, stems):
    the text the full-text index holds, before ``row_hash``."""

    if KEYWORD_COLUMN in table.column_names:
        return table
    analysed = _in_slices(table, lambda t, _s: [keyword_text(x or "") for x in t.column("text").to_pylist()])
    out = table.add_column(table.schema.get_field_index(ROW_HASH_COLUMN), KEYWORD_COLUMN, analysed)
    return out.replace_schema_metadata(table.schema.metadata)


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
    rows changed) is written whole, in fragments of ``FRAGMENT_ROWS`` rows, in one commit,
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
        _update_fts(tbl)
        _update_scalar_indexes(tbl)
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
    ``FRAGMENT_ROWS``), streamed: each slice's rows are built, analysed and handed to Lance
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
            reader, str(uri), schema=schema, mode="overwrite", max_rows_per_file=FRAGMENT_ROWS,
            storage_options=options or None,
        )  # fmt: skip
    except Exception:
        if failed:
            raise failed[0] from None
        raise
    return len(docs), rows_digest(pa.chunked_array(hashes, pa.string()))


def _create_fts_index(tbl: Any) -> None:
    from lancedb.index import FTS

    tbl.create_index(
        KEYWORD_COLUMN,
        config=FTS(
            base_tokenizer="whitespace", language="English", stem=True, remove_stop_words=True, ascii_folding=True
        ),
        replace=True,
    )


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
            total = _add(total, fixed_sum(vector_matrix(batch.column("vector"))), -1)
        for part in parts:
            total = _add(total, fixed_sum(vector_matrix(part.column("vector"))))
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


def _update_fts(tbl: Any) -> None:
    """The full-text index over every row: created when missing (a new table, or a write
    killed before its index was), the rows a merge wrote added as a delta segment, the
    segments merged into one once there are ``FTS_MAX_SEGMENTS``."""
    stats = tbl.index_stats(FTS_INDEX_NAME)
    if stats is None:
        _create_fts_index(tbl)
        return
    if not stats.num_unindexed_rows:
        return
    merge = int(getattr(stats, "num_indices", 1) or 1) >= FTS_MAX_SEGMENTS
    tbl.to_lance().optimize.optimize_indices(index_names=[FTS_INDEX_NAME], num_indices_to_merge=None if merge else 0)
    tbl.checkout_latest()


def _update_scalar_indexes(tbl: Any) -> list[str]:
    """The ``SCALAR_INDEX_COLUMNS``' BTREE indexes over every row: created when missing (a new
    table, one written before they existed, or a write killed before its indexes were), the
    rows a merge wrote merged in (one segment: a BTREE's update rewrites it, 0.2 s at 640k
    rows). An index that covers every row is not touched (no commit). Returns the columns
    whose index was created or updated."""
    from lancedb.index import BTree

    done = []
    for column in SCALAR_INDEX_COLUMNS:
        name = index_name(column)
        stats = tbl.index_stats(name)
        if stats is None:
            tbl.create_index(column, config=BTree(), replace=True)
        elif stats.num_unindexed_rows:
            tbl.to_lance().optimize.optimize_indices(index_names=[name])
        else:
            continue
        tbl.checkout_latest()
        done.append(column)
    return done


def purge_deleted_rows(tbl: Any) -> None:
    """Rewrite every fragment of ``tbl`` that holds deleted rows without them (a deleted or
    edited document's old text stays in a fragment's file until then), merging small
    fragments up to ``FRAGMENT_ROWS``; the fragments of unchanged rows are not touched."""
    ds = tbl.to_lance()
    if not any(f.metadata.deletion_file is not None for f in ds.get_fragments()) and len(ds.get_fragments()) <= 1:
        return
    ds.optimize.compact_files(target_rows_per_fragment=FRAGMENT_ROWS, materialize_deletions_threshold=0.0)
    tbl.checkout_latest()


def maintain_search_table(tbl: Any, ann_min_rows: int = VECTOR_INDEX_MIN_ROWS) -> dict[str, Any]:
    """The maintenance that writes do not pay for each time (the ``maintain_search_tables``
    job, weekly): small fragments merged up to ``FRAGMENT_ROWS`` (and any with deleted rows
    rewritten), the full-text index's delta segments merged into one, the ``parent_id`` and
    ``doc_id`` indexes created when missing (a table written before them), the ANN index brought up
    to date (retrained when the table outgrew it) and its delta segments merged (each costs
    every query a search: at 1M children one delta doubled p50, ``benchmarks/ann``), old
    versions removed. Returns what it did."""
    ds = tbl.to_lance()
    before = len(ds.get_fragments())
    metrics = ds.optimize.compact_files(target_rows_per_fragment=FRAGMENT_ROWS, materialize_deletions_threshold=0.0)
    tbl.checkout_latest()
    stats = tbl.index_stats(FTS_INDEX_NAME)
    segments = int(getattr(stats, "num_indices", 0) or 0) if stats is not None else 0
    if segments > 1 or (stats is not None and stats.num_unindexed_rows):
        tbl.to_lance().optimize.optimize_indices(index_names=[FTS_INDEX_NAME], num_indices_to_merge=max(segments, 1))
        tbl.checkout_latest()
    scalar = _update_scalar_indexes(tbl) if tbl.count_rows() else []
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


# ---------------------------------------------------------------------------- ANN index

VectorIndexAction = Literal["none", "create", "optimize", "rebuild", "drop"]


@dataclass(frozen=True)
class VectorIndexState:
    """What a table's ANN index covers: rows indexed and not (appended since the last build
    or optimize), and the row count it was trained on (None: not recorded)."""

    indexed_rows: int
    unindexed_rows: int
    trained_rows: int | None = None


def vector_index_action(
    rows: int,
    min_rows: int,
    index: VectorIndexState | None,
    *,
    rebuild_share: float = VECTOR_INDEX_REBUILD_SHARE,
) -> VectorIndexAction:
    """What to do with the ANN index of a table of ``rows`` rows (``index``: its state, None
    without one) so that a table of at least ``min_rows`` rows has an index that covers every
    row, trained on most of them:

    - below ``min_rows``: no index (``drop`` one that exists: a flat scan is exact, and fast
      enough there);
    - no index yet: ``create``;
    - more than ``rebuild_share`` of the rows not in the table the index was trained on (the
      rows appended or replaced since, or the growth past the trained row count, whichever
      is larger): ``rebuild`` (retrain the partitions and codebooks, sized for the rows now);
    - some rows not indexed: ``optimize`` (add them to the index as it is);
    - else ``none``.
    """
    if rows < min_rows:
        return "drop" if index is not None else "none"
    if index is None:
        return "create"
    trained = index.trained_rows if index.trained_rows is not None else index.indexed_rows
    untrained = max(index.unindexed_rows, rows - trained)
    if untrained > rebuild_share * rows:
        return "rebuild"
    if index.unindexed_rows > 0:
        return "optimize"
    return "none"


def vector_index_state(tbl: Any) -> VectorIndexState | None:
    """The state of ``tbl``'s ANN index on ``vector`` (None: there is none)."""
    stats = tbl.index_stats(VECTOR_INDEX_NAME)
    if stats is None:
        return None
    raw = (tbl.schema.field("vector").metadata or {}).get(VECTOR_INDEX_TRAINED_KEY.encode())
    try:
        trained = int(raw) if raw else None
    except ValueError:
        trained = None
    return VectorIndexState(int(stats.num_indexed_rows), int(stats.num_unindexed_rows), trained)


def vector_index_params(rows: int, dim: int) -> dict[str, int]:
    """IVF_PQ parameters for ``rows`` vectors of ``dim`` dimensions (``benchmarks/ann``):
    about sqrt(rows) partitions (~1,000 rows each at 1M), and PQ sub-vectors of 8 dimensions
    (48 for 384-d vectors; the exact re-ranking of ``refine_factor`` makes up for the coarse
    codes); the training samples' rates (vectors per partition for k-means, per code for the
    codebooks: Lance samples ``rate`` × partitions or × 256 rows, at least 2 × each, at most
    the table) so that neither sample exceeds its cap."""
    partitions = max(1, round(rows**0.5))
    sub = dim // 8 if dim % 8 == 0 and dim >= 8 else (dim // 4 if dim % 4 == 0 and dim >= 4 else 1)
    codes = 2**8
    return {
        "num_partitions": partitions,
        "num_sub_vectors": max(1, sub),
        "max_iterations": VECTOR_INDEX_KMEANS_ITERATIONS,
        "ivf_sample_rate": max(2, min(256, VECTOR_INDEX_IVF_SAMPLE // partitions, rows // partitions)),
        "pq_sample_rate": max(2, min(VECTOR_INDEX_PQ_SAMPLE // codes, rows // codes)),
    }


def build_vector_index(tbl: Any) -> None:
    """(Re)build ``tbl``'s ANN index on ``vector`` (IVF_PQ, cosine) in memory bounded by
    ``VECTOR_INDEX_SEGMENT_ROWS`` and the training samples, not by the table, and record the
    row count it was built for.

    Lance's one-call build trains the IVF centroids on 256 vectors per partition (at 256k rows
    half the table: +650 MB) and the PQ codebooks on 65,536 residuals, then encodes the whole
    table in one pass (+420 MB more at 256k rows, growing with it). Here the centroids are
    trained on at most ``VECTOR_INDEX_IVF_SAMPLE`` vectors and the codebooks on
    ``VECTOR_INDEX_PQ_SAMPLE`` (64 per code), then each group of fragments is encoded with
    those shared models as a segment of its own (``give_back`` in between) and the segments
    are merged into one and committed under ``VECTOR_INDEX_NAME`` in one commit, replacing the
    index there was: readers see the old index or the new one. At 256k rows the build peaked
    at +156 MB instead of +666 MB, in 14 s instead of 37 s (``benchmarks/scale/RESULTS.md``,
    2026-12-05)."""
    from lance.indices import IndicesBuilder

    ds = tbl.to_lance()
    rows = ds.count_rows()
    dim = int(tbl.schema.field("vector").type.list_size)
    p = vector_index_params(rows, dim)
    builder = IndicesBuilder(ds, "vector")
    ivf = builder.train_ivf(
        p["num_partitions"],
        distance_type="cosine",
        sample_rate=p["ivf_sample_rate"],
        max_iters=p["max_iterations"],
    )
    give_back()
    pq = builder.train_pq(ivf, p["num_sub_vectors"], sample_rate=p["pq_sample_rate"], max_iters=p["max_iterations"])
    give_back()
    shared = {
        "name": VECTOR_INDEX_NAME, "metric": "cosine", "replace": True,
        "num_partitions": p["num_partitions"], "num_sub_vectors": p["num_sub_vectors"],
        "ivf_centroids": ivf.centroids, "pq_codebook": pq.codebook,
    }  # fmt: skip
    segments = []
    for fragments in _fragment_groups(ds, VECTOR_INDEX_SEGMENT_ROWS):
        segments.append(ds.create_index_uncommitted("vector", "IVF_PQ", fragment_ids=fragments, **shared))
        give_back()
    merged = ds.merge_existing_index_segments(segments) if len(segments) > 1 else segments[0]
    ds.commit_existing_index_segments(VECTOR_INDEX_NAME, "vector", [merged])
    tbl.checkout_latest()
    tbl.update_field_metadata({"path": "vector", "metadata": {VECTOR_INDEX_TRAINED_KEY: str(rows)}})


def _fragment_groups(ds: Any, rows: int) -> list[list[int]]:
    """``ds``'s fragment ids in order, in groups of about ``rows`` rows (a fragment larger than
    that is a group of its own)."""
    groups: list[list[int]] = []
    group: list[int] = []
    held = 0
    for fragment in ds.get_fragments():
        n = fragment.count_rows()
        if group and held + n > rows:
            groups.append(group)
            group, held = [], 0
        group.append(fragment.fragment_id)
        held += n
    if group:
        groups.append(group)
    return groups


def ensure_vector_index(
    tbl: Any, min_rows: int, *, rebuild_share: float = VECTOR_INDEX_REBUILD_SHARE
) -> VectorIndexAction:
    """Bring ``tbl``'s ANN index to what ``vector_index_action`` decides, after a write;
    returns the action taken. ``optimize`` adds the unindexed rows to the index without
    retraining (nor compacting the table's files); a full rebuild happens only when the table has
    outgrown what the index was trained on."""
    action = vector_index_action(tbl.count_rows(), min_rows, vector_index_state(tbl), rebuild_share=rebuild_share)
    if action in ("create", "rebuild"):
        build_vector_index(tbl)
    elif action == "optimize":
        # The new rows into the index as it is (no retraining, no compaction), merged with its
        # segments into one: a delta segment would cost every query one more search (one
        # doubled p50 at 1M children), while the merge rewrites only the index's row ids and
        # PQ codes (~0.3 s at 200k rows).
        stats = tbl.index_stats(VECTOR_INDEX_NAME)
        segments = max(int(getattr(stats, "num_indices", 1) or 1), 1)
        tbl.to_lance().optimize.optimize_indices(index_names=[VECTOR_INDEX_NAME], num_indices_to_merge=segments)
        tbl.checkout_latest()
    elif action == "drop":
        tbl.drop_index(VECTOR_INDEX_NAME)
    return action


def has_vector_index(tbl: Any) -> bool:
    """Whether ``tbl`` has an ANN index on ``vector`` (search then sets its probes and refine)."""
    return tbl.index_stats(VECTOR_INDEX_NAME) is not None


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


#: The tags of the version the published snapshot of a table names (``store.snapshots``),
#: and, while a publish switches, of the one it names until then: ``prune_history`` keeps
#: tagged versions.
PUBLISHED_TAG, SWITCHING_FROM_TAG = "published", "published-before"


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


def vector_mean(table: Any) -> np.ndarray | None:
    """The mean of a search table's vectors (stored when it was written); None if absent."""
    raw = (table.schema.metadata or {}).get(VECTOR_MEAN_KEY)
    if not raw:
        return None
    try:
        return np.asarray(json.loads(raw), dtype=np.float32)
    except (ValueError, TypeError):
        return None


def list_table_names(db: Any) -> list[str]:
    names: list[str] = []
    token = None
    while True:
        resp = db.list_tables(page_token=token) if token else db.list_tables()
        names.extend(resp.tables)
        token = resp.page_token
        if not token:
            return names


def open_search_table(layout: Layout, kb: str, version: str) -> Any:
    db = connect(layout)
    name = search_table_name(kb, version)
    if name not in list_table_names(db):
        raise StoreError(
            f"no search table for kb={kb!r} strategy_version={version!r}; run `corpus index --kb {kb}` first"
        )
    return db.open_table(name)


def drop_search_table(layout: Layout, kb: str, version: str) -> None:
    if not layout.lancedb.is_dir():
        return
    db = connect(layout)
    with contextlib.suppress(ValueError, FileNotFoundError):
        db.drop_table(search_table_name(kb, version))
