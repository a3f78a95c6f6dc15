"""Fixtures for parsing tests: a KB folder and a helper that parses one file in it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from corpus_pipeline.models import Document, ParsedDocument
from corpus_pipeline.parsing import parse_document
from corpus_pipeline.parsing.discovery import doc_id_for, sniff_format

Parse = Callable[[str], ParsedDocument]


def assert_offsets_exact(parsed: ParsedDocument) -> None:
    """The invariant every parser keeps: each block is its span of the canonical text."""
    for b in parsed.blocks:
        assert parsed.text[b.start_offset : b.end_offset] == b.text, (b.block_index, b.block_type, b.text)
    assert [b.block_index for b in parsed.blocks] == list(range(len(parsed.blocks)))
    starts = [b.start_offset for b in parsed.blocks if b.block_type != "IMAGE"]
    assert starts == sorted(starts)


@pytest.fixture
def kb_dir(tmp_path: Path) -> Path:
    d = tmp_path / "kb"
    d.mkdir()
    return d


@pytest.fixture
def images_dir(tmp_path: Path) -> Path:
    return tmp_path / "warehouse" / "images"


@pytest.fixture
def parse(kb_dir: Path, images_dir: Path) -> Parse:
    """Parse ``kb_dir/<rel>`` as discovery would see it, storing images under ``images_dir``."""

    def run(rel: str) -> ParsedDocument:
        path = kb_dir / rel
        fmt = sniff_format(path, path.read_bytes()[:4096])
        assert fmt is not None, rel
        doc = Document("kb", doc_id_for("kb", rel), rel, fmt, path.stat().st_size, "", "")
        parsed = parse_document(doc, kb_dir, images_dir=images_dir)
        if parsed.status == "OK":
            assert_offsets_exact(parsed)
        return parsed

    return run
