"""The LanceDB search tables: one table per (kb, strategy_version).

By concern: ``connection`` (the database, opening and dropping tables), ``rows`` (columns,
vector sums, digests, the write's input), ``write`` (whole or merged, one commit), ``indexes``
(full-text and BTREE), ``ann`` (the vector index), ``maintenance`` (compaction, history, the
published tag). Everything public is re-exported here.

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

from corpus_pipeline.store.lance import ann as ann
from corpus_pipeline.store.lance import connection as connection
from corpus_pipeline.store.lance import indexes as indexes
from corpus_pipeline.store.lance import maintenance as maintenance
from corpus_pipeline.store.lance import rows as rows
from corpus_pipeline.store.lance import write as write
from corpus_pipeline.store.lance.ann import (
    VECTOR_INDEX_IVF_SAMPLE,
    VECTOR_INDEX_KMEANS_ITERATIONS,
    VECTOR_INDEX_NAME,
    VECTOR_INDEX_PQ_SAMPLE,
    VECTOR_INDEX_REBUILD_SHARE,
    VECTOR_INDEX_SEGMENT_ROWS,
    VECTOR_INDEX_TRAINED_KEY,
    VectorIndexAction,
    VectorIndexState,
    _fragment_groups,
    build_vector_index,
    ensure_vector_index,
    has_vector_index,
    vector_index_action,
    vector_index_params,
    vector_index_state,
)
from corpus_pipeline.store.lance.connection import (
    connect,
    drop_search_table,
    index_name,
    list_table_names,
    open_search_table,
    storage_options,
)
from corpus_pipeline.store.lance.indexes import (
    FTS_INDEX_NAME,
    FTS_MAX_SEGMENTS,
    SCALAR_INDEX_COLUMNS,
    create_fts_index,
    update_fts,
    update_scalar_indexes,
)
from corpus_pipeline.store.lance.maintenance import (
    PUBLISHED_TAG,
    SWITCHING_FROM_TAG,
    maintain_search_table,
    pin_table_version,
    prune_history,
    purge_deleted_rows,
)
from corpus_pipeline.store.lance.rows import (
    FRAGMENT_ROWS,
    KEYWORD_COLUMN,
    PY_SLICE_ROWS,
    ROW_HASH_COLUMN,
    ROWS_DIGEST_KEY,
    SEARCH_TABLE_VERSION,
    SOURCES_KEY,
    SUM_BLOCK_ROWS,
    SUM_SCALE,
    VECTOR_MEAN_KEY,
    VECTOR_SUM_KEY,
    SearchInput,
    TableInput,
    TableSummary,
    add_sums,
    fixed_sum,
    input_sum,
    rows_digest,
    rows_of_docs,
    search_rows,
    table_schema,
    vector_mean,
    with_keywords,
)
from corpus_pipeline.store.lance.write import (
    REWRITE_SHARE,
    TableWrite,
    changed_docs,
    write_search_input,
    write_search_table,
)

__all__ = [
    "FRAGMENT_ROWS",
    "FTS_INDEX_NAME",
    "FTS_MAX_SEGMENTS",
    "KEYWORD_COLUMN",
    "PUBLISHED_TAG",
    "PY_SLICE_ROWS",
    "REWRITE_SHARE",
    "ROWS_DIGEST_KEY",
    "ROW_HASH_COLUMN",
    "SCALAR_INDEX_COLUMNS",
    "SEARCH_TABLE_VERSION",
    "SOURCES_KEY",
    "SUM_BLOCK_ROWS",
    "SUM_SCALE",
    "SWITCHING_FROM_TAG",
    "VECTOR_INDEX_IVF_SAMPLE",
    "VECTOR_INDEX_KMEANS_ITERATIONS",
    "VECTOR_INDEX_NAME",
    "VECTOR_INDEX_PQ_SAMPLE",
    "VECTOR_INDEX_REBUILD_SHARE",
    "VECTOR_INDEX_SEGMENT_ROWS",
    "VECTOR_INDEX_TRAINED_KEY",
    "VECTOR_MEAN_KEY",
    "VECTOR_SUM_KEY",
    "SearchInput",
    "TableInput",
    "TableSummary",
    "TableWrite",
    "VectorIndexAction",
    "VectorIndexState",
    "_fragment_groups",
    "add_sums",
    "build_vector_index",
    "changed_docs",
    "connect",
    "create_fts_index",
    "drop_search_table",
    "ensure_vector_index",
    "fixed_sum",
    "has_vector_index",
    "index_name",
    "input_sum",
    "list_table_names",
    "maintain_search_table",
    "open_search_table",
    "pin_table_version",
    "prune_history",
    "purge_deleted_rows",
    "rows_digest",
    "rows_of_docs",
    "search_rows",
    "storage_options",
    "table_schema",
    "update_fts",
    "update_scalar_indexes",
    "vector_index_action",
    "vector_index_params",
    "vector_index_state",
    "vector_mean",
    "with_keywords",
    "write_search_input",
    "write_search_table",
]
