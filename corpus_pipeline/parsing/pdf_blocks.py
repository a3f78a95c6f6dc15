"""PDF into blocks: text layout with pdfminer.six, images with pypdfium2, page by page.

``unstructured.partition_pdf`` is not used: it imports ``unstructured_inference`` (layout
models, onnx, opencv) even for ``strategy="fast"``, and fast mode is pdfminer underneath,
with no images and short lines guessed as titles. pdfminer is used directly instead:

* the document is opened with pypdfium2 first, so a corrupt file and a password-protected
  file fail fast with a clear error;
* text lines come from pdfminer's layout analysis in reading order; a line whose font is
  clearly larger than the body font (the most common size, by characters) is a heading,
  its level the rank of its size among the heading sizes (largest = 1); a short line set
  entirely in a bold face at body size is a heading one level below those;
* a line opening with a bullet or a number marker starts a LIST_ITEM; other lines of a
  text box make TEXT (wrapped lines joined: no space between CJK characters);
* bare page numbers in the top or bottom margin are dropped;
* images (pypdfium2 image objects, decoded pixels saved as PNG) are placed before the first
  text line that starts below the image's top edge on their page.
"""

from __future__ import annotations

import io
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corpus_pipeline.errors import DocumentError
from corpus_pipeline.kbconfig import ParsingConfig
from corpus_pipeline.models import BlockType
from corpus_pipeline.parsing.blocks import JoinedBlocks
from corpus_pipeline.parsing.limits import DEFAULT_LIMITS, check_pages

#: ``on_image(png_bytes, source_ref, block_index, page) -> (image_id or None, error or None)``
PdfImageHook = Callable[[bytes, str, int, int | None], tuple[str | None, str | None]]

_HEADING_RATIO = 1.15
_MAX_HEADING_CHARS = 150
_SENTENCE_END = tuple("。．.!?！？;；:：,，")
_LIST = re.compile(r"^\s*(?:[-*•·▪◦●○■□–]\s+|\d+(?:\.\d+)*[.)、]\s*|[a-zA-Z][.)]\s+|[（(]\d+[）)]\s*|[①-⑳]\s*)")
_PAGE_NUMBER = re.compile(r"^\s*(?:page\s*)?\d+(?:\s*(?:/|of)\s*\d+)?\s*$|^\s*第\s*\d+\s*页", re.I)
_CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")


@dataclass
class _Line:
    text: str
    top: float
    bottom: float
    size: float
    bold: bool
    box: int  # index of the pdfminer text box it came from
    x0: float = 0.0
    x1: float = 0.0
    mono: bool = False

    @property
    def height(self) -> float:
        return max(self.top - self.bottom, 1.0)


@dataclass
class _Page:
    number: int
    height: float
    lines: list[_Line] = field(default_factory=list)


def _open_check(path: Path) -> Any:
    import pypdfium2 as pdfium

    try:
        return pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as exc:
        message = str(exc)
        if "password" in message.lower():
            raise DocumentError(
                "the PDF is encrypted (password-protected); remove the password and save it again"
            ) from exc
        raise DocumentError(f"cannot open the PDF (corrupt or not a PDF): {message}") from exc


def _read_layout(path: Path) -> list[_Page]:
    from pdfminer.high_level import extract_pages
    from pdfminer.layout import LAParams, LTChar, LTTextBoxHorizontal, LTTextLineHorizontal
    from pdfminer.pdfdocument import PDFEncryptionError, PDFPasswordIncorrect
    from pdfminer.pdfparser import PDFSyntaxError

    pages: list[_Page] = []
    try:
        for number, layout in enumerate(extract_pages(str(path), laparams=LAParams()), start=1):
            page = _Page(number, float(layout.height))
            box_no = 0
            for element in layout:
                if not isinstance(element, LTTextBoxHorizontal):
                    continue
                box_no += 1
                for line in element:
                    if not isinstance(line, LTTextLineHorizontal):
                        continue
                    text = line.get_text().strip()
                    chars = [c for c in line if isinstance(c, LTChar) and c.get_text().strip()]
                    if not text or not chars:
                        continue
                    sizes = Counter(round(c.size * 2) / 2 for c in chars)
                    bold = all(re.search(r"bold|black|heavy|semibold", c.fontname, re.I) for c in chars)
                    mono = all(re.search(r"courier|mono|consol|menlo", c.fontname, re.I) for c in chars)
                    page.lines.append(
                        _Line(
                            text,
                            float(line.y1),
                            float(line.y0),
                            sizes.most_common(1)[0][0],
                            bold,
                            box_no,
                            float(line.x0),
                            float(line.x1),
                            mono,
                        )
                    )
            pages.append(page)
    except (PDFPasswordIncorrect, PDFEncryptionError) as exc:
        raise DocumentError("the PDF is encrypted (password-protected); remove the password and save it again") from exc
    except PDFSyntaxError as exc:
        raise DocumentError(f"cannot read the PDF's text (corrupt?): {exc}") from exc
    return pages


