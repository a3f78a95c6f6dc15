"""SLIDING_WINDOW: paragraph-aware packing, forced split over 1.5x, fixed windows, min size."""

from __future__ import annotations

import pytest

from chunking.helpers import split, texts
from corpus_pipeline.chunking.sliding_window import SlidingWindowConfig
from corpus_pipeline.errors import ConfigError

ALPHABET = " ".join(c * 4 for c in "abcdefghijklmnopqrstuvwxyz") + " "


def test_fixed_mode_makes_windows_of_the_size_stepping_size_minus_overlap_at_word_ends() -> None:
    pieces = split("SLIDING_WINDOW", ALPHABET * 2, chunk_size=100, chunk_overlap=20, paragraph_aware=False)
    assert texts(pieces) == [
        "aaaa bbbb cccc dddd eeee ffff gggg hhhh iiii jjjj kkkk llll mmmm nnnn oooo pppp qqqq rrrr ssss tttt",
        "qqqq rrrr ssss tttt uuuu vvvv wwww xxxx yyyy zzzz aaaa bbbb cccc dddd eeee ffff gggg hhhh iiii jjjj",
        "gggg hhhh iiii jjjj kkkk llll mmmm nnnn oooo pppp qqqq rrrr ssss tttt uuuu vvvv wwww xxxx yyyy zzzz",
    ]
    assert [p.overlap_chars for p in pieces] == [0, 20, 20]
    assert all(p.metadata.get("forced_split") for p in pieces)


def test_paragraphs_are_packed_and_a_paragraph_over_one_and_a_half_sizes_is_force_split() -> None:
    doc = "\n\n".join(["A" * 30 + ".", "B" * 40 + ".", "C" * 170 + ".", "D" * 20 + "."])
    pieces = split("SLIDING_WINDOW", doc, chunk_size=100, chunk_overlap=0, min_chunk_size=0)
    assert [(p.text[0], len(p.text), bool(p.metadata.get("forced_split"))) for p in pieces] == [
        ("A", 74, False),
        ("C", 100, True),
        ("C", 94, True),
    ]


def test_a_paragraph_up_to_one_and_a_half_sizes_is_kept_whole() -> None:
    doc = "\n\n".join(["A" * 30 + ".", "B" * 40 + ".", "C" * 140 + ".", "D" * 20 + "."])
    pieces = split("SLIDING_WINDOW", doc, chunk_size=100, chunk_overlap=0, min_chunk_size=30)
    assert [(p.text[0], len(p.text)) for p in pieces] == [("A", 74), ("C", 141), ("D", 21)]


def test_small_chunks_are_merged_never_dropped() -> None:
    doc = "Tiny.\n\n" + "Long sentence here. " * 5 + "\n\nEnd."
    pieces = split("SLIDING_WINDOW", doc, chunk_size=100, chunk_overlap=0, min_chunk_size=40)
    assert texts(pieces) == [doc.strip()]
    assert pieces[0].metadata["merged_small"] is True


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"chunk_size": 99},
            r"chunk_size = 99 is out of range for size_unit = 'chars': allowed 100\.\.8000 characters",
        ),
        ({"chunk_size": 8001}, r"allowed 100\.\.8000 characters"),
        (
            {"chunk_size": 200, "chunk_overlap": 101},
            r"chunk_overlap = 101 is more than half of chunk_size = 200; allowed 0\.\.100",
        ),
        ({"chunk_size": 200, "min_chunk_size": 300}, r"min_chunk_size = 300 is larger than chunk_size = 200"),
        ({"size_unit": "tokens", "chunk_size": 10}, r"chunk_size = 10 is out of range: allowed 16\.\.8192"),
        ({"paragraph_aware": "yes"}, r"paragraph_aware = 'yes' must be true or false"),
    ],
)
def test_invalid_settings_are_refused(settings: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SlidingWindowConfig(**settings)
