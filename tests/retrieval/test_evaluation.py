"""Character-level recall, precision and IoU of returned spans; questions files."""

from __future__ import annotations

import json

import pytest

from corpus_pipeline.errors import ConfigError
from corpus_pipeline.retrieval.evaluation import (
    Question,
    Reference,
    Span,
    anchor_references,
    load_questions,
    merge_spans,
    span_scores,
)


def test_overlapping_spans_merge_into_their_union():
    assert merge_spans([(50, 150), (0, 100), (200, 210), (210, 220), (5, 5)]) == [(0, 150), (200, 220)]


def test_scores_count_characters_once_per_document():
    s = span_scores(
        [Span("a.md", 0, 100), Span("a.md", 50, 150)],  # 150 returned chars (overlap counted once)
        [Span("a.md", 100, 200)],
    )
    assert (s.returned_chars, s.reference_chars, s.overlap_chars) == (150, 100, 50)
    assert (s.recall, s.precision, s.iou) == (0.5, 50 / 150, 50 / 200)


def test_the_same_offsets_in_another_document_do_not_count():
    s = span_scores([Span("b.md", 0, 100)], [Span("a.md", 0, 100)])
    assert (s.recall, s.precision, s.iou) == (0.0, 0.0, 0.0)


def test_a_span_exactly_equal_to_the_reference_scores_one():
    s = span_scores([Span("a.md", 10, 20)], [Span("a.md", 10, 20)])
    assert (s.recall, s.precision, s.iou) == (1.0, 1.0, 1.0)


def test_nothing_returned_scores_zero_without_dividing_by_zero():
    s = span_scores([], [Span("a.md", 0, 10)])
    assert (s.recall, s.precision, s.iou) == (0.0, 0.0, 0.0)


def test_several_references_are_scored_together():
    s = span_scores([Span("a.md", 0, 50), Span("b.md", 0, 50)], [Span("a.md", 0, 10), Span("b.md", 40, 60)])
    assert (s.overlap_chars, s.reference_chars, s.returned_chars) == (20, 30, 100)
    assert s.recall == pytest.approx(20 / 30) and s.iou == pytest.approx(20 / 110)


def test_questions_load_from_jsonl(tmp_path):
    f = tmp_path / "q.jsonl"
    f.write_text(
        json.dumps(
            {
                "id": "q1",
                "question": "port?",
                "references": [{"doc_path": "a.md", "start": 3, "end": 9, "text": "port 8"}],
            }
        )
        + "\n\n"
        + json.dumps({"question": "retention?", "references": [{"doc_path": "b.md", "start": 0, "end": 4}]})
        + "\n",
        encoding="utf-8",
    )
    assert load_questions(f) == [
        Question("q1", "port?", (Reference("a.md", 3, 9, "port 8"),)),
        Question("q3", "retention?", (Reference("b.md", 0, 4, None),)),
    ]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", r"q.jsonl:1: not valid JSON"),
        ('{"question": 3, "references": []}', r"q.jsonl:1: needs a string 'question'"),
        ('{"question": "x"}', r"q.jsonl:1: needs 'references'"),
        (
            '{"question": "x", "references": [{"doc_path": "a", "start": 5, "end": 5}]}',
            r"references\[0\] = .*0 <= start < end",
        ),
    ],
)
def test_a_bad_questions_line_is_refused_with_its_line_number(tmp_path, line, message):
    f = tmp_path / "q.jsonl"
    f.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_questions(f)


def test_an_empty_question_is_skipped_with_a_note_and_the_rest_kept(tmp_path):
    f = tmp_path / "q.jsonl"
    f.write_text(
        '{"id": "blank", "question": " ", "references": [{"doc_path": "a.md", "start": 0, "end": 3}]}\n'
        '{"id": "ok", "question": "port?", "references": [{"doc_path": "a.md", "start": 0, "end": 3}]}\n',
        encoding="utf-8",
    )
    kept, notes = anchor_references(load_questions(f), {"a.md": "abcdef"})
    assert [q.id for q in kept] == ["ok"] and notes == ["blank: the question is empty; skipped"]


def test_references_are_checked_and_drifted_ones_re_anchored():
    texts = {"a.md": "intro. The port is 8443. Bye.", "b.md": "x x"}
    qs = [
        Question("ok", "?", (Reference("a.md", 7, 24, "The port is 8443."),)),
        Question("moved", "?", (Reference("a.md", 0, 17, "The port is 8443."),)),
        Question("twice", "?", (Reference("b.md", 0, 1, "y"),)),
        Question("nodoc", "?", (Reference("c.md", 0, 1),)),
    ]
    kept, notes = anchor_references(qs, texts)
    assert [(q.id, q.references[0].start, q.references[0].end) for q in kept] == [("ok", 7, 24), ("moved", 7, 24)]
    assert notes == [
        "moved: a.md [0:17] drifted; re-anchored at [7:24]",
        "twice: b.md [0:1] does not hold its text, which is not found; skipped",
        "twice: no usable reference; question skipped",
        "nodoc: c.md is not a parsed document of this KB; reference skipped",
        "nodoc: no usable reference; question skipped",
    ]
