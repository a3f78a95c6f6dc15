"""The parsers, one per format, behind one registry and one signature.

    @parser(DocFormat.PDF)
    def parse_pdf(source: Source) -> ParsedDocument: ...

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

from corpus_pipeline.errors import DocumentError
from corpus_pipeline.kbconfig import ParsingConfig
from corpus_pipeline.models import DocFormat, Document, ParsedDocument
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
_PARSERS: dict[str, Parser] = {}


def parser(fmt: DocFormat | str) -> Callable[[Parser], Parser]:
    """Register the decorated function as the parser of ``fmt``."""
    key = DocFormat(fmt).value if isinstance(fmt, DocFormat) else str(fmt)

    def register(fn: Parser) -> Parser:
        if key in _PARSERS and _PARSERS[key] is not fn:
            raise ValueError(f"format {key!r} has two parsers: {_PARSERS[key].__name__} and {fn.__name__}")
        _PARSERS[key] = fn
        return fn

    return register


def formats() -> list[str]:
    _load()
    return sorted(_PARSERS)


def parser_for(fmt: str) -> Parser:
    _load()
    found = _PARSERS.get(fmt)
    if found is None:
        raise DocumentError(
            f"no parser for format {fmt!r}; formats with a parser: {', '.join(sorted(_PARSERS))}. "
            "Exclude the file in kb.yaml (exclude:) or convert it."
        )
    return found


def _load() -> None:
    from corpus_pipeline.parsing import formats as _  # noqa: F401 - registers the parsers
