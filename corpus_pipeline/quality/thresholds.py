"""What the checks of a partition compare against (``quality.bounds`` derives it from the
KB's plan and model): size limits per table and per document override, quantile ranges, the
token limit, the expected dimension, each check's severity."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from corpus_pipeline.globs import match_glob

QUANTILES = ("p5", "p50", "p95")


@dataclass(frozen=True)
class SizeLimits:
    """Size bounds for the chunks of one plan's pipeline (``None``: not bounded)."""

    max_chars: int | None = None
    max_tokens: int | None = None
    min_chars: int | None = None
    min_tokens: int | None = None
    source: str = ""  # where the bound comes from, e.g. "child RECURSIVE max_chars=800"

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None and v != ""}


@dataclass(frozen=True)
class TableThresholds:
    """Thresholds for one table: per-document size limits (plan overrides are matched by
    the document's path, first match wins), the share allowed under the minimum, and the
    allowed ranges of the char_count / token_count quantiles."""

    default: SizeLimits = field(default_factory=SizeLimits)
    overrides: tuple[tuple[str, SizeLimits], ...] = ()
    small_share: float = 0.1
    char_count: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    token_count: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)

    def limits_for(self, doc_path: str | None) -> SizeLimits:
        for pattern, limits in self.overrides:
            if doc_path is not None and match_glob(doc_path, pattern):
                return limits
        return self.default


@dataclass(frozen=True)
class Thresholds:
    """Everything the checks of one partition compare against."""

    token_limit: int
    token_slack: int = 2
    child: TableThresholds = field(default_factory=TableThresholds)
    parent: TableThresholds = field(default_factory=TableThresholds)
    embedding_dimension: int | None = None
    severity: dict[str, str] = field(default_factory=dict)  # check name -> "ERROR" | "WARN"
