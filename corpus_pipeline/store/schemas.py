"""Arrow schemas derived from the records, and records <-> Arrow tables.

    schema_of(Chunk)                  the child_chunks schema, column for column
    to_table(records, Chunk)          records -> a pa.Table of that schema
    from_table(table, Chunk)          a pa.Table -> records (JSON columns parsed back)

A record's field types say its column types: ``str`` string, ``int`` int64, ``bool``,
``float`` float64, ``Int32`` int32, ``LargeText`` large_string, ``Json`` a JSON string,
``tuple[str, ...]`` a list of strings; ``X | None`` makes the column nullable (every
column is nullable in Arrow; the record decides what it writes). The schemas of the
tables nobody declares a record for (embeddings, the search table) are built here from
those of the records.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

import pyarrow as pa

from corpus_pipeline import models

R = TypeVar("R")

_MARKS: dict[str, pa.DataType] = {"int32": pa.int32(), "large_string": pa.large_string()}
_PLAIN: dict[type, pa.DataType] = {str: pa.string(), int: pa.int64(), bool: pa.bool_(), float: pa.float64()}


def _arrow_type(hint: Any, where: str) -> tuple[pa.DataType, str]:
    """The Arrow type of a field annotation, and how values convert (plain, json, tuple)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"{where}: only `X | None` unions map to a column, got {hint!r}")
        return _arrow_type(args[0], where)
    if origin is typing.Annotated:
        base, *marks = list(typing.get_args(hint))
        for mark in marks:
            if mark == "json":
                return pa.string(), "json"
            if mark in _MARKS:
                return _MARKS[mark], "plain"
        return _arrow_type(base, where)
    if origin is tuple:
        items = typing.get_args(hint)
        if len(items) == 2 and items[1] is Ellipsis and items[0] is str:
            return pa.list_(pa.string()), "tuple"
    if hint in _PLAIN:
        return _PLAIN[hint], "plain"
    raise TypeError(f"{where}: no column type for {hint!r}; use str, int, bool, float, Int32, LargeText, Json")


@functools.cache
def _columns(cls: type) -> tuple[tuple[str, pa.DataType, str], ...]:
    hints = typing.get_type_hints(cls, include_extras=True)
    return tuple((f.name, *_arrow_type(hints[f.name], f"{cls.__name__}.{f.name}")) for f in dataclasses.fields(cls))


@functools.cache
def schema_of(cls: type) -> pa.Schema:
    """The Arrow schema of a record type's table."""
    return pa.schema([(name, typ) for name, typ, _ in _columns(cls)])


def _json(value: Any) -> str:
    return json.dumps(value or {}, ensure_ascii=False, sort_keys=True, default=str)


def to_rows(records: Iterable[Any], cls: type) -> list[dict[str, Any]]:
    """Records as plain row dicts (JSON columns serialized)."""
    cols = _columns(cls)
    json_cols = [name for name, _, kind in cols if kind == "json"]
    tuple_cols = [name for name, _, kind in cols if kind == "tuple"]
    names = [name for name, _, _ in cols]
    rows = []
    for r in records:
        row = {n: getattr(r, n) for n in names}
        for n in json_cols:
            row[n] = _json(row[n])
        for n in tuple_cols:
            row[n] = list(row[n] or ())
        rows.append(row)
    return rows


def to_table(records: Iterable[Any], cls: type) -> pa.Table:
    """Records as a table of ``schema_of(cls)``."""
    return pa.Table.from_pylist(to_rows(records, cls), schema=schema_of(cls))


def from_rows(rows: Iterable[Mapping[str, Any]], cls: type[R]) -> list[R]:
    """Row dicts (from a table of ``schema_of(cls)``, or older tables with fewer columns
    when the record has defaults for them) back into records."""
    cols = _columns(cls)  # type: ignore[arg-type]  # (a record class is hashable; TypeVar hides it)
    names = [name for name, _, _ in cols]
    json_cols = [name for name, _, kind in cols if kind == "json"]
    tuple_cols = [name for name, _, kind in cols if kind == "tuple"]
    out = []
    for row in rows:
        values = {n: row[n] for n in names if n in row}
        for n in json_cols:
            if n in values:
                raw = values[n]
                values[n] = json.loads(raw) if isinstance(raw, str) and raw else (raw or {})
        for n in tuple_cols:
            if n in values:
                values[n] = tuple(values[n] or ())
        out.append(cls(**values))
    return out


def from_table(table: pa.Table, cls: type[R]) -> list[R]:
    return from_rows(table.to_pylist(), cls)


def empty(cls: type) -> pa.Table:
    return schema_of(cls).empty_table()


# --------------------------------------------------------------------------- the tables

DOCUMENTS = schema_of(models.Document)
BLOCKS = schema_of(models.Block)
TEXTS = schema_of(models.DocumentText)
IMAGES = schema_of(models.ExtractedImage)
IMAGE_DESCRIPTIONS = schema_of(models.ImageDescription)
PARENT_BLOCKS = schema_of(models.ParentBlock)
CHILD_CHUNKS = schema_of(models.Chunk)

#: The child_chunks columns the search table carries (with ``vector`` and the analysed
#: keyword text beside them).
SEARCH_COLUMNS: tuple[str, ...] = (
    "chunk_id", "parent_id", "chunk_index", "chunk_type", "kb", "strategy_version", "doc_id",
    "doc_path", "text", "start_offset", "end_offset", "char_count", "token_count",
    "section_path", "page_num", "block_index", "strategy", "metadata",
)  # fmt: skip


def vector_matrix(column: pa.Array[Any] | pa.ChunkedArray[Any]) -> Any:
    """A column of fixed-size float lists as a float32 matrix (numpy), in row order: a view of
    the column's buffer when it is one chunk (``combine_chunks`` would copy it)."""
    import numpy as np

    col: Any = column
    if isinstance(column, pa.ChunkedArray):
        col = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    dim = col.type.list_size
    return np.asarray(col.flatten().to_numpy(zero_copy_only=False), dtype=np.float32).reshape(-1, dim)


def embeddings_schema(dim: int) -> pa.Schema:
    """One vector per child chunk, for ``model``, keyed by the chunk's text hash."""
    return pa.schema(
        [
            ("chunk_id", pa.string()),
            ("model", pa.string()),
            ("text_hash", pa.string()),
            ("vector", pa.list_(pa.float32(), dim)),
        ]
    )


def search_schema(dim: int, columns: Sequence[str] = SEARCH_COLUMNS) -> pa.Schema:
    """The LanceDB table of one (kb, strategy_version): child chunks with their vectors
    (large strings as strings: LanceDB's full-text index reads those)."""
    fields: list[pa.Field[Any]] = [CHILD_CHUNKS.field(n) for n in columns]
    fields = [pa.field(f.name, pa.string()) if f.type == pa.large_string() else f for f in fields]
    return pa.schema([*fields, pa.field("vector", pa.list_(pa.float32(), dim))])
