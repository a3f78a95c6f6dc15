"""Token counting with the model's tokenizer: segmented encoding equals whole-text encoding."""

from __future__ import annotations

from pathlib import Path

import pytest

from chunking.helpers import COUNTER
from corpus_pipeline.chunking.sizes import SizeMeter
from corpus_pipeline.embedding.tokens import token_counter_for

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpora" / "markdown-5mb"


def _whole(text: str) -> list[int]:
    return [s for s, _ in COUNTER._tok.encode(text, add_special_tokens=False).offsets]  # type: ignore[attr-defined]


def test_token_starts_of_a_long_text_match_one_encoding_of_the_whole_text() -> None:
    text = ("English words, Chinese 中文字符 and code_like.identifiers(x) here.\n" * 200) + "tail"
    assert COUNTER.token_starts(text) == _whole(text)
    assert len(COUNTER.token_starts(text)) == COUNTER.count(text)


@pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus not present")
def test_token_starts_match_on_real_documents() -> None:
    files = sorted(CORPUS.rglob("*.md"))[::40]
    for f in files:
        text = f.read_text(encoding="utf-8")
        assert COUNTER.token_starts(text) == _whole(text), f


def test_a_meter_measures_spans_the_way_the_model_counts_them() -> None:
    """WordPiece (MiniLM): counts add up at word boundaries, so the meter's span counts are
    the counts of the span texts (SentencePiece models are checked on the chunks themselves:
    test_preview_equals_index)."""
    wordpiece = token_counter_for("all-MiniLM-L6-v2")
    text = "The model counts 中文 tokens. Another sentence follows here."
    m = SizeMeter(text, "tokens", wordpiece)
    cut = text.index("Another")
    assert m.measure(0, cut) + m.measure(cut, len(text)) == wordpiece.count(text)
    assert m.measure(0, cut) == wordpiece.count(text[:cut])
    assert m.advance(0, len(text), 3) == text.index("中")  # "The model counts" is 3 tokens
