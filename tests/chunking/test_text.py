"""Sentence, paragraph and line boundaries in Chinese and English text."""

from __future__ import annotations

import pytest

from corpus_pipeline.chunking import text as tx


def sentences(s: str) -> list[str]:
    return [s[a:b] for a, b in tx.sentences(s)]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("Pi is 3.14. Next one! And? Yes.", ["Pi is 3.14.", "Next one!", "And?", "Yes."]),
        ("See https://x.org/a.html. Then go.", ["See https://x.org/a.html.", "Then go."]),
        ("Use e.g. this. Dr. Who came. J. Smith left.", ["Use e.g. this.", "Dr. Who came.", "J. Smith left."]),
        ("In the U.S. Army. Fine.", ["In the U.S. Army.", "Fine."]),
        ("Open a.b/c.md now; then stop.", ["Open a.b/c.md now;", "then stop."]),
        ("1. Install the tool.\n2. Run it.", ["1. Install the tool.", "2. Run it."]),
        ("Wait... what (really.) ok", ["Wait...", "what (really.)", "ok"]),
        ("他说：“你好。”然后走了！真的吗？是的；好", ["他说：“你好。”", "然后走了！", "真的吗？", "是的；", "好"]),
        ("版本 2.0 发布了。性能提升 30%。", ["版本 2.0 发布了。", "性能提升 30%。"]),
        ("「引用。」之后", ["「引用。」", "之后"]),
        ("", []),
        ("   ", []),
    ],
)
def test_sentences_split_chinese_and_english(source: str, expected: list[str]) -> None:
    assert sentences(source) == expected


def test_sentence_spans_are_offsets_into_the_source() -> None:
    source = "  First one.  Second one。\n第三句！"
    for a, b in tx.sentences(source):
        assert source[a:b] == source[a:b].strip() and source[a:b]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("a\n\nb", ["a", "b"]),
        ("a\n  \n\n b \n", ["a", "b"]),
        ("a\nb", ["a\nb"]),
    ],
)
def test_paragraphs_are_separated_by_blank_lines(source: str, expected: list[str]) -> None:
    assert [source[a:b] for a, b in tx.paragraphs(source)] == expected


def test_windowed_helpers_find_boundaries_inside_the_window() -> None:
    s = "One two. Three four. Five."
    assert tx.last_sentence_end(s, 0, 20, len(s)) == 20
    assert tx.first_sentence_start(s, 5, len(s)) == 9
    assert tx.first_sentence_start(s, 21, len(s)) == -1
