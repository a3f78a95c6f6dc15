"""Retrieval settings: every number of seed 003 §6-7, as one frozen, validated object.

    setting                          default  what it does
    vector_top_k                     8        children the vector channel returns
    keyword_top_k                    8        children the keyword (full-text) channel returns
    min_vector_similarity            0.45     vector gate: cosine similarity below it is dropped
    keyword_relative_score_floor     0.35     keyword gate: BM25 below floor × the best score is dropped
    rrf_k                            60       reciprocal rank fusion constant: 1 / (k + rank)
    candidate_top_k                  10       fused children kept for elevation
    final_top_k                      5        parent blocks returned
    extra_hit_boost                  0.12     parent boost per extra child hit ...
    max_extra_hits                   3        ... counting at most this many (0.12 × 3 = 0.36)
    multi_channel_boost              0.10     parent boost when its hits came through both channels
    parent_evidence_max_chars        2200     evidence text of one parent, at most
    total_evidence_max_chars         5200     evidence text of all parents together, at most
    hit_preview_chars                140      characters of each child hit shown with its parent
    max_unknown_token_share          0.25     vector channel abstains when more of the query's
                                              tokens are unknown ([UNK]) to the embedding model

All but the last come from seed 003. The last is ours: an English-only model (the default
all-MiniLM-L6-v2) reads a Chinese query as a row of [UNK]s, and its vector then "matches"
every mostly-[UNK] chunk with similarity ~0.5, above the 0.45 gate; RRF would rank that
noise level with the keyword channel's real matches.

parent score = best child score × (1 + extra_hit_boost × min(extra hits, max_extra_hits)
+ multi_channel_boost × multi-channel weight): at most +46 % with the defaults.

``kb.yaml`` holds the same keys under ``search:`` (validated by ``kbconfig.SearchConfig``);
they do not change a KB's ``strategy_version``: the same index serves any setting.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from corpus_pipeline.errors import ConfigError

# (minimum, maximum) of every setting; kbconfig.SearchConfig states the same bounds.
BOUNDS: dict[str, tuple[float, float]] = {
    "vector_top_k": (0, 1000),
    "keyword_top_k": (0, 1000),
    "min_vector_similarity": (-1.0, 1.0),
    "keyword_relative_score_floor": (0.0, 1.0),
    "rrf_k": (0, 10_000),
    "candidate_top_k": (1, 1000),
    "final_top_k": (1, 1000),
    "extra_hit_boost": (0.0, 10.0),
    "max_extra_hits": (0, 100),
    "multi_channel_boost": (0.0, 10.0),
    "parent_evidence_max_chars": (1, 10_000_000),
    "total_evidence_max_chars": (1, 100_000_000),
    "hit_preview_chars": (0, 100_000),
    "max_unknown_token_share": (0.0, 1.0),
}


@dataclass(frozen=True, kw_only=True)
class SearchSettings:
    """The knobs of hybrid search with parent elevation (seed 003 defaults)."""

    vector_top_k: int = 8
    keyword_top_k: int = 8
    min_vector_similarity: float = 0.45
    keyword_relative_score_floor: float = 0.35
    rrf_k: int = 60
    candidate_top_k: int = 10
    final_top_k: int = 5
    extra_hit_boost: float = 0.12
    max_extra_hits: int = 3
    multi_channel_boost: float = 0.10
    parent_evidence_max_chars: int = 2200
    total_evidence_max_chars: int = 5200
    hit_preview_chars: int = 140
    max_unknown_token_share: float = 0.25

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            lo, hi = BOUNDS[f.name]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"search.{f.name} = {value!r}: must be a number between {lo} and {hi}.")
            if f.type in ("int", int) and not isinstance(value, int):
                raise ConfigError(f"search.{f.name} = {value!r}: must be a whole number between {lo} and {hi}.")
            if not lo <= value <= hi:
                raise ConfigError(f"search.{f.name} = {value!r} is out of range: allowed {lo}..{hi}.")
        if self.vector_top_k == 0 and self.keyword_top_k == 0:
            raise ConfigError(
                "search.vector_top_k and search.keyword_top_k are both 0: at least one channel must return hits."
            )

    @classmethod
    def from_mapping(cls, values: Any) -> SearchSettings:
        """From ``kbconfig.SearchConfig`` (or any mapping / object with the same keys)."""
        if values is None:
            return cls()
        if hasattr(values, "model_dump"):
            values = values.model_dump()
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"unknown search setting(s) {', '.join(unknown)}; allowed: {', '.join(sorted(known))}.")
        return cls(**dict(values))

    def with_(self, **changes: Any) -> SearchSettings:
        """A copy with some settings changed (``None`` values are ignored)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
