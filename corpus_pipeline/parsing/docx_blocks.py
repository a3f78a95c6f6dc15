"""DOCX into blocks by walking the body with python-docx, pictures in document order.

unstructured's DOCX partitioner drops inline pictures and cannot say where they were, so
the body is walked here (paragraphs, tables, content controls) in order:

* heading styles (``Heading N``, localised ``标题 N``, styles based on them, or an outline
  level) -> TITLE level N; the ``Title`` style -> level 1, and when a Title paragraph comes
  before the first heading every heading moves one level down, so its section paths read
  ``Title > Heading 1 > Heading 2``;
* numbered / bulleted paragraphs (``numPr`` or a ``List …`` style) -> LIST_ITEM;
* tables -> TABLE, one ``cell | cell`` line per row (merged cells once);
* pictures (``a:blip`` and legacy ``v:imagedata``) -> IMAGE blocks right after the
  paragraph holding them, alt text from ``wp:docPr``;
* page numbers from Word's rendered page breaks when the file has them (saved by Word),
  else from explicit page breaks; table-of-contents paragraphs are skipped.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from corpus_pipeline.errors import DocumentError
from corpus_pipeline.models import BlockType
from corpus_pipeline.parsing.blocks import JoinedBlocks

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
A = "http://schemas.openxmlformats.org/drawingml/2006/main"
R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
WP = "http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing"
V = "urn:schemas-microsoft-com:vml"
_HEADING_NAME = re.compile(r"^(?:heading|标题)\s*(\d)$", re.I)

#: ``on_image(data, part_name, block_index, page) -> (image_id or None, error or None)``
DocxImageHook = Callable[[bytes, str, int, int | None], tuple[str | None, str | None]]


def _q(ns: str, tag: str) -> str:
    return f"{{{ns}}}{tag}"


def _style_chain(style: Any) -> Iterator[Any]:
    seen = 0
    while style is not None and seen < 10:
        yield style
        style = style.base_style
        seen += 1


def _outline_level(element: Any) -> int | None:
    if element is None:
        return None
    lvl = element.find(f"{_q(W, 'pPr')}/{_q(W, 'outlineLvl')}")
    if lvl is not None:
        val = int(lvl.get(_q(W, "val"), "9"))
        return val + 1 if val < 9 else None
    return None


def _heading(paragraph: Any) -> tuple[str, int] | None:
    """``("title", 1)`` / ``("heading", n)`` for heading paragraphs, else None."""
    style = paragraph.style
    for s in _style_chain(style):
        name = (s.name or "").strip()
        if name.lower() == "title":
            return "title", 1
        if m := _HEADING_NAME.match(name):
            return "heading", int(m.group(1))
        if m := _HEADING_NAME.match((s.style_id or "").strip()):
            return "heading", int(m.group(1))
    level = _outline_level(paragraph._p) or _outline_level(style.element if style is not None else None)
    if level is not None:
        return "heading", level
    return None


def _list_depth(paragraph: Any) -> int | None:
    num = paragraph._p.find(f"{_q(W, 'pPr')}/{_q(W, 'numPr')}")
    if num is not None:
        ilvl = num.find(_q(W, "ilvl"))
        num_id = num.find(_q(W, "numId"))
        if num_id is not None and num_id.get(_q(W, "val")) == "0":
            return None  # numbering explicitly removed
        return int(ilvl.get(_q(W, "val"), "0")) + 1 if ilvl is not None else 1
    for s in _style_chain(paragraph.style):
        if (s.name or "").lower().startswith("list"):
            return 1
        if s.element.find(f"{_q(W, 'pPr')}/{_q(W, 'numPr')}") is not None:
            return 1
    return None


def _pictures(element: Any) -> list[tuple[str, str, bool]]:
    """``(relationship id, alt text, is_external)`` of the pictures inside an element, in order."""
    out = []
    for node in element.iter(_q(A, "blip"), _q(V, "imagedata")):
        rid = node.get(_q(R, "embed")) or node.get(_q(R, "id"))
        link = node.get(_q(R, "link"))
        alt = ""
        parent = node.getparent()
        while parent is not None:
            doc_pr = parent.find(_q(WP, "docPr"))
            if doc_pr is not None:
                alt = doc_pr.get("descr") or doc_pr.get("title") or ""
                break
            parent = parent.getparent()
        if rid:
            out.append((rid, alt, False))
        elif link:
            out.append((link, alt, True))
    return out


class _Pages:
    """The page counter: rendered page breaks when Word left them, else explicit breaks."""

    def __init__(self, body: Any) -> None:
        self.rendered = next(body.iter(_q(W, "lastRenderedPageBreak")), None) is not None
        self.page = 1

    def _breaks(self, p: Any) -> list[bool]:
        """For each page break in paragraph ``p``: does it come before any text?"""
        out = []
        text_seen = False
        for node in p.iter(_q(W, "t"), _q(W, "br"), _q(W, "lastRenderedPageBreak")):
            if node.tag == _q(W, "t"):
                text_seen = text_seen or bool((node.text or "").strip())
            elif (self.rendered and node.tag == _q(W, "lastRenderedPageBreak")) or (
                not self.rendered and node.tag == _q(W, "br") and node.get(_q(W, "type")) == "page"
            ):
                out.append(not text_seen)
        return out

    def paragraph(self, p: Any) -> tuple[int, int]:
        """``(page at the paragraph's text, page after it)``."""
        if not self.rendered and p.find(f"{_q(W, 'pPr')}/{_q(W, 'pageBreakBefore')}") is not None:
            self.page += 1
        breaks = self._breaks(p)
        self.page += sum(1 for before in breaks if before)
        at = self.page
        self.page += sum(1 for before in breaks if not before)
        return at, self.page


def _table_text(table: Any) -> str:
    rows = []
    for row in table.rows:
        cells: list[str] = []
        last = None
        for cell in row.cells:
            if cell._tc is last:
                continue  # a merged cell repeats
            last = cell._tc
            cells.append(" ".join(cell.text.split()))
        if any(cells):
            rows.append(" | ".join(cells))
    return "\n".join(rows)


def docx_blocks(doc_id: str, path: Path, on_image: DocxImageHook | None = None) -> JoinedBlocks:
    """Blocks of a DOCX file in document order; pictures go to ``on_image``."""
    import docx
    from docx.opc.exceptions import PackageNotFoundError
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        document = docx.Document(str(path))
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise DocumentError(f"not a readable DOCX file: {type(exc).__name__}: {exc}") from exc
    body = document.element.body
    part = document.part
    out = JoinedBlocks(doc_id)
    pages = _Pages(body)

    def items(parent: Any) -> Iterator[Any]:
        for child in parent.iterchildren():
            if child.tag == _q(W, "p"):
                yield Paragraph(child, document._body)
            elif child.tag == _q(W, "tbl"):
                yield Table(child, document._body)
            elif child.tag == _q(W, "sdt"):
                content = child.find(_q(W, "sdtContent"))
                if content is not None:
                    yield from items(content)

    all_items = list(items(body))
    shift = 0
    for item in all_items:
        if isinstance(item, Paragraph) and item.text.strip():
            head = _heading(item)
            if head is not None:
                shift = 1 if head[0] == "title" else 0
                break

    def add_pictures(element: Any, page: int) -> None:
        for rid, alt, external in _pictures(element):
            index = len(out.blocks)
            meta: dict[str, Any] = {"rid": rid, "alt": alt}
            image_id = None
            if external:
                meta["image_error"] = f"linked (external) picture {rid!r} not fetched"
            else:
                rel_part = part.related_parts.get(rid)
                if rel_part is None:
                    meta["image_error"] = f"picture relationship {rid!r} is missing"
                elif on_image is not None:
                    image_id, error = on_image(rel_part.blob, str(rel_part.partname), index, page)
                    if error:
                        meta["image_error"] = error
            out.add(BlockType.IMAGE, alt, page=page, image_id=image_id, **meta)

    for item in all_items:
        if isinstance(item, Table):
            out.add(BlockType.TABLE, _table_text(item), page=pages.page)
            add_pictures(item._tbl, pages.page)
            continue
        page, _ = pages.paragraph(item._p)
        style_name = (item.style.name if item.style is not None else "") or ""
        text = item.text
        if style_name.lower().startswith("toc"):
            continue
        head = _heading(item)
        if head is not None and text.strip():
            level = 1 if head[0] == "title" else head[1] + shift
            out.add(BlockType.TITLE, text, level=level, page=page, style=style_name)
        elif (depth := _list_depth(item)) is not None:
            out.add(BlockType.LIST_ITEM, text, page=page, depth=depth, style=style_name)
        else:
            out.add(BlockType.TEXT, text, page=page, style=style_name)
        add_pictures(item._p, page)
    return out
