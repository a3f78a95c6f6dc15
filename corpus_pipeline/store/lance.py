"""The LanceDB search tables: one table per (kb, strategy_version), replaced whole.

A partition's run overwrites exactly its own table (a new Lance version, so readers never
see half a write and a re-run never duplicates rows); other KBs and versions are other
tables. Each table has the child chunks, their vectors, and ``keyword_text``: the text as
the keyword channel analyses it (CJK as overlapping bigrams, identifiers whole and in parts, see
``corpus_pipeline.retrieval.analysis``) with a full-text index on it (split on spaces, lower-cased, English
stemmed, stop words removed). Tables written before that column existed have the ICU
full-text index on ``text``; search handles both.
"""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from datetime import timedelta
from typing import Any

import numpy as np
import pyarrow as pa

from corpus_pipeline.errors import StoreError
from corpus_pipeline.store.layout import Layout, search_table_name
from corpus_pipeline.store.schemas import search_schema

os.environ.setdefault("LANCE_LOG", "error")

# Below this many rows a flat (exact) vector search is fast enough (~50 ms at 100k rows);
# an IVF_PQ index costs ~18 s to build on 2 cores and is only worth it past that.
VECTOR_INDEX_MIN_ROWS = 200_000
#: Bump when the table's layout or indexing changes: every version's table is then stale
#: (``corpus_pipeline.freshness``) and rebuilt by the next ``corpus index`` or sensor tick.
SEARCH_TABLE_VERSION = "3"  # 2: keyword_text column (CJK bigrams) carries the FTS index; 3: vector mean
# The analysed text the keyword channel searches (beside the search_schema columns).
KEYWORD_COLUMN = "keyword_text"
#: Schema metadata key: the mean of the table's vectors, as JSON (the vector gate's baseline).
VECTOR_MEAN_KEY = b"corpus.vector_mean"


def connect(layout: Layout) -> Any:
    """The LanceDB database of a CORPUS_HOME (created if missing)."""
    import lancedb

    layout.lancedb.mkdir(parents=True, exist_ok=True)
    return lancedb.connect(str(layout.lancedb))


def write_search_table(layout: Layout, kb: str, version: str, chunks: pa.Table, vectors: np.ndarray) -> int:
    """Replace the search table of one partition with ``chunks`` and their ``vectors``."""
    from lancedb.index import FTS

    from corpus_pipeline.retrieval.analysis import (
        keyword_text,  # here: retrieval imports this module
    )

    dim = int(vectors.shape[1]) if vectors.ndim == 2 and vectors.shape[0] else 0
    if len(chunks) != len(vectors):
        raise StoreError(f"{len(chunks)} chunks but {len(vectors)} vectors for {kb}|{version}")
    if dim == 0:
        dim = 1 if len(chunks) == 0 else int(vectors.shape[1])
    schema = search_schema(dim)
    cols: dict[str, Any] = {}
    for f in schema:
        if f.name == "vector":
            flat = pa.array(np.asarray(vectors, dtype=np.float32).reshape(-1), type=pa.float32())
            cols["vector"] = pa.FixedSizeListArray.from_arrays(flat, dim)
        else:
            cols[f.name] = chunks.column(f.name).cast(f.type)
    table = pa.table(cols, schema=schema)
    table = table.append_column(
        KEYWORD_COLUMN, pa.array([keyword_text(t or "") for t in table.column("text").to_pylist()], pa.string())
    )
    if len(table):
        mean = np.asarray(vectors, dtype=np.float64).mean(axis=0)
        table = table.replace_schema_metadata({VECTOR_MEAN_KEY: json.dumps([round(float(x), 7) for x in mean])})
    db = connect(layout)
    name = search_table_name(kb, version)
    exists = name in list_table_names(db)
    tbl = db.create_table(name, data=table, mode="overwrite" if exists else "create")
    if len(table):
        tbl.create_index(
            KEYWORD_COLUMN,
            config=FTS(
                base_tokenizer="whitespace", language="English", stem=True, remove_stop_words=True, ascii_folding=True
            ),
            replace=True,
        )
        if len(table) >= VECTOR_INDEX_MIN_ROWS:
            tbl.create_index("vector", metric="cosine", replace=True)
    prune_history(tbl)
    return len(table)


def prune_history(tbl: Any) -> None:
    """Drop every older version of a search table (and files no version uses, e.g. from a
    write killed half way): a table is replaced whole, so old versions are only the text of
    deleted and edited documents, readable through ``checkout``, and a table would grow with
    every ``--force``. Rollback is between strategy versions, which are separate tables
    (kept by ``retention.keep_versions``). One writer per KB (``store.locks``) makes
    ``delete_unverified`` safe: no other transaction can be in progress on this table.
    A reader that keeps a table open across a re-index of its version must reopen it (its
    parents changed too); ``corpus search`` opens per query."""
    with warnings.catch_warnings():
        # "removes every version except the latest ... concurrent reader or writer ... will fail":
        # there is no other writer (the KB lock), and readers open the table per search.
        warnings.filterwarnings("ignore", message=r"optimize\(cleanup_older_than=0\)", category=UserWarning)
        tbl.optimize(cleanup_older_than=timedelta(0), delete_unverified=True)


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
