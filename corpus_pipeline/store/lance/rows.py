"""A search table's rows and what its schema metadata says of them: the columns (chunks, vector,
analysed keyword text, row hash), the vectors' exact sum and mean, the rows' digest, and the
input a write reads slice by slice."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from corpus_pipeline.errors import StoreError
from corpus_pipeline.keywords import keyword_text
from corpus_pipeline.store.schemas import search_schema

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


#: Rows per Lance fragment (data file) of a search table. A document edit rewrites only the
#: fragments that held the document's old rows (to purge them) and appends its new rows, so
#: its cost is bounded by this, not by the size of the KB.
FRAGMENT_ROWS = 8192


#: A digest of each row's values (vector included): what tells an unchanged document's rows
#: from changed ones without reading their text back.
ROW_HASH_COLUMN = "row_hash"


#: Rows turned into Python values at a time by a write (row hashes, keyword text): what
#: a write holds as Python objects is this slice's, not the table's.
PY_SLICE_ROWS = 8192


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


def add_sums(a: list[int], b: list[int], sign: int = 1) -> list[int]:
    return [x + sign * y for x, y in zip(a, b, strict=True)] if a else [sign * y for y in b]


def input_sum(source: SearchInput) -> list[int]:
    """``fixed_sum`` of every vector of ``source``, slice by slice."""
    total: list[int] = []
    for vecs in source.vector_slices():
        total = add_sums(total, fixed_sum(vecs))
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


def vector_mean(table: Any) -> np.ndarray | None:
    """The mean of a search table's vectors (stored when it was written); None if absent."""
    raw = (table.schema.metadata or {}).get(VECTOR_MEAN_KEY)
    if not raw:
        return None
    try:
        return np.asarray(json.loads(raw), dtype=np.float32)
    except (ValueError, TypeError):
        return None
