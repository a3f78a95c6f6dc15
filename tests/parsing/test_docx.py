"""DOCX by walking python-docx: heading styles, lists, tables, pictures in order, pages."""

from __future__ import annotations

from pathlib import Path

from parsing.builders import make_docx, png
from parsing.conftest import Parse


def test_docx_structure_pictures_and_pages(kb_dir: Path, parse: Parse) -> None:
    pictures = [png("TOPOLOGY"), png("恢复", color="yellow", cjk=True)]
    make_docx(kb_dir / "guide.docx", pictures)
    parsed = parse("guide.docx")
    assert parsed.status == "OK", parsed.error
    got = [(b.block_type, b.level, b.text, b.page_num) for b in parsed.blocks]
    assert got == [
        ("TITLE", 1, "Operations Guide", 1),
        ("TITLE", 2, "Install", 1),
        ("TEXT", None, "Install the agent on every host.", 1),
        ("LIST_ITEM", None, "Download the package", 1),
        ("LIST_ITEM", None, "Run the installer", 1),
        ("TITLE", 3, "Ports", 1),
        ("TABLE", None, "Port | Use\n8443 | console", 1),
        ("TEXT", None, "The topology:  shows the agents.", 1),
        ("IMAGE", None, "", 1),
        ("TITLE", 2, "恢复", 2),
        ("TEXT", None, "恢复步骤见下图。", 2),
        ("IMAGE", None, "", 2),
    ]
    assert parsed.blocks[6].section_path == "Operations Guide > Install > Ports"
    assert parsed.blocks[11].section_path == "Operations Guide > 恢复"
    assert [(im.block_index, im.page_num) for im in parsed.images] == [(8, 1), (11, 2)]
    assert [Path(im.path).read_bytes() for im in parsed.images] == pictures  # document order, exact bytes
    assert parsed.images[0].context_before.endswith("The topology:  shows the agents.")
    assert parsed.images[0].context_after.startswith("恢复")
