"""Evidence gates and reciprocal rank fusion over the channels' child hits (pure functions).

    vector  top k ──gate: above the query's baseline, relative to its best hit ─┐
                                                                              ├─ RRF (k, weights) ─> candidates
    keyword top k ──gate: score ≥ floor × best keyword score of the query ─────┘

A gate only drops hits; the survivors keep the rank they had in their channel (both
channels return hits best first, so the survivors are a prefix and the ranks are 1..n).
A child found by both channels gets both contributions: Σ w / (k + rank).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

VECTOR = "vector"
KEYWORD = "keyword"
CHANNELS = (VECTOR, KEYWORD)


@dataclass(frozen=True)
class ChannelHit:
    """One child returned by one channel: its raw score there (cosine similarity, BM25)."""

    chunk_id: str
    score: float


@dataclass(frozen=True)
class ChannelScore:
    rank: int
    score: float


@dataclass(frozen=True)
class FusedHit:
    """One child after fusion: its RRF score and what each channel said about it."""

    chunk_id: str
    score: float
    channels: Mapping[str, ChannelScore] = field(default_factory=dict)


def gate_vector(
    hits: Sequence[ChannelHit], min_similarity: float, relative_floor: float = 0.0, baseline: float | None = None
) -> list[ChannelHit]:
    """Drop vector hits below ``min_similarity`` (absolute), or, with a ``baseline`` (the
    query's similarity to an arbitrary chunk of the table), below the relative floor:
    ``similarity - baseline < relative_floor × (best - baseline)``. Hits no better than the
    baseline are dropped whatever the floor: they are what any chunk scores."""
    kept = [h for h in hits if h.score >= min_similarity]
    if baseline is None or not kept:
        return kept
    best = max(h.score for h in kept)
    if best <= baseline:
        return []
    bar = baseline + relative_floor * (best - baseline)
    return [h for h in kept if h.score > baseline and h.score >= bar]


def gate_keyword(hits: Sequence[ChannelHit], relative_floor: float) -> list[ChannelHit]:
    """Drop keyword hits scoring below ``relative_floor`` × the best keyword score.

    BM25 scores have no absolute scale (they grow with query length and rare terms), so
    the gate is relative to the query's best hit; a non-positive best keeps nothing.
    """
    if not hits:
        return []
    best = max(h.score for h in hits)
    if best <= 0:
        return []
    return [h for h in hits if h.score >= relative_floor * best]


def rrf_fuse(
    channels: Mapping[str, Sequence[ChannelHit]], *, k: int, limit: int, weights: Mapping[str, float] | None = None
) -> list[FusedHit]:
    """Reciprocal rank fusion: ``Σ w / (k + rank)`` over the channels a child appears in
    (``w`` the channel's weight, 1 by default).

    Each channel's hits are best first (rank 1 = first). Ties are broken by the best rank
    in any channel, then by chunk id, so the order is deterministic.
    """
    scores: dict[str, float] = {}
    seen: dict[str, dict[str, ChannelScore]] = {}
    for name, hits in channels.items():
        for rank, hit in enumerate(hits, start=1):
            per = seen.setdefault(hit.chunk_id, {})
            if name in per:  # a channel naming a child twice counts its best rank once
                continue
            per[name] = ChannelScore(rank, hit.score)
            w = 1.0 if weights is None else weights.get(name, 1.0)
            scores[hit.chunk_id] = scores.get(hit.chunk_id, 0.0) + w / (k + rank)
    order = sorted(scores, key=lambda cid: (-scores[cid], min(c.rank for c in seen[cid].values()), cid))
    return [FusedHit(cid, scores[cid], dict(seen[cid])) for cid in order[:limit]]
