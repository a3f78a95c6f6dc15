"""Bad documents come back FAILED with a reason a person can act on; parsing never raises."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.parsing import discover
from parsing.builders import make_encrypted_pdf
from parsing.conftest import Parse


@pytest.mark.parametrize(
    ("name", "content", "error"),
    [
        ("empty.md", b"", "empty"),
        ("blank.txt", b"  \n\n ", "no text"),
        ("junk.md", os.urandom(4096) + b"\x00" * 16, "binary"),
        ("corrupt.pdf", b"%PDF-1.4\n1 0 obj garbage", "cannot open the PDF"),
        ("corrupt.docx", b"PK\x03\x04 not really a zip", "DOCX"),
        ("undecodable.txt", bytes(range(0x80, 0x100)) * 40, "cannot decode"),
    ],
)
def test_bad_documents_fail_with_a_reason(kb_dir: Path, parse: Parse, name: str, content: bytes, error: str) -> None:
    (kb_dir / name).write_bytes(content)
    parsed = parse(name)
    assert parsed.status == "FAILED"
    assert error in (parsed.error or "")
    assert parsed.blocks == () and parsed.text == ""


def test_encrypted_pdf_fails_clearly(kb_dir: Path, parse: Parse) -> None:
    make_encrypted_pdf(kb_dir / "secret.pdf")
    parsed = parse("secret.pdf")
    assert parsed.status == "FAILED" and "encrypted" in (parsed.error or "")


def test_a_huge_line_is_refused(kb_dir: Path, parse: Parse) -> None:
    (kb_dir / "oneline.txt").write_bytes(b"x" * 1_200_000)
    parsed = parse("oneline.txt")
    assert parsed.status == "FAILED" and "no line break" in (parsed.error or "")


def test_a_50_mb_file_is_refused_at_discovery_and_the_rest_is_kept(tmp_path: Path) -> None:
    kb = tmp_path / "kbs" / "big"
    kb.mkdir(parents=True)
    with (kb / "huge.txt").open("wb") as f:
        f.truncate(50 * 1024 * 1024)  # sparse: 50 MB with no line break, written in no time
    (kb / "ok.md").write_text("# fine\n", encoding="utf-8")
    found = {d.path: d.error for d in discover(resolve_kb(kb))}
    assert found["ok.md"] is None
    assert "over the limit max_file_mb = 20" in (found["huge.txt"] or "")


def test_a_format_without_a_parser_is_an_error_naming_it_never_another_parser(kb_dir: Path) -> None:
    from corpus_pipeline.models import Document
    from corpus_pipeline.parsing import parse_document
    from corpus_pipeline.parsing.registry import formats

    (kb_dir / "notes.rtf").write_bytes(b"{\\rtf1 hello}")
    doc = Document("kb", "d", "notes.rtf", "rtf", 13, "", "")
    parsed = parse_document(doc, kb_dir)
    assert parsed.status == "FAILED"
    assert parsed.error is not None and parsed.error.startswith("no parser for format 'rtf'; formats with a parser: ")
    assert formats() == ["docx", "html", "markdown", "pdf", "text"]
