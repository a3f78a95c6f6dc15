"""Parsing one document into its canonical text, ordered blocks and images.

==========  ==========================================  ==============================
format      canonical text                              parser
==========  ==========================================  ==============================
markdown    the file's own decoded text                 markdown-it-py (``markdown_blocks``)
text        the file's own decoded text                 line classifier (``text_blocks``)
HTML        blocks' texts joined by blank lines          unstructured (``html_blocks``)
DOCX        blocks' texts joined by blank lines          python-docx walk (``docx_blocks``)
PDF         blocks' texts joined by blank lines          pdfminer + pypdfium2 (``pdf_blocks``)
==========  ==========================================  ==============================

Every block satisfies ``text[b.start_offset:b.end_offset] == b.text``. Images are
identified and, when ``images_dir`` is given, stored content-addressed there.

A document that cannot be read comes back with ``status=FAILED`` and a reason a person can
act on (corrupt, encrypted, empty, binary, undecodable, too large, a giant line); this
function never raises, so one bad file never stops a KB.
"""

from __future__ import annotations

import re
from pathlib import Path

from corpus_pipeline.errors import DocumentError
from corpus_pipeline.models import BlockType, DocFormat, DocStatus, Document, ParsedDocument
from corpus_pipeline.parsing.blocks import JoinedBlocks
from corpus_pipeline.parsing.images import ImageCollector
from corpus_pipeline.parsing.textdecode import decode_text

#: A text document whose longest line is longer than this is not prose (minified data,
#: a dump with no line breaks): refused rather than fed to parsers and chunkers.
MAX_LINE_CHARS = 1_000_000
#: Parsing refuses files larger than this even if discovery let them through.
MAX_PARSE_BYTES = 512 * 1024 * 1024


def _failed(doc: Document, error: str) -> ParsedDocument:
    return ParsedDocument(doc.doc_id, DocStatus.FAILED.value, error=error)


def _check_lines(text: str) -> None:
    longest = max((len(m) for m in re.split(r"\r\n|\r|\n", text)), default=0) if len(text) > MAX_LINE_CHARS else 0
    if longest > MAX_LINE_CHARS:
        raise DocumentError(
            f"a line of {longest:,} characters with no line break (limit {MAX_LINE_CHARS:,}); "
            "this is not a prose document (minified or generated data?)"
        )


def _ref_hook(images: ImageCollector):  # type: ignore[no-untyped-def]
    def on_image(src: str, alt: str, block_index: int) -> tuple[str | None, str | None]:
        data, reason = images.read_reference(src)
        if data is None:
            return None, reason
        image, reason = images.add(data, block_index=block_index, page_num=None, source_ref=src, name_hint=src)
        return (image.image_id if image else None), reason

    return on_image


def _bytes_hook(images: ImageCollector):  # type: ignore[no-untyped-def]
    def on_image(data: bytes, ref: str, block_index: int, page: int | None) -> tuple[str | None, str | None]:
        image, reason = images.add(data, block_index=block_index, page_num=page, source_ref=ref, name_hint=ref)
        return (image.image_id if image else None), reason

    return on_image


def _joined_result(doc: Document, built: JoinedBlocks, images: ImageCollector) -> ParsedDocument:
    text = built.text
    has_images = any(b.block_type == BlockType.IMAGE.value for b in built.blocks)
    if not text.strip() and not has_images:
        return _failed(doc, "no text and no images found in the document (empty, or text only as vector outlines?)")
    return ParsedDocument(
        doc.doc_id, DocStatus.OK.value, text=text, blocks=tuple(built.blocks), images=images.finish(built.blocks)
    )


def parse_document(doc: Document, kb_dir: Path, *, images_dir: Path | None = None) -> ParsedDocument:
    """Parse one document; failures come back as ``status=FAILED`` with the error.

    ``images_dir``: where image bytes are stored (``Layout.from_env().images``); None means
    images are identified and hashed but not written (``ExtractedImage.path == ""``).
    """
    path = kb_dir / doc.path
    try:
        fmt = DocFormat(doc.format)
        size = path.stat().st_size
        if size == 0:
            return _failed(doc, "the file is empty (0 bytes)")
        if size > MAX_PARSE_BYTES:
            return _failed(doc, f"the file is {size / 1048576:.0f} MB, over the parser's limit")
        images = ImageCollector(doc.doc_id, images_dir, kb_dir, path)
        if fmt in (DocFormat.MARKDOWN, DocFormat.TEXT):
            text = decode_text(path.read_bytes())
            if not text.strip():
                return _failed(doc, "the file has no text (only whitespace)")
            _check_lines(text)
            if fmt == DocFormat.MARKDOWN:
                from corpus_pipeline.parsing.markdown_blocks import markdown_blocks

                blocks = markdown_blocks(doc.doc_id, text, _ref_hook(images))
            else:
                from corpus_pipeline.parsing.text_blocks import text_blocks

                blocks = text_blocks(doc.doc_id, text)
            return ParsedDocument(
                doc.doc_id, DocStatus.OK.value, text=text, blocks=tuple(blocks), images=images.finish(blocks)
            )
        if fmt == DocFormat.HTML:
            markup = decode_text(path.read_bytes())
            _check_lines(markup)
            from corpus_pipeline.parsing.html_blocks import html_blocks

            return _joined_result(doc, html_blocks(doc.doc_id, markup, _ref_hook(images)), images)
        if fmt == DocFormat.DOCX:
            from corpus_pipeline.parsing.docx_blocks import docx_blocks

            return _joined_result(doc, docx_blocks(doc.doc_id, path, _bytes_hook(images)), images)
        from corpus_pipeline.parsing.pdf_blocks import pdf_blocks

        return _joined_result(doc, pdf_blocks(doc.doc_id, path, _bytes_hook(images)), images)
    except DocumentError as exc:
        return _failed(doc, str(exc))
    except MemoryError:
        return _failed(doc, "out of memory while parsing the document")
    except Exception as exc:  # one bad document must never stop the KB
        return _failed(doc, f"could not parse {doc.format}: {type(exc).__name__}: {exc}")