def _join(lines: list[str]) -> str:
    out = ""
    for line in lines:
        if not out:
            out = line
        elif _CJK.match(out[-1]) and _CJK.match(line[0]):
            out += line
        else:
            out += " " + line
    return out


class _Levels:
    def __init__(self, pages: list[_Page]) -> None:
        weights: Counter[float] = Counter()
        for page in pages:
            for line in page.lines:
                weights[line.size] += len(line.text)
        self.body = weights.most_common(1)[0][0] if weights else 0.0
        heading_sizes = sorted({s for s in weights if self.is_large(s)}, reverse=True)
        self.rank = {s: i + 1 for i, s in enumerate(heading_sizes)}
        self.bold_level = len(heading_sizes) + 1

    def is_large(self, size: float) -> bool:
        return self.body > 0 and size >= self.body * _HEADING_RATIO

    def level(self, line: _Line) -> int | None:
        text = line.text
        if len(text) > _MAX_HEADING_CHARS:
            return None
        if self.is_large(line.size):
            return min(self.rank[line.size], 6)
        if line.bold and len(text) <= 80 and not text.endswith(_SENTENCE_END) and not _LIST.match(text):
            return min(self.bold_level, 6)
        return None


def pdf_blocks(
    doc_id: str, path: Path, on_image: PdfImageHook | None = None, *, limits: ParsingConfig | None = None
) -> JoinedBlocks:
    """Blocks of a PDF in reading order, with 1-based page numbers; images to ``on_image``.
    A PDF with more pages than ``limits.max_pages`` is refused before its layout is read."""
    pdf = _open_check(path)
    try:
        check_pages(len(pdf), limits or DEFAULT_LIMITS)
        pages = _read_layout(path)
        levels = _Levels(pages)
        running = _running_lines(pages)
        out = JoinedBlocks(doc_id)
        for page in pages:
            images = _page_images(pdf, page.number - 1)
            _emit_page(out, page, levels, images, on_image, running)
        return out
    finally:
        pdf.close()


def _page_images(pdf: Any, index: int) -> list[tuple[float, bytes, str]]:
    """``(top, png bytes, ref)`` of the images on a page, top of the page first."""
    import pypdfium2.raw as pdfium_c

    found = []
    page = pdf[index]
    try:
        for n, obj in enumerate(page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE], max_depth=3)):
            try:
                _left, _bottom, _right, top = obj.get_bounds()
                pil = obj.get_bitmap(render=False).to_pil()
                buf = io.BytesIO()
                pil.save(buf, format="PNG")
            except Exception:  # noqa: BLE001 - an undecodable image must not lose the page's text
                continue
            found.append((float(top), buf.getvalue(), f"page {index + 1} image {n + 1}"))
    finally:
        page.close()
    found.sort(key=lambda t: -t[0])
    return found


def _running_lines(pages: list[_Page]) -> set[str]:
    """Texts (digits masked) of margin lines repeated on several pages: headers and footers."""
    seen: Counter[str] = Counter()
    for page in pages:
        margin = page.height * 0.08
        keys = {
            re.sub(r"\d+", "#", ln.text) for ln in page.lines if ln.bottom < margin or ln.top > page.height - margin
        }
        seen.update(keys)
    return {k for k, n in seen.items() if n >= 2} if len(pages) >= 2 else set()


def _same_row(a: _Line, b: _Line) -> bool:
    return abs(a.top - b.top) <= 2.0 or abs(a.bottom - b.bottom) <= 2.0


def _merge_bullets(lines: list[_Line]) -> list[_Line]:
    """A bullet drawn apart from its text (its own text box) joins the text on its row."""
    out: list[_Line] = []
    skip = set()
    for i, ln in enumerate(lines):
        if i in skip:
            continue
        if re.fullmatch(r"[-*•·▪◦●○■□–]|\d+[.)]", ln.text):
            j = next(
                (k for k in range(i + 1, min(i + 4, len(lines))) if _same_row(ln, lines[k]) and lines[k].x0 > ln.x0),
                None,
            )
            if j is not None:
                other = lines[j]
                skip.add(j)
                out.append(
                    _Line(
                        f"{ln.text} {other.text}",
                        other.top,
                        other.bottom,
                        other.size,
                        other.bold,
                        other.box,
                        ln.x0,
                        other.x1,
                    )
                )
                continue
        out.append(ln)
    return out


