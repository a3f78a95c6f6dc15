"""Parsing one document into its canonical text and ordered blocks.

Markdown and plain text: the canonical text is the file's own decoded text, so offsets
point into the real file. HTML, DOCX and PDF: the canonical text is the blocks' text
joined in reading order by blank lines, and each block's offsets point into that.
A document that cannot be read comes back with ``status=FAILED`` and the reason; it
never raises, so one bad file never stops a KB.
"""

from __future__ import annotations

import re
from pathlib import Path

from corpus_pipeline.errors import DocumentError
from corpus_pipeline.models import Block, BlockType, DocFormat, DocStatus, Document, ParsedDocument
from corpus_pipeline.parsing.textdecode import decode_text

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_LIST = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)[^)]*\)")


class BlockBuilder:
    """Collects blocks whose text is joined into a canonical text with blank lines."""

    def __init__(self, doc_id: str) -> None:
        self.doc_id = doc_id
        self.parts: list[str] = []
        self.blocks: list[Block] = []
        self.pos = 0
        self.heads: list[tuple[int, str]] = []

    def add(self, kind: BlockType, text: str, *, level: int | None = None, page: int | None = None, **meta: object) -> None:
        text = text.strip()
        if not text and kind != BlockType.IMAGE:
            return
        if self.parts:
            self.parts.append("\n\n")
            self.pos += 2
        if kind == BlockType.TITLE and level:
            self.heads = [h for h in self.heads if h[0] < level] + [(level, text)]
        start = self.pos
        self.parts.append(text)
        self.pos += len(text)
        self.blocks.append(
            Block(
                doc_id=self.doc_id,
                block_index=len(self.blocks),
                block_type=kind.value,
                text=text,
                start_offset=start,
                end_offset=self.pos,
                level=level,
                page_num=page,
                section_path=" > ".join(h[1] for h in self.heads),
                metadata=dict(meta),
            )
        )

    def result(self) -> ParsedDocument:
        text = "".join(self.parts)
        if not text.strip():
            return ParsedDocument(self.doc_id, DocStatus.FAILED.value, error="no text found in the document")
        return ParsedDocument(self.doc_id, DocStatus.OK.value, text=text, blocks=tuple(self.blocks))


def _markdown_blocks(doc_id: str, text: str, is_markdown: bool) -> list[Block]:
    """Blocks of a markdown or text file, with offsets into the file's own text."""
    blocks: list[Block] = []
    heads: list[tuple[int, str]] = []
    lines = text.splitlines(keepends=True)
    pos = 0
    i = 0
    para_start = -1
    para_end = -1
    para_kind = BlockType.TEXT

    def emit(kind: BlockType, start: int, end: int, level: int | None = None, **meta: object) -> None:
        seg = text[start:end]
        s = start + (len(seg) - len(seg.lstrip()))
        e = end - (len(seg) - len(seg.rstrip()))
        if e <= s:
            return
        blocks.append(
            Block(doc_id, len(blocks), kind.value, text[s:e], s, e, level=level,
                  section_path=" > ".join(h[1] for h in heads), metadata=dict(meta))
        )

    def flush() -> None:
        nonlocal para_start
        if para_start >= 0:
            emit(para_kind, para_start, para_end)
            para_start = -1

    while i < len(lines):
        line = lines[i]
        start, end = pos, pos + len(line)
        stripped = line.strip()
        fence = _FENCE.match(line) if is_markdown else None
        if fence:
            flush()
            marker = fence.group(1)
            j, p = i + 1, end
            while j < len(lines) and not lines[j].strip().startswith(marker[0] * len(marker)):
                p += len(lines[j])
                j += 1
            close_end = p + (len(lines[j]) if j < len(lines) else 0)
            emit(BlockType.CODE, start, close_end)
            pos = close_end
            i = j + 1
            continue
        head = _HEADING.match(line.rstrip("\r\n")) if is_markdown else None
        if head:
            flush()
            level = len(head.group(1))
            title = head.group(2).strip()
            heads = [h for h in heads if h[0] < level] + [(level, title)]
            emit(BlockType.TITLE, start, end, level=level)
        elif not stripped:
            flush()
        elif is_markdown and _IMAGE.fullmatch(stripped):
            flush()
            emit(BlockType.IMAGE, start, end, src=_IMAGE.fullmatch(stripped).group(1))
        else:
            kind = BlockType.TEXT
            if is_markdown and _LIST.match(line):
                kind = BlockType.LIST_ITEM
            elif is_markdown and stripped.startswith("|"):
                kind = BlockType.TABLE
            if para_start >= 0 and (kind != para_kind or kind == BlockType.LIST_ITEM):
                flush()
            if para_start < 0:
                para_start, para_kind = start, kind
            para_end = end
        pos = end
        i += 1
    flush()
    return blocks


