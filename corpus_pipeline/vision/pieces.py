"""Image descriptions into IMAGE / TABLE_IMAGE pieces (seed 000 §6.3).

Each piece takes its image block's span, so it joins the text chunks in exact reading
order (``chunking.document`` places it after the last text chunk that starts at or before
it; the seed guessed a block index for text chunks instead).
"""

from __future__ import annotations

from collections.abc import Sequence

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
