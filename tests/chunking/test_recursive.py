"""RECURSIVE: coarsest boundary first, sizes held with the overlap, overlap from a sentence start."""

from __future__ import annotations

import pytest

from chunking.helpers import split, texts
from corpus_pipeline.chunking.recursive import RecursiveConfig
from corpus_pipeline.errors import ConfigError


def test_a_text_within_the_size_is_one_chunk() -> None:
    assert texts(split("RECURSIVE", "  Short text.\n\nTwo paragraphs.  ")) == ["Short text.\n\nTwo paragraphs."]


def test_paragraphs_are_merged_up_to_the_size_and_the_overlap_starts_at_a_sentence() -> None:
    doc = (
        "Alpha one is here. Alpha two is here.\n\nBeta para is short.\n\n"
        "Gamma sentence number one. Gamma sentence number two. Gamma sentence three is longer than the others."
    )
    pieces = split("RECURSIVE", doc, max_chars=100, overlap_chars=30)
    assert texts(pieces) == [
        "Alpha one is here. Alpha two is here.\n\nBeta para is short.",
        "Beta para is short.\n\nGamma sentence number one. Gamma sentence number two.",
        "Gamma sentence number two. Gamma sentence three is longer than the others.",
    ]
    assert [p.overlap_chars for p in pieces] == [0, 21, 27]


def test_chinese_without_blank_lines_is_cut_at_sentence_ends() -> None:
    doc = "第一句话在这里。第二句话也在这里。第三句话比较长一些，需要更多的字。第四句。" * 4
    pieces = split("RECURSIVE", doc, max_chars=100, overlap_chars=0)
    assert len(pieces) == 2
    assert all(p.text.endswith("。") for p in pieces)
    assert all(len(p.text) <= 100 for p in pieces)


def test_chinese_without_punctuation_is_cut_at_fixed_positions_and_flagged() -> None:
    doc = "没有标点的长中文文本" * 25
    pieces = split("RECURSIVE", doc, max_chars=100, overlap_chars=20)
    assert [len(p.text) for p in pieces] == [100, 100, 90]
    assert [p.overlap_chars for p in pieces] == [0, 20, 20]
    assert [p.metadata.get("hard_cut", False) for p in pieces] == [True, True, False]


def test_a_heading_stays_with_the_sentences_after_it() -> None:
    doc = "## Title\n\n" + "This is a sentence of words. " * 6
    assert texts(split("RECURSIVE", doc, max_chars=100, overlap_chars=0)) == [
        "## Title\n\nThis is a sentence of words. This is a sentence of words. This is a sentence of words.",
        "This is a sentence of words. This is a sentence of words. This is a sentence of words.",
    ]


def test_line_breaks_that_end_sentences_are_preferred_over_other_line_breaks() -> None:
    doc = "Line one ends here.\nline two continues\nline three.\n" * 3
    assert texts(split("RECURSIVE", doc, max_chars=100, overlap_chars=0)) == [
        "Line one ends here.\nline two continues\nline three.\nLine one ends here.",
        "line two continues\nline three.\nLine one ends here.\nline two continues\nline three.",
    ]


def test_sizes_in_tokens_keep_every_chunk_under_the_model_limit() -> None:
    doc = "中文句子需要按照词元计算长度。" * 80
    pieces = split("RECURSIVE", doc, size_unit="tokens", max_tokens=64, overlap_tokens=8)
    from chunking.helpers import COUNTER

    assert max(COUNTER.count(p.text) for p in pieces) <= 64
    assert len(pieces) > 10


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"max_chars": 50}, r"max_chars = 50 is out of range: allowed 100\.\.8000"),
        ({"max_chars": 9000}, r"max_chars = 9000 is out of range: allowed 100\.\.8000"),
        ({"overlap_chars": 500}, r"overlap_chars = 500 is more than half of max_chars = 800; allowed 0\.\.400"),
        ({"overlap_tokens": 200}, r"overlap_tokens = 200 is more than half of max_tokens = 240; allowed 0\.\.120"),
        ({"size_unit": "words"}, r"size_unit = 'words' is not allowed; choose one of 'chars', 'tokens'"),
        ({"max_chars": "800"}, r"max_chars = '800' is not a number"),
    ],
)
def test_invalid_settings_are_refused_naming_key_value_and_range(settings: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        RecursiveConfig(**settings)
