"""The stages a partition runs, each a plain function returning its rows and typed stats
(``StageResult``); the Dagster assets are one call each.

    discover   documents_of a KB folder                      -> documents
    parse      each document -> canonical text, blocks, images -> parsed_blocks
    describe   each image -> description / OCR / skipped       -> image_descriptions
    chunk      parents, then children (one algorithm)          -> parent_blocks, child_chunks
    embed      one vector per child chunk (cached)             -> chunk_embeddings
    publish    the search table; activation and retention      -> search_index

Every id is deterministic (same input and version -> same id) so re-runs are idempotent.
"""

from corpus_pipeline.indexing.chunk import (
    ChunkMerge,
    ChunkWork,
    build_child_chunks,
    build_parent_blocks,
    child_batch,
    children_to_build,
    image_pieces_by_doc,
    merge_chunks,
    parent_batch,
    parents_to_build,
)
from corpus_pipeline.indexing.describe import (
    describe_batch,
    describe_kb_images,
    images_to_describe,
    merge_descriptions,
)
from corpus_pipeline.indexing.discover import discover_documents, documents_of
from corpus_pipeline.indexing.embed import (
    EmbeddedChunks,
    EmbedPlan,
    chunk_keys,
    embed_batch,
    embed_chunks,
    embed_vectors,
    texts_to_embed,
    vectors_of,
)
from corpus_pipeline.indexing.parse import (
    ParseMerge,
    blocks_by_doc,
    documents_to_parse,
    merge_parsed,
    ok_texts,
    parse_batch,
    parse_documents,
    parsed_rows,
    previous_parse_state,
)
from corpus_pipeline.indexing.publish import publish_version, write_search_index
from corpus_pipeline.indexing.stats import (
    ChunkStats,
    DescribeStats,
    DiscoverStats,
    EmbedStats,
    ParseStats,
    PublishStats,
    StageResult,
    StageStats,
    read_checks,
    read_stats,
)
from corpus_pipeline.indexing.table import ColumnFingerprint, table_fingerprint

__all__ = [
    "ChunkMerge",
    "ChunkStats",
    "ChunkWork",
    "ColumnFingerprint",
    "DescribeStats",
    "DiscoverStats",
    "EmbedPlan",
    "EmbedStats",
    "EmbeddedChunks",
    "ParseMerge",
    "ParseStats",
    "PublishStats",
    "StageResult",
    "StageStats",
    "blocks_by_doc",
    "build_child_chunks",
    "build_parent_blocks",
    "child_batch",
    "children_to_build",
    "chunk_keys",
    "describe_batch",
    "describe_kb_images",
    "discover_documents",
    "documents_of",
    "documents_to_parse",
    "embed_batch",
    "embed_chunks",
    "embed_vectors",
    "image_pieces_by_doc",
    "images_to_describe",
    "merge_chunks",
    "merge_descriptions",
    "merge_parsed",
    "ok_texts",
    "parent_batch",
    "parents_to_build",
    "parse_batch",
    "parse_documents",
    "parsed_rows",
    "previous_parse_state",
    "publish_version",
    "read_checks",
    "read_stats",
    "table_fingerprint",
    "texts_to_embed",
    "vectors_of",
    "write_search_index",
]
