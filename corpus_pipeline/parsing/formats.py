"""The parser of each format (named by the format's row, ``doc_formats.FORMATS``), and what each gives.

==========  ==========================================  ==============================
format      canonical text                              parser
==========  ==========================================  ==============================
markdown    the file's text less front matter           markdown-it-py (``markdown_blocks``)
text        the file's own decoded text                 line classifier (``text_blocks``)
HTML        blocks' texts joined by blank lines          unstructured (``html_blocks``)
DOCX        blocks' texts joined by blank lines          python-docx walk (``docx_blocks``)
PDF         blocks' texts joined by blank lines          pdfminer + pypdfium2 (``pdf_blocks``)
==========  ==========================================  ==============================
"""

from __future__ import annotations

import re
from collections.abc import Callable

from corpus_pipeline.errors import DocumentError
from corpus_pipeline.models import BlockType, DocStatus, ParsedDocument
from corpus_pipeline.parsing.blocks import JoinedBlocks
from corpus_pipeline.parsing.images import ImageCollector
from corpus_pipeline.parsing.registry import Source
from corpus_pipeline.parsing.textdecode import decode_text

#: A text document whose longest line is longer than this is not prose (minified data,
#: a dump with no line breaks): refused rather than fed to parsers and chunkers.
MAX_LINE_CHARS = 1_000_000


def check_lines(text: str) -> None:
    longest = max((len(m) for m in re.split(r"\r\n|\r|\n", text)), default=0) if len(text) > MAX_LINE_CHARS else 0
    if longest > MAX_LINE_CHARS:
        raise DocumentError(
            f"a line of {longest:,} characters with no line break (limit {MAX_LINE_CHARS:,}); "
            "this is not a prose document (minified or generated data?)"
        )


def ref_hook(images: ImageCollector) -> Callable[[str, str, int], tuple[str | None, str | None]]:
    """Markdown / HTML image references: read from disk (never fetched), stored, identified."""

    def on_image(src: str, alt: str, block_index: int) -> tuple[str | None, str | None]:
        data, reason = images.read_reference(src)
        if data is None:
            return None, reason
        image, reason = images.add(data, block_index=block_index, page_num=None, source_ref=src, name_hint=src)
        return (image.image_id if image else None), reason

    return on_image


def bytes_hook(images: ImageCollector) -> Callable[[bytes, str, int, int | None], tuple[str | None, str | None]]:
    """Images embedded in DOCX / PDF: stored, identified."""

    def on_image(data: bytes, ref: str, block_index: int, page: int | None) -> tuple[str | None, str | None]:
        image, reason = images.add(data, block_index=block_index, page_num=page, source_ref=ref, name_hint=ref)
        return (image.image_id if image else None), reason

    return on_image


def _text_source(source: Source) -> str:
    text = decode_text(source.path.read_bytes())
    if not text.strip():
        raise DocumentError("the file has no text (only whitespace)")
    check_lines(text)
    return text


def _joined(source: Source, built: JoinedBlocks) -> ParsedDocument:
    has_images = any(b.block_type == BlockType.IMAGE.value for b in built.blocks)
    if not built.text.strip() and not has_images:
        raise DocumentError("no text and no images found in the document (empty, or text only as vector outlines?)")
    return ParsedDocument(
        source.doc.doc_id,
        DocStatus.OK.value,
        text=built.text,
        blocks=tuple(built.blocks),
        images=source.images.finish(built.blocks),
    )


def parse_markdown(source: Source) -> ParsedDocument:
    """The canonical text is the file's text less its front matter, heading attributes and
    (``.mdx``) MDX markup; the front matter's title, description and tags are metadata."""
    from corpus_pipeline.parsing.markdown_blocks import markdown_blocks
    from corpus_pipeline.parsing.markdown_source import prepare_markdown

    mdx = source.path.suffix.lower() == ".mdx"
    prepared = prepare_markdown(_text_source(source), mdx=mdx)
    if not prepared.text.strip():
        raise DocumentError("the file has no text besides its front matter and markup")
    blocks = markdown_blocks(source.doc.doc_id, prepared.text, ref_hook(source.images), mdx=mdx)
    return ParsedDocument(
        source.doc.doc_id,
        DocStatus.OK.value,
        text=prepared.text,
        blocks=tuple(blocks),
        images=source.images.finish(blocks),
        title=prepared.metadata.get("title"),
        metadata={k: v for k, v in prepared.metadata.items() if k != "title"},
    )


def parse_text(source: Source) -> ParsedDocument:
    from corpus_pipeline.parsing.text_blocks import text_blocks

    text = _text_source(source)
    blocks = text_blocks(source.doc.doc_id, text)
    return ParsedDocument(
        source.doc.doc_id, DocStatus.OK.value, text=text, blocks=tuple(blocks), images=source.images.finish(blocks)
    )


def parse_html(source: Source) -> ParsedDocument:
    from corpus_pipeline.parsing.html_blocks import html_blocks

    markup = decode_text(source.path.read_bytes())
    check_lines(markup)
    return _joined(source, html_blocks(source.doc.doc_id, markup, ref_hook(source.images)))


def parse_docx(source: Source) -> ParsedDocument:
    from corpus_pipeline.parsing.docx_blocks import docx_blocks
    from corpus_pipeline.parsing.limits import check_zip

    check_zip(source.path, source.limits)  # before python-docx decompresses anything
    return _joined(source, docx_blocks(source.doc.doc_id, source.path, bytes_hook(source.images)))


def parse_pdf(source: Source) -> ParsedDocument:
    from corpus_pipeline.parsing.pdf_blocks import pdf_blocks

    built = pdf_blocks(source.doc.doc_id, source.path, bytes_hook(source.images), limits=source.limits)
    return _joined(source, built)
