"""The parsers, one per format (named by its row of ``doc_formats.FORMATS``), one signature.

    def parse_pdf(source: Source) -> ParsedDocument: ...   (parsing/formats.py)

    parser_for("pdf")        the function; an unknown format is a DocumentError naming it
                             and the formats there are parsers for

Every parser takes a ``Source`` (the document, its file, the image collector) and returns a
``ParsedDocument`` whose blocks satisfy ``text[b.start_offset:b.end_offset] == b.text``. It
may raise ``DocumentError`` with a reason a person can act on; ``parse_document`` turns
that (and any other failure) into a FAILED document.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from corpus_pipeline.doc_formats import BY_NAME
from corpus_pipeline.errors import DocumentError
from corpus_pipeline.kbconfig import ParsingConfig
from corpus_pipeline.models import Document, ParsedDocument
from corpus_pipeline.parsing.images import ImageCollector
from corpus_pipeline.parsing.limits import DEFAULT_LIMITS


@dataclass(frozen=True)
class Source:
    """What a parser reads: the document's record, its file, where its images go, and the
    bounds it is parsed under (``parsing:``; the sizes a parser can check itself)."""

    doc: Document
    path: Path
    images: ImageCollector
    limits: ParsingConfig = DEFAULT_LIMITS


Parser = Callable[[Source], ParsedDocument]


def formats() -> list[str]:
    """The formats there is a parser for."""
    return sorted(BY_NAME)


def parser_for(fmt: str) -> Parser:
    """The parser of ``fmt``, from its row (``DocumentError`` naming the known formats)."""
    row = BY_NAME.get(fmt)
    if row is None:
        raise DocumentError(
            f"no parser for format {fmt!r}; formats with a parser: {', '.join(formats())}. "
            "Exclude the file in kb.yaml (exclude:) or convert it."
        )
    found: Parser = row.parse_function()
    return found
