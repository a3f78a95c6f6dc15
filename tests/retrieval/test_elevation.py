"""Elevation of child hits to parent blocks, the score boost, and the evidence budgets."""

from __future__ import annotations

import pytest

from corpus_pipeline.retrieval.elevation import (
    ChildHit,
    Parent,
    apply_budgets,
    elevate,
    evidence_window,
    format_evidence,
    parent_boost,
)
from corpus_pipeline.retrieval.fusion import ChannelScore
from corpus_pipeline.retrieval.settings import SearchSettings

V = {"vector": ChannelScore(1, 0.7)}
K = {"keyword": ChannelScore(1, 9.0)}
VK = {**V, **K}


def child(
    cid: str, parent: str, score: float, channels=V, start: int = 0, end: int = 10, doc: str = "a.md"
) -> ChildHit:
    return ChildHit(cid, parent, score, channels, f"text of {cid}", doc, "S", start, end)


def parent(pid: str, length: int, start: int = 0, doc: str = "a.md", overlap: int = 0) -> Parent:
    return Parent(pid, "x" * length, doc, "S", start, start + length - overlap, overlap)


@pytest.mark.parametrize(
    ("extra_hits", "channels_hit", "boost"),
    [
        (0, 1, 0.0),
        (1, 1, 0.12),
        (2, 2, 0.34),  # 0.12 × 2 + 0.10
        (3, 2, 0.46),  # the seed's maximum: 0.36 + 0.10
        (7, 2, 0.46),  # extra hits beyond 3 add nothing
    ],
)
def test_the_parent_boost_is_capped_at_46_percent(extra_hits, channels_hit, boost):
    assert parent_boost(extra_hits, channels_hit, SearchSettings()) == pytest.approx(boost)


def test_children_of_one_parent_become_one_result_scored_best_child_times_the_boost():
    children = [
        child("c1", "P", 0.030, V),
        child("c2", "Q", 0.032, V),
        child("c3", "P", 0.020, K),
        child("c4", "P", 0.010, V),
    ]
    results = elevate(children, {"P": parent("P", 100), "Q": parent("Q", 100)}, SearchSettings())
    assert [r.parent_id for r in results] == ["P", "Q"]
    p, q = results
    assert p.score == pytest.approx(0.030 * (1 + 0.12 * 2 + 0.10))
    assert p.best_child_score == 0.030 and [h.chunk_id for h in p.hits] == ["c1", "c3", "c4"]
    assert p.channels == ["vector", "keyword"]
    assert q.score == pytest.approx(0.032) and q.boost == 0.0


def test_only_the_best_final_top_k_parents_are_kept():
    children = [child(f"c{i}", f"P{i}", 0.05 - i * 0.001) for i in range(8)]
    parents = {f"P{i}": parent(f"P{i}", 10) for i in range(8)}
    results = elevate(children, parents, SearchSettings())
    assert [r.parent_id for r in results] == ["P0", "P1", "P2", "P3", "P4"]


def test_a_child_whose_parent_is_missing_is_its_own_evidence():
    [r] = elevate([child("c1", "gone", 0.02, start=40, end=50)], {}, SearchSettings())
    assert (r.text, r.start_offset, r.end_offset, r.parent_found) == ("text of c1", 40, 50, False)


@pytest.mark.parametrize(
    ("text_len", "hits", "max_chars", "window"),
    [
        (1000, [(10, 20)], 2200, (0, 1000)),  # fits whole
        (3000, [(2500, 2600)], 2200, (800, 3000)),  # centred on the hit, clamped at the end
        (3000, [(100, 200)], 2200, (0, 2200)),  # clamped at the start
        (3000, [(1400, 1500)], 1000, (950, 1950)),  # centred: 1400 - (1000 - 100) // 2
        (3000, [(2000, 2100), (0, 100)], 1000, (2000, 3000)),  # hits too far apart: the best one
    ],
)
def test_a_parent_cut_to_budget_keeps_the_window_around_its_hits(text_len, hits, max_chars, window):
    assert evidence_window(text_len, hits, max_chars) == window


def test_budgets_cap_each_parent_at_2200_and_all_at_5200_chars():
    children = [
        child("c1", "A", 0.05, start=2400, end=2450),
        child("c2", "B", 0.04, start=10_010, end=10_020, doc="b.md"),
        child("c3", "C", 0.03, start=20_000, end=20_010, doc="c.md"),
        child("c4", "D", 0.02, start=30_000, end=30_010, doc="d.md"),
    ]
    parents = {
        "A": parent("A", 2500),
        "B": parent("B", 2000, start=10_000, doc="b.md"),
        "C": parent("C", 1500, start=20_000, doc="c.md"),
        "D": parent("D", 900, start=30_000, doc="d.md"),
    }
    ev = apply_budgets(elevate(children, parents, SearchSettings()), SearchSettings())
    assert [(r.parent_id, len(r.text), r.truncated) for r in ev.results] == [
        ("A", 2200, True),
        ("B", 2000, False),
        ("C", 1000, True),  # what is left of 5200
    ]
    assert ev.chars == 5200 and ev.dropped_by_budget == ("D",)
    a, _, c = ev.results
    assert (a.start_offset, a.end_offset) == (300, 2500)  # the window holds the hit at 2400..2450
    assert (c.start_offset, c.end_offset) == (20_000, 21_000)


def test_the_span_of_a_cut_parent_skips_its_overlap_prefix():
    # 100 chars of overlap context, then the parent's own span 500..1400.
    p = Parent("P", "o" * 100 + "x" * 900, "a.md", "", 500, 1400, 100)
    [r] = elevate([child("c", "P", 0.1, start=1300, end=1350)], {"P": p}, SearchSettings())
    ev = apply_budgets([r], SearchSettings(parent_evidence_max_chars=300))
    [cut] = ev.results
    assert (cut.start_offset, cut.end_offset, len(cut.text)) == (1100, 1400, 300)


def test_evidence_is_formatted_with_the_first_140_chars_of_each_hit():
    c = ChildHit("c1", "P", 0.1, V, "y" * 200, "a.md", "Intro", 0, 200)
    [r] = elevate([c], {"P": Parent("P", "parent text", "a.md", "Intro", 0, 11)}, SearchSettings())
    assert format_evidence([r], SearchSettings()) == (
        "[1] a.md — Intro\nparent text\n\nMatched child passages:\nchild#1: " + "y" * 140
    )
