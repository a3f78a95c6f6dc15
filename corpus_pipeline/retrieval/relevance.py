"""Relevance: one figure in [0, 1] per hit that a person can read and a threshold can use.

The fused RRF value (``Σ w / (k + rank)``, 0.0164 for a rank-1 hit of one channel) only
orders one query's hits; the channels' own figures say how well a hit matches:

    vector   found by the vector channel: cosine c, the query's baseline b
             relevance_v = clamp((c - b) / (vector_relevance_span × (1 - b)), 0, 1)
    keyword  found by the keyword channel: BM25 s
             relevance_k = s / (s + keyword_relevance_half)
    hit      relevance = the max over the channels that found it
    parent   relevance = the max over its hits

``b`` is the query's cosine similarity to the mean vector of the table (what the vector
gate uses): the similarity the query has to an arbitrary chunk of this KB. ``(c - b) /
(1 - b)`` is how far the hit is on the way from "any chunk" (0) to "the query's own text"
(1), which puts different models' cosines on one scale (multilingual-e5's unrelated chunks
score 0.75 to 0.8, all-MiniLM's 0.0 to 0.1: both come out near 0). Real answers get about a
third of the way, so ``vector_relevance_span`` (search setting, default 0.5) says which share
of the way reads as 1. Without a stored mean (tables older than SEARCH_TABLE_VERSION 3) b is 0.

BM25 has no absolute scale (it grows with the query's length and its terms' rarity), so a
keyword hit goes through a saturation: ``keyword_relevance_half`` (search setting, default
12) is the BM25 score that reads as 0.5. A score relative to the query's best would give
every query's top hit 1.0, however poor; the saturation gives the same BM25 the same
relevance in every query.

Measured on the bundled KBs (multilingual-e5-small; 30 questions, the channels' top 5):
chunks holding the answer read 0.5 to 0.9 by the vector (quartiles en 0.48 / 0.62 / 0.72,
zh 0.62 / 0.68 / 0.88), other chunks 0.4 to 0.65; the best chunk of unrelated questions
("banana bread recipe", "香蕉面包怎么做") 0.2 to 0.4, and the keyword channel finds nothing for
them. By BM25, answers read 0.45 to 0.7, others 0.3 to 0.6. So a ``score_threshold`` of 0.4
to 0.5 drops what is unrelated and keeps most answers.

Both figures are monotone in their channel's score and computed from the hit and the query
alone (the same query gives the same values). They never change the order: RRF orders the
hits and the parents; ``SearchFilters.score_threshold`` drops fused children whose
relevance is below it, before elevation.
"""

from __future__ import annotations

from collections.abc import Mapping

from corpus_pipeline.retrieval.fusion import KEYWORD, VECTOR, ChannelScore


def _clamp(x: float) -> float:
    return 0.0 if x != x or x < 0.0 else min(x, 1.0)  # NaN -> 0


def vector_relevance(cosine: float, baseline: float | None, span: float = 0.5) -> float:
    """``(cosine - baseline) / (span × (1 - baseline))``, clamped to [0, 1] (baseline None: 0)."""
    b = 0.0 if baseline is None or baseline >= 1.0 else max(baseline, -1.0)
    return _clamp((cosine - b) / (max(span, 1e-6) * (1.0 - b)))


def keyword_relevance(bm25: float, half: float) -> float:
    """``bm25 / (bm25 + half)``: 0.5 at ``half``, towards 1 above it; 0 for s ≤ 0."""
    if bm25 <= 0.0 or half <= 0.0:
        return 1.0 if bm25 > 0.0 else 0.0
    return _clamp(bm25 / (bm25 + half))


def relevance(
    channels: Mapping[str, ChannelScore], baseline: float | None, *, vector_span: float, keyword_half: float
) -> float:
    """A hit's relevance: the best of what each channel that found it says."""
    best = 0.0
    if VECTOR in channels:
        best = max(best, vector_relevance(channels[VECTOR].score, baseline, vector_span))
    if KEYWORD in channels:
        best = max(best, keyword_relevance(channels[KEYWORD].score, keyword_half))
    return best


__all__ = ["keyword_relevance", "relevance", "vector_relevance"]
