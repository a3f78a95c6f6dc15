"""The format table (``corpus_pipeline.doc_formats``): one row per format, and every reader
of formats (discovery, the parser registry, preview, recommend, search filters, the parse
state) reads it instead of a list of its own."""

from __future__ import annotations

import dataclasses
import io
import zipfile
from pathlib import Path

import pytest

from corpus_pipeline import doc_formats, preview
from corpus_pipeline.chunking import recommend
from corpus_pipeline.doc_formats import BY_NAME, EXTENSIONS, FORMATS, NAMES, sniff
from corpus_pipeline.indexing.parse import _reusable
from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.models import Document
from corpus_pipeline.parsing import PARSER_VERSION, registry
from corpus_pipeline.parsing.discovery import sniff_format
from corpus_pipeline.retrieval import filters


def test_the_rows_are_the_records_formats_and_each_has_a_parser():
    assert len(set(NAMES)) == len(NAMES) == len(FORMATS)  # (a format is its row: nothing else lists it)
    assert len(EXTENSIONS) == sum(len(f.extensions) for f in FORMATS)  # (no extension claimed twice)
    assert not set(doc_formats.ALIASES) & set(NAMES)
    for row in FORMATS:
        assert callable(row.parse_function()) and registry.parser_for(row.name) is row.parse_function()
        assert all(e.startswith(".") and e == e.lower() for e in row.extensions)


def test_every_reader_of_formats_reads_the_table():
    assert filters.FORMATS is NAMES and filters.EXTENSIONS is EXTENSIONS and filters.ALIASES is doc_formats.ALIASES
    assert preview._FORMATS is NAMES
    assert recommend.STRUCTURED_FORMATS is doc_formats.STRUCTURED
    assert registry.formats() == sorted(NAMES)
    assert sorted(filters.SearchFilters(format=["MD", "htm", "pdf"]).format or []) == ["html", "markdown", "pdf"]
    with pytest.raises(ValueError, match="allowed: markdown, text, html, docx, pdf"):
        filters.SearchFilters(format=["rtf"])
    assert PARSER_VERSION == "2|3"  # (markdown is "3" since issue 41: its documents re-parse, no others)


def _docx_bytes() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("word/document.xml", "<w:document/>")
    return buf.getvalue()


@pytest.mark.parametrize(
    ("name", "data", "want"),
    [
        ("report.txt", b"%PDF-1.7 ...", "pdf"),  # content beats any extension
        ("report.bin", b"%PDF-1.7 ...", "pdf"),
        ("letter.zip", None, "docx"),  # (a real DOCX zip)
        ("archive.docx", b"PK\x03\x04 not a zip", "docx"),  # a broken zip: its extension's (parsing says why)
        ("page.txt", b"  <!DOCTYPE html><html>", "html"),  # markup beats .txt
        ("page.unknown", b"<html><body>", "html"),  # and no extension
        ("notes.md", b"<html><body>", "markdown"),  # not .md
        ("notes.MDX", b"# title", "markdown"),
        ("data.xlsx", b"PK\x03\x04 whatever", None),
        ("photo.png", b"\x89PNG", None),
    ],
)
def test_a_format_is_decided_by_content_then_extension(tmp_path: Path, name: str, data: bytes | None, want: str | None):
    path = tmp_path / name
    path.write_bytes(_docx_bytes() if data is None else data)
    head = path.read_bytes()[:4096]
    assert sniff(path, head) == want
    assert sniff_format(path, head) == (want or None)


def test_bumping_one_formats_parser_version_reparses_that_format_only(tmp_path: Path, monkeypatch):
    (tmp_path / "kb").mkdir()
    kb = resolve_kb(tmp_path / "kb")
    docs = {fmt: Document("kb", f"id-{fmt}", f"a.{fmt}", fmt, 10, f"hash-{fmt}", "plan") for fmt in ("pdf", "markdown")}
    previous = {
        d.doc_id: {
            "content_hash": d.content_hash,
            "parser_version": BY_NAME[d.format].version,
            "path": d.path,
            "error": None,
        }
        for d in docs.values()
    }
    assert all(_reusable(kb, previous, d) is not None for d in docs.values())
    monkeypatch.setitem(BY_NAME, "pdf", dataclasses.replace(BY_NAME["pdf"], version="2.1"))
    assert _reusable(kb, previous, docs["pdf"]) is None
    assert _reusable(kb, previous, docs["markdown"]) is not None
