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
