"""The records that flow through the pipeline, one type each: document, block, text, image,
image description, parent block, chunk.

Each record is a frozen dataclass and *is* the row the store writes: the Arrow schema of
its table is derived from the dataclass (``corpus_pipeline.store.schemas.schema_of``), so
the two cannot drift. Column types beyond the plain Python ones are declared with the
aliases below (``Int32``, ``LargeText``, ``Json``); ``X | None`` is a nullable column.

``Piece`` is the one in-memory type strategies pass between steps (no ids yet).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

#: A 32-bit integer column (positions, counts, sizes of one document or chunk).
Int32 = Annotated[int, "int32"]
#: A text column that may hold more than 2 GB per batch (documents, chunks).
LargeText = Annotated[str, "large_string"]
#: A mapping stored as JSON text (metadata).
Json = Annotated[Mapping[str, Any], "json"]


class DocStatus(str, enum.Enum):  # noqa: UP042
    OK = "OK"
    FAILED = "FAILED"  # could not be read or parsed; ``error`` says why


class BlockType(str, enum.Enum):  # noqa: UP042
    TITLE = "TITLE"
    TEXT = "TEXT"
    LIST_ITEM = "LIST_ITEM"
    TABLE = "TABLE"
    CODE = "CODE"
    IMAGE = "IMAGE"


class ChunkType(str, enum.Enum):  # noqa: UP042
    TEXT = "TEXT"
    PROPOSITION = "PROPOSITION"
    SEMANTIC_SEGMENT = "SEMANTIC_SEGMENT"
    IMAGE = "IMAGE"
    TABLE_IMAGE = "TABLE_IMAGE"


#: Chunk types whose text is a description of an image, not a span of the document.
IMAGE_CHUNK_TYPES = frozenset({ChunkType.IMAGE.value, ChunkType.TABLE_IMAGE.value})


@dataclass(frozen=True, slots=True)
class Document:
    """One file of a knowledge base, as discovered (the ``documents`` table)."""

    kb: str
    doc_id: str
    path: str  # relative to the KB folder, POSIX separators
    format: str  # the name of its row in doc_formats.FORMATS
    size_bytes: int
    content_hash: str  # sha256 of the file's bytes
    plan: str  # the resolved plan snapshot for this document (KB plan or override), or "auto"
    override: str | None = None  # the kb.yaml override glob that matched, if any
    error: str | None = None  # set when discovery refused the file (too large, ...)


@dataclass(frozen=True, slots=True)
class Block:
    """One parsed block of a document, in reading order (the ``blocks`` table of
    ``parsed_blocks``).

    ``start_offset``/``end_offset`` index the document's canonical text:
    ``canonical_text[start_offset:end_offset]`` is the block's source span.
    """

    doc_id: str
    block_index: Int32
    block_type: str  # a BlockType value
    text: str
    start_offset: int
    end_offset: int
    level: Int32 | None = None  # heading level for TITLE blocks (1 = top)
    page_num: Int32 | None = None  # 1-based, for paged formats
    section_path: str = ""
    image_id: str | None = None  # content hash of the image, for IMAGE blocks
    metadata: Json = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DocumentText:
    """A document's canonical text and parse outcome (the ``texts`` table of ``parsed_blocks``)."""

    doc_id: str
    path: str
    format: str
    content_hash: str
    status: str  # a DocStatus value
    error: str | None
    text: LargeText
    block_count: Int32
    image_count: Int32
    parser_version: str
    #: the document's title: its metadata's (front matter), else its first heading, else its
    #: file name (``parsing.parse.document_title``); "" in partitions written before it
    title: str = ""
    #: what the document says about itself besides its title (front matter ``description``,
    #: ``tags``)
    metadata: Json = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ParsedDocument:
    """A parsed document in memory: its canonical text, blocks and images, or the error
    that stopped it."""

    doc_id: str
    status: str  # a DocStatus value
    text: str = ""
    blocks: tuple[Block, ...] = ()
    error: str | None = None
    images: tuple[ExtractedImage, ...] = ()
    title: str | None = None  # as the document names itself (front matter); else see ``document_title``
    metadata: Mapping[str, Any] = field(default_factory=dict)  # description, tags


@dataclass(frozen=True, slots=True)
class ExtractedImage:
    """An image found in a document, stored content-addressed under the warehouse (the
    ``images`` table of ``parsed_blocks``)."""

    image_id: str  # sha256 of the image bytes
    doc_id: str
    block_index: Int32
    page_num: Int32 | None
    mime_type: str
    path: str  # where the bytes are stored (absolute), or "" if not stored yet
    context_before: str = ""
    context_after: str = ""
    source_ref: str = ""  # the reference in the document (markdown/HTML src, DOCX rId, PDF object)
    width: Int32 = 0  # pixels, 0 when unknown
    height: Int32 = 0


class ImageStatus(str, enum.Enum):  # noqa: UP042
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
    block_index: Int32
    page_num: Int32 | None
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
    metadata: Json = field(default_factory=dict)


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
class ParentBlock:
    """A parent block of a parent/child plan (seed 003): the context unit search returns
    (the ``parent_blocks`` table). Its children are the chunks whose ``parent_id`` is its id.

    ``text == canonical_text[start_offset:end_offset]`` unless ``derived``; the first
    ``overlap_chars`` characters repeat the end of the previous parent.
    """

    parent_id: str
    parent_index: Int32
    kb: str
    strategy_version: str
    doc_id: str
    doc_path: str
    text: LargeText
    start_offset: int
    end_offset: int
    char_count: Int32
    token_count: Int32
    section_path: str
    page_num: Int32 | None
    block_index: Int32 | None
    strategy: str  # the step that cut it ("DOCUMENT" for a CHILD-only plan)
    strategy_code_version: str
    overlap_chars: Int32
    derived: bool
    metadata: Json  # the plan, the recommender's reasons, fallbacks
    content_hash: str  # of the document it was cut from


@dataclass(frozen=True, slots=True)
class Chunk:
    """One child chunk, the single record every strategy's output becomes (the
    ``child_chunks`` table); what is embedded and searched.

    When ``derived`` is false, ``canonical_text[start_offset:end_offset] == text`` exactly
    and the first ``overlap_chars`` characters repeat the end of the previous chunk (the
    chunk's own span starts at ``start_offset + overlap_chars``).
    """

    chunk_id: str
    parent_id: str
    chunk_index: Int32  # position in the document, in reading order (images included)
    chunk_type: str  # a ChunkType value
    kb: str
    strategy_version: str
    doc_id: str
    doc_path: str
    text: LargeText
    start_offset: int
    end_offset: int
    char_count: Int32
    token_count: Int32  # by the embedding model's own tokenizer
    section_path: str
    page_num: Int32 | None
    block_index: Int32 | None
    strategy: str
    strategy_code_version: str
    overlap_chars: Int32
    derived: bool
    metadata: Json  # fallbacks, boundary scores, merges, re-cuts
    image_id: str | None  # for IMAGE / TABLE_IMAGE chunks
    text_hash: str  # sha256 of ``text``: the embedding cache key
    # hash of the document's parent ids and image pieces: equal -> the children are reusable
    doc_fingerprint: str
