"""Parsing one document into its canonical text, ordered blocks and images.

``parse_document`` finds the document's parser in the registry (``registry``; the parsers
are in ``formats``) and runs it. Every block satisfies ``text[b.start_offset:b.end_offset]
== b.text``. Images are identified and, when ``images_dir`` is given, stored
content-addressed there.

A document that cannot be read comes back with ``status=FAILED`` and a reason a person can
act on (corrupt, encrypted, empty, binary, undecodable, too large, a giant line, a format
with no parser); this function never raises, so one bad file never stops a KB.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path, PurePosixPath

from upath import UPath

from corpus_pipeline.errors import DocumentError
from corpus_pipeline.kbconfig import ParsingConfig
from corpus_pipeline.models import BlockType, DocStatus, Document, ParsedDocument
from corpus_pipeline.parsing.images import ImageCollector
from corpus_pipeline.parsing.limits import DEFAULT_LIMITS
from corpus_pipeline.parsing.registry import Source, parser_for

#: Parsing refuses files larger than this even if discovery let them through.
MAX_PARSE_BYTES = 512 * 1024 * 1024


def document_title(parsed: ParsedDocument, path: str) -> str:
    """A document's title: as its metadata names it (front matter ``title``), else its first
    heading, else its file name (not its path)."""
    if parsed.title and parsed.title.strip():
        return " ".join(parsed.title.split())
    for block in parsed.blocks:
        if block.block_type == BlockType.TITLE.value and block.text.strip():
            return block.section_path or " ".join(block.text.split())  # (the first: its own path)
    return PurePosixPath(path).name


def _failed(doc: Document, error: str) -> ParsedDocument:
    return ParsedDocument(doc.doc_id, DocStatus.FAILED.value, error=error)


def parse_document(
    doc: Document, kb_dir: Path, *, images_dir: UPath | Path | None = None, limits: ParsingConfig | None = None
) -> ParsedDocument:
    """Parse one document; failures come back as ``status=FAILED`` with the error.

    ``images_dir``: where image bytes are stored (``Layout.images``); None means images are
    identified and hashed but not written (``ExtractedImage.path == ""``). ``limits``: the
    KB's ``parsing:`` bounds (defaults when None); the sizes are checked here, memory and
    time only when this runs in a worker (``worker.parse_many``), which calls this function.
    """
    path = kb_dir / doc.path
    try:
        parse = parser_for(doc.format)
        size = path.stat().st_size
        if size == 0:
            return _failed(doc, "the file is empty (0 bytes)")
        if size > MAX_PARSE_BYTES:
            return _failed(doc, f"the file is {size / 1048576:.0f} MB, over the parser's limit")
        images = ImageCollector(doc.doc_id, images_dir, kb_dir, path)
        parsed = parse(Source(doc, path, images, limits or DEFAULT_LIMITS))
        return dataclasses.replace(parsed, title=document_title(parsed, doc.path))
    except DocumentError as exc:
        return _failed(doc, str(exc))
    except MemoryError:
        return _failed(doc, "out of memory while parsing the document")
    except Exception as exc:  # noqa: BLE001 - one bad document must never stop the KB
        return _failed(doc, f"could not parse {doc.format}: {type(exc).__name__}: {exc}")
