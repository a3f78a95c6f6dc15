"""The ``quality:`` section of ``kb.yaml``: thresholds of the data-quality checks.

Every key is optional; unset bounds are derived from the KB's plan and embedding model
(``corpus_pipeline.quality.bounds``). Quality settings never change the
``strategy_version``: they judge chunks, they do not shape them.

    quality:
      token_limit: 254            # default: the model's max_seq_length - 2; never above it
      token_slack: 2              # tokens a size_unit=tokens chunk may exceed its bound by
      child:
        max_chars: 800            # default: the child pipeline's bound (if it is in chars)
        max_tokens: null          # default: the child pipeline's bound (if it is in tokens)
        min_chars: 40             # default: the plan's minimum, else a tenth of the bound
        small_share: 0.1          # share of chunks allowed under the minimum
        char_count: {p5: [20, null], p50: [100, 800], p95: [null, 800]}
        token_count: {p95: [null, 254]}
      parent: {max_chars: 2200}
      embedding: {dimension: 384} # default: read from the model folder
      severity:                   # per check: error (blocks activation) or warn (reports)
        child_quantiles: error
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from corpus_pipeline.quality.checks import names as check_names

_MAX_SIZE = 1_000_000


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Range = tuple[float | None, float | None]


class QuantileRanges(_Strict):
    """Allowed ``[min, max]`` of a quantile; ``null`` leaves that side open."""

    p5: Range | None = None
    p50: Range | None = None
    p95: Range | None = None

    @field_validator("p5", "p50", "p95")
    @classmethod
    def _ordered(cls, v: Range | None) -> Range | None:
        if v is None:
            return v
        lo, hi = v
        for x in (lo, hi):
            if x is not None and not 0 <= x <= _MAX_SIZE:
                raise ValueError(f"bound {x:g} is out of range: allowed 0..{_MAX_SIZE}")
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"min {lo:g} is larger than max {hi:g}; write [min, max]")
        return v


class SizeQuality(_Strict):
    """Thresholds for one table (``child`` chunks or ``parent`` blocks)."""

    max_chars: int | None = Field(None, ge=1, le=_MAX_SIZE)
    max_tokens: int | None = Field(None, ge=1, le=_MAX_SIZE)
    min_chars: int | None = Field(None, ge=0, le=_MAX_SIZE)
    min_tokens: int | None = Field(None, ge=0, le=_MAX_SIZE)
    small_share: float = Field(0.1, ge=0, le=1)
    char_count: QuantileRanges | None = None
    token_count: QuantileRanges | None = None

    @model_validator(mode="after")
    def _min_below_max(self) -> SizeQuality:
        for unit in ("chars", "tokens"):
            lo, hi = getattr(self, f"min_{unit}"), getattr(self, f"max_{unit}")
            if lo is not None and hi is not None and lo > hi:
                raise ValueError(f"min_{unit} = {lo} is larger than max_{unit} = {hi}")
        return self


class EmbeddingQuality(_Strict):
    dimension: int | None = Field(None, ge=1, le=65536)


class QualityConfig(_Strict):
    token_limit: int | None = Field(None, ge=8, le=32768)
    token_slack: int = Field(2, ge=0, le=64)
    child: SizeQuality = Field(default_factory=SizeQuality)
    parent: SizeQuality = Field(default_factory=SizeQuality)
    embedding: EmbeddingQuality = Field(default_factory=EmbeddingQuality)
    severity: dict[str, Literal["error", "warn"]] = Field(default_factory=dict)

    @field_validator("severity")
    @classmethod
    def _known_checks(cls, v: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(v) - set(check_names()))
        if unknown:
            raise ValueError(f"unknown check {unknown[0]!r}; checks are: {', '.join(check_names())}")
        return v
