"""Arrow schemas of every table the pipeline writes, column for column.

The Parquet partitions and the LanceDB tables use these; DuckDB reads them back with
``read_parquet('<warehouse>/<asset>/*/*/*.parquet', hive_partitioning=true)``.
"""

from __future__ import annotations

import pyarrow as pa

DOCUMENTS = pa.schema(
    [
        ("kb", pa.string()),
        ("doc_id", pa.string()),
        ("path", pa.string()),
        ("format", pa.string()),
        ("size_bytes", pa.int64()),
        ("content_hash", pa.string()),
        ("plan", pa.string()),
        ("override", pa.string()),
        ("error", pa.string()),  # set when discovery refused the file (e.g. too large)
    ]
)

BLOCKS = pa.schema(
    [
        ("doc_id", pa.string()),
        ("block_index", pa.int32()),
        ("block_type", pa.string()),
        ("text", pa.string()),
        ("start_offset", pa.int64()),
        ("end_offset", pa.int64()),
        ("level", pa.int32()),
        ("page_num", pa.int32()),
        ("section_path", pa.string()),
        ("image_id", pa.string()),
        ("metadata", pa.string()),  # JSON
    ]
)

TEXTS = pa.schema(
    [
        ("doc_id", pa.string()),
        ("path", pa.string()),
        ("format", pa.string()),
        ("content_hash", pa.string()),
        ("status", pa.string()),
        ("error", pa.string()),
        ("text", pa.large_string()),
        ("block_count", pa.int32()),
        ("image_count", pa.int32()),
        ("parser_version", pa.string()),
    ]
)

IMAGES = pa.schema(
    [
        ("image_id", pa.string()),
        ("doc_id", pa.string()),
        ("block_index", pa.int32()),
        ("page_num", pa.int32()),
        ("mime_type", pa.string()),
        ("width", pa.int32()),
        ("height", pa.int32()),
        ("path", pa.string()),
        ("context_before", pa.string()),
        ("context_after", pa.string()),
        ("source_ref", pa.string()),
    ]
)

IMAGE_DESCRIPTIONS = pa.schema(
    [
        ("image_id", pa.string()),
        ("doc_id", pa.string()),
        ("block_index", pa.int32()),
        ("page_num", pa.int32()),
        ("status", pa.string()),  # DESCRIBED | OCR_ONLY | DEGRADED | SKIPPED
        ("image_type", pa.string()),  # IMAGE | TABLE_IMAGE
        ("description", pa.string()),
        ("keywords", pa.list_(pa.string())),
        ("embedding_text", pa.string()),
        ("ocr_text", pa.string()),
        ("degraded", pa.bool_()),
        ("degrade_reason", pa.string()),
        ("skip_reason", pa.string()),
        ("model", pa.string()),
        ("error", pa.string()),  # the vision call's error, when it failed (key masked)
        ("metadata", pa.string()),  # JSON
    ]
)

_SPAN = [
    ("kb", pa.string()),
    ("strategy_version", pa.string()),
    ("doc_id", pa.string()),
    ("doc_path", pa.string()),
    ("text", pa.large_string()),
    ("start_offset", pa.int64()),
    ("end_offset", pa.int64()),
    ("char_count", pa.int32()),
    ("token_count", pa.int32()),
    ("section_path", pa.string()),
    ("page_num", pa.int32()),
    ("block_index", pa.int32()),
    ("strategy", pa.string()),
    ("strategy_code_version", pa.string()),
    ("overlap_chars", pa.int32()),
    ("derived", pa.bool_()),
    ("metadata", pa.string()),  # JSON: fallbacks, boundary scores, merges
]

PARENT_BLOCKS = pa.schema(
    [("parent_id", pa.string()), ("parent_index", pa.int32()), *_SPAN, ("content_hash", pa.string())]
)

CHILD_CHUNKS = pa.schema(
    [
        ("chunk_id", pa.string()),
        ("parent_id", pa.string()),
        ("chunk_index", pa.int32()),
        ("chunk_type", pa.string()),
        *_SPAN,
        ("image_id", pa.string()),
        ("text_hash", pa.string()),
        # hash of the document's parent ids and image descriptions: equal -> children reusable
        ("doc_fingerprint", pa.string()),
    ]
)


def embeddings_schema(dim: int) -> pa.Schema:
    return pa.schema(
        [
            ("chunk_id", pa.string()),
            ("model", pa.string()),
            ("text_hash", pa.string()),
            ("vector", pa.list_(pa.float32(), dim)),
        ]
    )


def search_schema(dim: int) -> pa.Schema:
    """The LanceDB table of one (kb, strategy_version): child chunks with their vectors."""
    keep = [
        "chunk_id",
        "parent_id",
        "chunk_index",
        "chunk_type",
        "kb",
        "strategy_version",
        "doc_id",
        "doc_path",
        "text",
        "start_offset",
        "end_offset",
        "char_count",
        "token_count",
        "section_path",
        "page_num",
        "block_index",
        "strategy",
        "metadata",
    ]
    fields = [CHILD_CHUNKS.field(n) for n in keep]
    fields = [pa.field(f.name, pa.string()) if f.type == pa.large_string() else f for f in fields]
    return pa.schema([*fields, ("vector", pa.list_(pa.float32(), dim))])