def _tables(lines: list[_Line]) -> list[tuple[set[int], str]]:
    """Table regions: runs of rows with two or more cells; ``(line indexes, "a | b" rows)``."""
    order = sorted(range(len(lines)), key=lambda i: (-lines[i].top, lines[i].x0))
    rows: list[list[int]] = []
    for i in order:
        if rows and _same_row(lines[rows[-1][0]], lines[i]):
            rows[-1].append(i)
        else:
            rows.append([i])
    found: list[tuple[set[int], str]] = []
    r = 0
    while r < len(rows):
        if len(rows[r]) < 2:
            r += 1
            continue
        columns = sorted(lines[i].x0 for i in rows[r])
        region = [rows[r]]
        k = r + 1
        while k < len(rows):
            row = rows[k]
            prev_bottom = min(lines[i].bottom for i in region[-1])
            gap = prev_bottom - max(lines[i].top for i in row)
            height = max(lines[i].height for i in row)
            aligned = all(any(abs(lines[i].x0 - c) <= 3.0 for c in columns) for i in row)
            if gap > 1.6 * height or (len(row) < 2 and not aligned):
                break
            if len(row) >= 2:
                columns = sorted(set(columns) | {lines[i].x0 for i in row})
            region.append(row)
            k += 1
        multi = [row for row in region if len(row) >= 2]
        first_col = [lines[row[0]].text for row in multi]
        if len(multi) >= 2 and sum(len(t) for t in first_col) / len(first_col) <= 30:
            found.append(_table_text(lines, region))
            r = k
        else:
            r += 1
    return found


def _table_text(lines: list[_Line], region: list[list[int]]) -> tuple[set[int], str]:
    table: list[list[str]] = []
    anchors: list[float] = []
    for row in region:
        cells = sorted(row, key=lambda i: lines[i].x0)
        if len(cells) >= 2 or not table:
            table.append([lines[i].text for i in cells])
            anchors = [lines[i].x0 for i in cells]
        else:  # a wrapped cell: append to the cell above it
            ln = lines[cells[0]]
            col = min(range(len(anchors)), key=lambda c: abs(anchors[c] - ln.x0))
            table[-1][col] = _join([table[-1][col], ln.text])
    return {i for row in region for i in row}, "\n".join(" | ".join(row) for row in table)


def _emit_page(
    out: JoinedBlocks,
    page: _Page,
    levels: _Levels,
    images: list[tuple[float, bytes, str]],
    on_image: PdfImageHook | None,
    running: set[str],
) -> None:
    margin = page.height * 0.08

    def is_margin_noise(ln: _Line) -> bool:
        in_margin = ln.bottom < margin or ln.top > page.height - margin
        return in_margin and (bool(_PAGE_NUMBER.match(ln.text)) or re.sub(r"\d+", "#", ln.text) in running)

    lines = _merge_bullets([ln for ln in page.lines if not is_margin_noise(ln)])
    table_at: dict[int, str] = {}
    in_table: set[int] = set()
    for members, text in _tables(lines):
        table_at[min(members)] = text
        in_table |= members
    pending = list(images)

    def place_images(before_top: float | None) -> None:
        while pending and (before_top is None or pending[0][0] > before_top + 1.0):
            _top, data, ref = pending.pop(0)
            index = len(out.blocks)
            image_id, error = on_image(data, ref, index, page.number) if on_image else (None, None)
            meta: dict[str, Any] = {"ref": ref}
            if error:
                meta["image_error"] = error
            out.add(BlockType.IMAGE, "", page=page.number, image_id=image_id, **meta)

    group: list[_Line] = []
    kind = BlockType.TEXT
    group_level: int | None = None

    def flush() -> None:
        nonlocal group
        if group:
            level = group_level if kind == BlockType.TITLE else None
            joined = "\n".join(g.text for g in group) if kind == BlockType.CODE else _join([g.text for g in group])
            out.add(kind, joined, level=level, page=page.number)
            group = []

    def continues(line: _Line) -> bool:
        """Does ``line`` continue the paragraph / list item / heading in ``group``?"""
        last = group[-1]
        gap = last.bottom - line.top
        return abs(last.size - line.size) <= 0.5 and -2.0 <= gap <= 0.8 * line.height and line.x0 >= group[0].x0 - 2.0

    for i, line in enumerate(lines):
        if i in in_table:
            if i in table_at:
                flush()
                place_images(line.top)
                out.add(BlockType.TABLE, table_at[i], page=page.number)
            continue
        if pending and pending[0][0] > line.top + 1.0:
            flush()
            place_images(line.top)
        if re.fullmatch(r"[-*•·▪◦●○■□–\s]+", line.text):
            continue  # bullets left without text (drawn apart from it)
        if line.mono:
            if not (group and kind == BlockType.CODE and line.top < group[-1].top):
                flush()
                kind = BlockType.CODE
            group.append(line)
            continue
        level = None if line.mono else levels.level(line)
        if level is not None:
            if group and kind == BlockType.TITLE and level == group_level and continues(line):
                group.append(line)  # a heading wrapped over two lines
                continue
            flush()
            kind, group, group_level = BlockType.TITLE, [line], level
            continue
        if _LIST.match(line.text):
            flush()
            kind, group = BlockType.LIST_ITEM, [line]
            continue
        if group and (kind in (BlockType.TITLE, BlockType.CODE) or not continues(line)):
            flush()
        if not group:
            kind = BlockType.TEXT
        group.append(line)
    flush()
    place_images(None)
