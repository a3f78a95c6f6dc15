"""PDF: pdfminer text (English and CID Chinese), headings by font size, pages, images."""

from __future__ import annotations

from pathlib import Path

from parsing.builders import make_pdf, png
from parsing.conftest import Parse


def test_pdf_pages_headings_lists_images_and_chinese(kb_dir: Path, parse: Parse) -> None:
    make_pdf(kb_dir / "restore.pdf", png("WIZARD"))
    parsed = parse("restore.pdf")
    assert parsed.status == "OK", parsed.error
    got = [(b.block_type, b.level, b.text, b.page_num) for b in parsed.blocks]
    assert got == [
        ("TITLE", 1, "Restore Guide", 1),
        ("TEXT", None, "Restores start from a snapshot and finish with a verification step.", 1),
        ("TITLE", 3, "Before you start", 1),
        ("LIST_ITEM", None, "- Check free space", 1),
        ("LIST_ITEM", None, "- Pick a snapshot", 1),
        ("IMAGE", None, "", 1),
        ("TEXT", None, "The wizard is shown above.", 1),
        ("TITLE", 2, "第二章 数据恢复", 2),
        ("TEXT", None, "恢复前先确认快照完整。", 2),
    ]  # page numbers "1" and "2" in the bottom margin are dropped
    assert parsed.blocks[8].section_path == "Restore Guide > 第二章 数据恢复"
    (image,) = parsed.images
    assert (image.block_index, image.page_num, image.mime_type, image.width, image.height) == (
        5,
        1,
        "image/png",
        360,
        120,
    )
    assert image.context_after.startswith("The wizard is shown above.")
    assert Path(image.path).is_file()


def test_images_dir_none_identifies_without_storing(kb_dir: Path, tmp_path: Path) -> None:
    from corpus_pipeline.models import Document
    from corpus_pipeline.parsing import parse_document

    make_pdf(kb_dir / "r.pdf", png("W"))
    doc = Document("kb", "d", "r.pdf", "pdf", 1, "", "")
    parsed = parse_document(doc, kb_dir)
    assert parsed.status == "OK" and len(parsed.images) == 1 and parsed.images[0].path == ""
