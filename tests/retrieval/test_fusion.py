"""Evidence gates and reciprocal rank fusion: exact numbers on literal inputs."""

from __future__ import annotations

import pytest

from corpus_pipeline.retrieval.fusion import (
    ChannelHit,
    ChannelScore,
    gate_keyword,
    gate_vector,
    rrf_fuse,
)


def _ids(hits):
    return [h.chunk_id for h in hits]


@pytest.mark.parametrize(
    ("scores", "kept"),
    [
        ([0.80, 0.45, 0.4499], ["c0", "c1"]),  # the threshold itself passes
        ([0.30, 0.20], []),
        ([], []),
    ],
)
def test_the_vector_gate_keeps_similarities_of_at_least_0_45(scores, kept):
    hits = [ChannelHit(f"c{i}", s) for i, s in enumerate(scores)]
    assert _ids(gate_vector(hits, 0.45)) == kept


@pytest.mark.parametrize(
    ("scores", "kept"),
    [
        ([10.0, 3.5, 3.49, 1.0], ["c0", "c1"]),  # 0.35 × 10 = 3.5
        ([2.0, 1.9], ["c0", "c1"]),
        ([0.0, 0.0], []),  # no positive best: nothing matched
        ([], []),
    ],
)
def test_the_keyword_gate_is_relative_to_the_best_keyword_score(scores, kept):
    hits = [ChannelHit(f"c{i}", s) for i, s in enumerate(scores)]
    assert _ids(gate_keyword(hits, 0.35)) == kept


def test_rrf_adds_one_over_k_plus_rank_for_each_channel_that_found_a_child():
    fused = rrf_fuse(
        {
            "vector": [ChannelHit("a", 0.9), ChannelHit("b", 0.8), ChannelHit("c", 0.7)],
            "keyword": [ChannelHit("b", 12.0), ChannelHit("d", 6.0)],
        },
        k=60,
        limit=10,
    )
    assert [(f.chunk_id, f.score) for f in fused] == [
        ("b", 1 / 62 + 1 / 61),
        ("a", 1 / 61),
        ("d", 1 / 62),
        ("c", 1 / 63),
    ]
    assert fused[0].channels == {"vector": ChannelScore(2, 0.8), "keyword": ChannelScore(1, 12.0)}


def test_rrf_keeps_the_best_limit_candidates_and_breaks_ties_by_rank_then_id():
    fused = rrf_fuse(
        {
            "vector": [ChannelHit("z", 0.9), ChannelHit("y", 0.8)],
            "keyword": [ChannelHit("x", 5.0), ChannelHit("w", 4.0)],
        },
        k=60,
        limit=3,
    )
    # z and x tie at 1/61 (both rank 1): the id decides; then y and w tie at 1/62.
    assert _ids(fused) == ["x", "z", "w"]


def test_a_child_named_twice_by_one_channel_counts_once_at_its_best_rank():
    fused = rrf_fuse({"keyword": [ChannelHit("a", 3.0), ChannelHit("a", 2.0)]}, k=60, limit=5)
    assert [(f.chunk_id, f.score) for f in fused] == [("a", 1 / 61)]


def test_the_relative_vector_gate_keeps_hits_above_the_querys_own_scale():
    hits = [ChannelHit("a", 0.90), ChannelHit("b", 0.86), ChannelHit("c", 0.80), ChannelHit("d", 0.76)]
    # e5-like scale: an arbitrary chunk scores 0.78 for this query
    assert [h.chunk_id for h in gate_vector(hits, 0.0, 0.0, baseline=0.78)] == ["a", "b", "c"]
    assert [h.chunk_id for h in gate_vector(hits, 0.0, 0.5, baseline=0.78)] == ["a", "b"]
    assert gate_vector(hits, 0.0, 0.0, baseline=0.95) == []  # nothing beats an arbitrary chunk
    assert [h.chunk_id for h in gate_vector(hits, 0.85, 0.0)] == ["a", "b"]  # the absolute floor, no baseline


def test_channel_weights_scale_their_rrf_contributions():
    v = [ChannelHit("a", 0.9)]
    k = [ChannelHit("b", 9.0)]
    even = rrf_fuse({"vector": v, "keyword": k}, k=60, limit=5)
    assert [f.chunk_id for f in even] == ["a", "b"]  # a tie, broken by chunk id
    weighted = rrf_fuse({"vector": v, "keyword": k}, k=60, limit=5, weights={"keyword": 2.0})
    assert [f.chunk_id for f in weighted] == ["b", "a"] and weighted[0].score == pytest.approx(2 / 61)
