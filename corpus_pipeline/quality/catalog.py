"""The catalog of data-quality checks: one entry per check, per asset.

The names are the Dagster asset-check names and the keys of ``quality.severity`` in
``kb.yaml``. ``severity`` is the default: ``ERROR`` checks block (a failure stops
embedding and keeps the KB's active version), ``WARN`` checks only report. A KB may move
any check between the two (``quality: {severity: {child_quantiles: error}}``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["ERROR", "WARN"]
ASSETS = ("parent_blocks", "child_chunks", "chunk_embeddings")


@dataclass(frozen=True)
class CheckDef:
    name: str
    asset: str
    severity: Severity
    description: str


CHECKS: tuple[CheckDef, ...] = (
    # parent_blocks
    CheckDef("parent_not_empty", "parent_blocks", "ERROR", "no parent block is empty or blank"),
    CheckDef("parent_unique", "parent_blocks", "ERROR", "parent ids, (doc, index) and (doc, span, text) are unique"),
    CheckDef(
        "parent_offsets_valid",
        "parent_blocks",
        "ERROR",
        "0 <= start < end <= len(document); text == canonical_text[start:end] unless derived; char_count == len(text)",
    ),
    CheckDef(
        "parent_size_within_plan",
        "parent_blocks",
        "ERROR",
        "every parent within the parent pipeline's size bound (derived parents exempt)",
    ),
    CheckDef("parent_quantiles", "parent_blocks", "WARN", "p5/p50/p95 of char_count and token_count in range"),
    CheckDef(
        "documents_have_parents", "parent_blocks", "ERROR", "every parsed document with text yields a parent block"
    ),
    # child_chunks
    CheckDef("child_not_empty", "child_chunks", "ERROR", "no chunk is empty or blank"),
    CheckDef("child_unique", "child_chunks", "ERROR", "chunk ids, (doc, index) and (doc, span, text) are unique"),
    CheckDef("child_duplicate_text", "child_chunks", "WARN", "no text repeated within one document"),
    CheckDef(
        "child_offsets_valid",
        "child_chunks",
        "ERROR",
        "0 <= start < end <= len(document); text == canonical_text[start:end] unless derived; char_count == len(text)",
    ),
    CheckDef(
        "child_inside_parent", "child_chunks", "ERROR", "every chunk's parent exists, same document, span inside it"
    ),
    CheckDef(
        "child_size_within_plan",
        "child_chunks",
        "ERROR",
        "every chunk within the child pipeline's size bound (derived and IMAGE/TABLE_IMAGE chunks exempt)",
    ),
    CheckDef(
        "child_size_above_minimum",
        "child_chunks",
        "WARN",
        "chunks under the minimum size at most a share (a parent's last chunk and derived chunks exempt)",
    ),
    CheckDef(
        "child_token_limit",
        "child_chunks",
        "ERROR",
        "no chunk over the embedding model's token limit (the model would silently truncate it)",
    ),
    CheckDef("child_quantiles", "child_chunks", "WARN", "p5/p50/p95 of char_count and token_count in range"),
    CheckDef("documents_have_chunks", "child_chunks", "ERROR", "every parsed document with text yields a chunk"),
    # chunk_embeddings
    CheckDef("embedding_dimension", "chunk_embeddings", "ERROR", "every vector has the model's dimension"),
    CheckDef("embedding_values_finite", "chunk_embeddings", "ERROR", "no NaN or infinite value, no all-zero vector"),
    CheckDef(
        "embeddings_cover_chunks",
        "chunk_embeddings",
        "ERROR",
        "exactly one vector per child chunk, for the chunk's current text",
    ),
)

BY_NAME: dict[str, CheckDef] = {c.name: c for c in CHECKS}


def checks_for(asset: str) -> list[CheckDef]:
    """The checks of one asset, in catalog order."""
    if asset not in ASSETS:
        raise KeyError(f"no quality checks for asset {asset!r}; assets with checks: {', '.join(ASSETS)}")
    return [c for c in CHECKS if c.asset == asset]