def _parse_html(doc: Document, path: Path) -> ParsedDocument:
    from bs4 import BeautifulSoup

    raw = path.read_bytes()
    soup = BeautifulSoup(raw, "lxml")
    b = BlockBuilder(doc.doc_id)
    body = soup.body or soup
    for el in body.find_all(["h1", "h2", "h3", "h4", "h5", "h6", "p", "li", "pre", "table", "img"]):
        if el.find_parent(["pre", "table"]) is not None or (el.name == "p" and el.find_parent("li")):
            continue
        name = el.name
        if name[0] == "h" and name[1:].isdigit():
            b.add(BlockType.TITLE, el.get_text(" ", strip=True), level=int(name[1:]))
        elif name == "li":
            b.add(BlockType.LIST_ITEM, el.get_text(" ", strip=True))
        elif name == "pre":
            b.add(BlockType.CODE, el.get_text())
        elif name == "table":
            rows = [" | ".join(c.get_text(" ", strip=True) for c in tr.find_all(["td", "th"])) for tr in el.find_all("tr")]
            b.add(BlockType.TABLE, "\n".join(rows))
        elif name == "img":
            b.add(BlockType.IMAGE, el.get("alt") or "", src=el.get("src") or "")
        else:
            b.add(BlockType.TEXT, el.get_text(" ", strip=True))
    return b.result()


def _parse_docx(doc: Document, path: Path) -> ParsedDocument:
    import docx

    d = docx.Document(str(path))
    b = BlockBuilder(doc.doc_id)
    for para in d.paragraphs:
        style = (para.style.name if para.style is not None else "") or ""
        if style.startswith("Heading") and style[7:].strip().isdigit():
            b.add(BlockType.TITLE, para.text, level=int(style[7:]))
        elif style == "Title":
            b.add(BlockType.TITLE, para.text, level=1)
        elif style.startswith("List"):
            b.add(BlockType.LIST_ITEM, para.text)
        else:
            b.add(BlockType.TEXT, para.text)
    for table in d.tables:
        rows = [" | ".join(c.text.strip() for c in row.cells) for row in table.rows]
        b.add(BlockType.TABLE, "\n".join(rows))
    return b.result()


def _parse_pdf(doc: Document, path: Path) -> ParsedDocument:
    import pypdfium2 as pdfium

    try:
        pdf = pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as exc:
        raise DocumentError(f"cannot open PDF: {exc}") from exc
    b = BlockBuilder(doc.doc_id)
    try:
        for i in range(len(pdf)):
            page = pdf[i]
            text = page.get_textpage().get_text_range().replace("\r\n", "\n")
            for para in re.split(r"\n\s*\n", text):
                b.add(BlockType.TEXT, para, page=i + 1)
    finally:
        pdf.close()
    return b.result()


def parse_document(doc: Document, kb_dir: Path) -> ParsedDocument:
    """Parse one document; failures come back as ``status=FAILED`` with the error."""
    path = kb_dir / doc.path
    try:
        fmt = DocFormat(doc.format)
        if fmt in (DocFormat.MARKDOWN, DocFormat.TEXT):
            text = decode_text(path.read_bytes())
            blocks = _markdown_blocks(doc.doc_id, text, fmt == DocFormat.MARKDOWN)
            if not text.strip():
                return ParsedDocument(doc.doc_id, DocStatus.FAILED.value, error="the file is empty")
            return ParsedDocument(doc.doc_id, DocStatus.OK.value, text=text, blocks=tuple(blocks))
        if fmt == DocFormat.HTML:
            return _parse_html(doc, path)
        if fmt == DocFormat.DOCX:
            return _parse_docx(doc, path)
        return _parse_pdf(doc, path)
    except DocumentError as exc:
        return ParsedDocument(doc.doc_id, DocStatus.FAILED.value, error=str(exc))
    except Exception as exc:  # one bad document must never stop the KB
        return ParsedDocument(doc.doc_id, DocStatus.FAILED.value, error=f"{type(exc).__name__}: {exc}")
