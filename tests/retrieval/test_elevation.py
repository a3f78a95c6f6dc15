"""Elevation of child hits to parent blocks, the score boost, and the evidence budgets."""

from __future__ import annotations

import pytest

from corpus_pipeline.retrieval.elevation import ChildHit, Parent, elevate, parent_boost
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


SEED = SearchSettings(extra_hit_boost=0.12, multi_channel_boost=0.10)  # seed 003's boosts


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
def test_the_seeds_parent_boost_is_capped_at_46_percent(extra_hits, channels_hit, boost):
    assert parent_boost(extra_hits, channels_hit, SEED) == pytest.approx(boost)


def test_the_default_parent_boost_is_off():
    """Measured: the seed's boosts put parents with several middling hits over the one with
    the best hit (retrieval/settings.py); the default scores a parent by its best child."""
    assert parent_boost(3, 2, SearchSettings()) == 0.0


def test_children_of_one_parent_become_one_result_scored_best_child_times_the_boost():
    children = [
        child("c1", "P", 0.030, V),
        child("c2", "Q", 0.032, V),
        child("c3", "P", 0.020, K),
        child("c4", "P", 0.010, V),
    ]
    results = elevate(children, {"P": parent("P", 100), "Q": parent("Q", 100)}, SEED)
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
