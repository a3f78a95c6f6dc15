"""The document formats: one row each, read by discovery, parsing, preview, recommend and
search filters.

    format    extensions              aliases  structured  the content says so (sniffing)      parser
    markdown  .md .markdown .mdx      md       yes         -                                   parse_markdown
    text      .txt .text              txt      no          -                                   parse_text
    html      .html .htm              htm      yes         <!doctype html / <html (as .txt/?)  parse_html
    docx      .docx                   -        yes         a zip with word/document.xml        parse_docx
    pdf       .pdf                    -        yes         %PDF                                parse_pdf

A format is decided by content first, by extension second: a row's ``signature`` claims a
file whatever its extension (``beats`` None) or only over the formats it names (HTML markup
in a ``.txt`` or an unknown extension), so a PDF named ``.txt`` is read as a PDF. ``structured``
formats carry their own headings and sections (the recommender leans on them). ``parser``
names the function (``module:function``, imported when first used) and ``version`` its
output's version: bumping it re-parses the documents of that format only.

Adding a format: its row here, its parser function (in ``parsing/formats.py`` or a module of
its own that the row names) and its test; discovery, preview, recommend, the
filters and the parse state read the row (``tests/parsing/test_format_table.py``).
"""

from __future__ import annotations

import importlib
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

Signature = Callable[[Path, bytes], bool]


def _pdf(_path: Path, head: bytes) -> bool:
    return head.startswith(b"%PDF")


def _docx(path: Path, head: bytes) -> bool:
    if not head.startswith(b"PK\x03\x04"):
        return False
    try:
        with zipfile.ZipFile(path) as zf:
            return "word/document.xml" in zf.namelist()
    except (zipfile.BadZipFile, OSError):
        return False


def _html(_path: Path, head: bytes) -> bool:
    if head.startswith(b"PK\x03\x04"):
        return False  # (a zip is never markup)
    return head[:512].lstrip().lower().startswith((b"<!doctype html", b"<html"))


@dataclass(frozen=True)
class DocumentFormat:
    """One format: how a file is recognised, what it is called, what parses it."""

    name: str
    extensions: tuple[str, ...]
    parser: str
    version: str
    aliases: tuple[str, ...] = ()
    structured: bool = False
    signature: Signature | None = None
    #: The formats (by extension; None: no known extension) its signature overrides; None: all.
    beats: tuple[str | None, ...] | None = None

    def parse_function(self) -> Callable[[Any], Any]:
        module, _, fn = self.parser.partition(":")
        found: Callable[[Any], Any] = getattr(importlib.import_module(module), fn)
        return found


_P = "corpus_pipeline.parsing.formats"
FORMATS: tuple[DocumentFormat, ...] = (
    DocumentFormat("markdown", (".md", ".markdown", ".mdx"), f"{_P}:parse_markdown", "3", ("md",), True),
    DocumentFormat("text", (".txt", ".text"), f"{_P}:parse_text", "2", ("txt",)),
    DocumentFormat("html", (".html", ".htm"), f"{_P}:parse_html", "2", ("htm",), True, _html, ("text", None)),
    DocumentFormat("docx", (".docx",), f"{_P}:parse_docx", "2", (), True, _docx),
    DocumentFormat("pdf", (".pdf",), f"{_P}:parse_pdf", "2", (), True, _pdf),
)
BY_NAME: dict[str, DocumentFormat] = {f.name: f for f in FORMATS}
#: Every extension (lower case, with its dot) and the format it gives.
EXTENSIONS: dict[str, str] = {ext: f.name for f in FORMATS for ext in f.extensions}
#: Other names a person may use for a format (filters, ``--format``).
ALIASES: dict[str, str] = {a: f.name for f in FORMATS for a in f.aliases}
NAMES: tuple[str, ...] = tuple(f.name for f in FORMATS)
STRUCTURED: frozenset[str] = frozenset(f.name for f in FORMATS if f.structured)


def format_named(name: str) -> DocumentFormat | None:
    """The format called ``name`` or one of its aliases (any case); None for others."""
    key = name.strip().lower()
    return BY_NAME.get(ALIASES.get(key, key))


def by_extension(path: str | Path) -> str | None:
    """The format a path's extension gives (None: not a document's extension)."""
    return EXTENSIONS.get(Path(path).suffix.lower())


def sniff(path: Path, head: bytes) -> str | None:
    """The format of the file at ``path`` whose first bytes are ``head``: a row whose
    signature claims it (over the extension's, where the row says so), else its extension's;
    None for a file that is no document."""
    by_ext = by_extension(path)
    for f in FORMATS:
        if f.signature is not None and (f.beats is None or by_ext in f.beats) and f.signature(path, head):
            return f.name
    return by_ext


@cache
def parser_version() -> str:
    """Every parser's version at once (what a KB's parse fingerprint holds): "2" while they
    are all "2"; a bumped one changes it, and then only its format's documents re-parse."""
    return "|".join(sorted({f.version for f in FORMATS}))


def version_of(name: str) -> str | None:
    """The version of the parser of format ``name`` (None: no such format)."""
    f = BY_NAME.get(name)
    return f.version if f is not None else None
