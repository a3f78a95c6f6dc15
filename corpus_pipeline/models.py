"""Typed records that flow through the pipeline: documents, blocks, chunks.

Frozen dataclasses inside the library; the Parquet / LanceDB schemas in
``corpus_pipeline.store.schemas`` mirror them column for column.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class DocFormat(str, enum.Enum):
    MARKDOWN = "markdown"
    TEXT = "text"
    HTML = "html"
    DOCX = "docx"
    PDF = "pdf"


class DocStatus(str, enum.Enum):
    OK = "OK"
    FAILED = "FAILED"  # could not be read or parsed; ``error`` says why


class BlockType(str, enum.Enum):
    TITLE = "TITLE"
    TEXT = "TEXT"
    LIST_ITEM = "LIST_ITEM"
    TABLE = "TABLE"
    CODE = "CODE"
    IMAGE = "IMAGE"


class ChunkType(str, enum.Enum):
    TEXT = "TEXT"
    PROPOSITION = "PROPOSITION"
    SEMANTIC_SEGMENT = "SEMANTIC_SEGMENT"
    IMAGE = "IMAGE"
    TABLE_IMAGE = "TABLE_IMAGE"


@dataclass(frozen=True, slots=True)
class Document:
    """One file of a knowledge base, as discovered (before parsing)."""

    kb: str
    doc_id: str
    path: str  # relative to the KB folder, POSIX separators
    format: str  # a DocFormat value
    size_bytes: int
    content_hash: str  # sha256 of the file's bytes
    plan: str  # the resolved plan snapshot for this document (KB plan or override)
    override: str | None = None  # the kb.yaml override glob that matched, if any


@dataclass(frozen=True, slots=True)
class Block:
    """One parsed block of a document, in reading order.

    ``start_offset``/``end_offset`` index the document's canonical text:
    ``canonical_text[start_offset:end_offset]`` is the block's source span.
    """

    doc_id: str
    block_index: int
    block_type: str  # a BlockType value
    text: str
    start_offset: int
    end_offset: int
    level: int | None = None  # heading level for TITLE blocks (1 = top)
    page_num: int | None = None  # 1-based, for paged formats
    section_path: str = ""
    image_id: str | None = None  # content hash of the image, for IMAGE blocks
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ParsedDocument:
    """A parsed document: its canonical text and blocks, or the error that stopped it."""

    doc_id: str
    status: str  # a DocStatus value
    text: str = ""
    blocks: tuple[Block, ...] = ()
    error: str | None = None
    images: tuple[ExtractedImage, ...] = ()


@dataclass(frozen=True, slots=True)
class ExtractedImage:
    """An image found in a document, stored content-addressed under the warehouse."""

    image_id: str  # sha256 of the image bytes
    doc_id: str
    block_index: int
    page_num: int | None
    mime_type: str
    path: str  # where the bytes are stored (absolute), or "" if not stored yet
    context_before: str = ""
    context_after: str = ""
    source_ref: str = ""  # the reference in the document (markdown/HTML src, DOCX rId, PDF object)
    width: int = 0  # pixels, 0 when unknown
    height: int = 0


class ImageStatus(str, enum.Enum):
    DESCRIBED = "DESCRIBED"  # the vision model described it
    OCR_ONLY = "OCR_ONLY"  # no vision model configured; OCR text only (degraded)
    DEGRADED = "DEGRADED"  # the vision model failed; OCR text only (degraded)
    SKIPPED = "SKIPPED"  # no description and no OCR text; ``skip_reason`` says why


@dataclass(frozen=True, slots=True)
class ImageDescription:
    """What the ``image_descriptions`` stage says about one image block (seed 000 §6.2).

    ``embedding_text`` is what an IMAGE / TABLE_IMAGE chunk embeds; it is empty when
    ``status`` is SKIPPED, and then no chunk is made.
    """

    image_id: str
    doc_id: str
    block_index: int
    page_num: int | None
    status: str  # an ImageStatus value
    image_type: str = "IMAGE"  # a ChunkType value: IMAGE or TABLE_IMAGE
    description: str = ""
    keywords: tuple[str, ...] = ()
    embedding_text: str = ""
    ocr_text: str = ""
    degraded: bool = False
    degrade_reason: str | None = None  # VLM_FAILED_WITH_OCR | OCR_ONLY_NO_VLM
    skip_reason: str | None = None
    model: str = ""  # the vision model that described it ("" for OCR only)
    error: str | None = None  # the vision call's error, when it failed
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Piece:
    """A span produced by a strategy step, before it becomes a numbered chunk.

    For source-keeping strategies ``text == source[start:end]``; ``overlap_chars`` is the
    length of the prefix repeated from the previous piece. Derived text (propositions,
    image descriptions, rewritten LLM pieces) sets ``derived=True`` and keeps the span of
    the source it came from.
    """

    text: str
    start: int
    end: int
    section_path: str = ""
    chunk_type: str = ChunkType.TEXT.value
    overlap_chars: int = 0
    derived: bool = False
    block_index: int | None = None
    strategy: str = ""  # the step that cut this piece (set by the pipeline)
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk, the single record type every strategy produces.

    ``text`` is what is embedded. When ``derived`` is false, ``source[start_offset:end_offset]
    == text`` exactly and the first ``overlap_chars`` characters repeat the end of the
    previous chunk (the chunk's own span starts at ``start_offset + overlap_chars``).
    """

    index: int
    text: str
    start_offset: int
    end_offset: int
    char_count: int
    token_count: int
    chunk_type: str = ChunkType.TEXT.value
    section_path: str = ""
    strategy: str = ""
    strategy_version: str = ""
    overlap_chars: int = 0
    derived: bool = False
    block_index: int | None = None
    parent_index: int | None = None  # the parent block this child lies in (plans only)
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ParentBlock:
    """A parent block of a parent/child plan (seed 003): the context unit search returns.

    Its children are chunks ``start_chunk_no .. end_chunk_no`` (inclusive) of the document.
    """

    index: int
    text: str
    start_offset: int
    end_offset: int
    char_count: int
    token_count: int
    section_path: str
    strategy: str
    overlap_chars: int
    derived: bool
    start_chunk_no: int
    end_chunk_no: int
    child_count: int
    metadata: Mapping[str, Any] = field(default_factory=dict)
