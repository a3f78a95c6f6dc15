"""Image descriptions into IMAGE / TABLE_IMAGE pieces, merged with text pieces (seed 000 §6.3).

The seed merges by ``blockIndex``, guessing one for text chunks that have none. Here both
kinds carry offsets into the same canonical text, so the order is exact: an image piece
(whose span is its image block's span) goes right after the last text piece that starts
at or before it. Chunk numbers are then the positions in the merged list.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import Protocol

from corpus_pipeline.models import Block, BlockType, ImageDescription, ImageStatus, Piece


def image_pieces(descriptions: Sequence[ImageDescription], blocks: Sequence[Block]) -> list[Piece]:
    """A derived piece per described or degraded image; SKIPPED ones make none.

    ``blocks`` are the document's blocks (any order); each piece takes its image block's
    span, section path and ``block_index``. The metadata links the piece to its image.
    """
    by_index = {b.block_index: b for b in blocks if b.block_type == BlockType.IMAGE.value}
    pieces = []
    for d in sorted(descriptions, key=lambda d: d.block_index):
        block = by_index.get(d.block_index)
        if block is None or d.status == ImageStatus.SKIPPED.value or not d.embedding_text.strip():
            continue
        pieces.append(
            Piece(
                text=d.embedding_text,
                start=block.start_offset,
                end=block.end_offset,
                section_path=block.section_path,
                chunk_type=d.image_type,
                derived=True,
                block_index=d.block_index,
                metadata={
                    "image_id": d.image_id,
                    "image_status": d.status,
                    "degraded": d.degraded,
                    "degrade_reason": d.degrade_reason,
                    "page_num": d.page_num if d.page_num is not None else block.page_num,
                    "keywords": list(d.keywords),
                    "description": d.description,
                    "model": d.model,
                },
            )
        )
    return pieces


def merge_in_reading_order(text_pieces: Sequence[Piece], images: Sequence[Piece]) -> list[Piece]:
    """Text pieces (in their order) with each image piece after the last text piece at or before it."""
    starts = [p.start for p in text_pieces]
    slots: dict[int, list[Piece]] = {}
    for img in sorted(images, key=lambda p: (p.start, p.block_index or 0)):
        slots.setdefault(bisect_right(starts, img.start), []).append(img)
    out: list[Piece] = list(slots.get(0, []))
    for i, piece in enumerate(text_pieces, start=1):
        out.append(piece)
        out.extend(slots.get(i, []))
    return out


class _Span(Protocol):
    start_offset: int
    end_offset: int


def parent_at(offset: int, parents: Sequence[_Span]) -> int | None:
    """Index of the parent block whose span holds ``offset`` (the last one starting at or
    before it when none holds it: an image between two parents belongs to the one above)."""
    if not parents:
        return None
    for i, p in enumerate(parents):
        if p.start_offset <= offset < p.end_offset:
            return i
    before = [i for i, p in enumerate(parents) if p.start_offset <= offset]
    return before[-1] if before else 0
