"""Image pieces join the text pieces in reading order (seed 000 §6.3), linked to image and parent."""

from __future__ import annotations

from corpus_pipeline.models import Block, ImageDescription
from corpus_pipeline.vision import image_pieces

BLOCKS = [
    Block("d", 0, "TITLE", "Guide", 0, 5, level=1, section_path="Guide"),
    Block("d", 1, "TEXT", "First.", 7, 13, section_path="Guide"),
    Block("d", 2, "IMAGE", "", 13, 13, section_path="Guide", image_id="img-a", page_num=1),
    Block("d", 3, "TEXT", "Second.", 15, 22, section_path="Guide"),
    Block("d", 4, "IMAGE", "", 22, 22, section_path="Guide", image_id="img-b", page_num=2),
]


def desc(block_index: int, status: str, text: str, image_type: str = "IMAGE", **kw: object) -> ImageDescription:
    return ImageDescription(
        f"img-{block_index}", "d", block_index, None, status, image_type=image_type, embedding_text=text, **kw
    )  # type: ignore[arg-type]


def test_image_pieces_carry_span_type_and_links_and_skip_skipped() -> None:
    pieces = image_pieces(
        [
            desc(4, "DEGRADED", "[image] OCR", degraded=True, degrade_reason="VLM_FAILED_WITH_OCR"),
            desc(2, "DESCRIBED", "A table", "TABLE_IMAGE"),
            desc(9, "SKIPPED", ""),
        ],
        BLOCKS,
    )
    assert [(p.chunk_type, p.start, p.end, p.block_index, p.derived) for p in pieces] == [
        ("TABLE_IMAGE", 13, 13, 2, True),
        ("IMAGE", 22, 22, 4, True),
    ]
    assert pieces[1].metadata["degraded"] is True and pieces[1].metadata["degrade_reason"] == "VLM_FAILED_WITH_OCR"
    assert pieces[0].metadata["image_id"] == "img-2" and pieces[0].metadata["page_num"] == 1
