"""The full-text index on the analysed keyword text and the BTREE indexes on ``parent_id`` and
``doc_id``: created, and brought up to date after a write."""

from __future__ import annotations

from typing import Any

from corpus_pipeline.store.lance.connection import index_name
from corpus_pipeline.store.lance.rows import KEYWORD_COLUMN

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


def create_fts_index(tbl: Any) -> None:
    from lancedb.index import FTS

    tbl.create_index(
        KEYWORD_COLUMN,
        config=FTS(
            base_tokenizer="whitespace", language="English", stem=True, remove_stop_words=True, ascii_folding=True
        ),
        replace=True,
    )


def update_fts(tbl: Any) -> None:
    """The full-text index over every row: created when missing (a new table, or a write
    killed before its index was), the rows a merge wrote added as a delta segment, the
    segments merged into one once there are ``FTS_MAX_SEGMENTS``."""
    stats = tbl.index_stats(FTS_INDEX_NAME)
    if stats is None:
        create_fts_index(tbl)
        return
    if not stats.num_unindexed_rows:
        return
    merge = int(getattr(stats, "num_indices", 1) or 1) >= FTS_MAX_SEGMENTS
    tbl.to_lance().optimize.optimize_indices(index_names=[FTS_INDEX_NAME], num_indices_to_merge=None if merge else 0)
    tbl.checkout_latest()


def update_scalar_indexes(tbl: Any) -> list[str]:
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
