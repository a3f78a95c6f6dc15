"""Parent/child plans (seed 003): which strategies cut parents, which cut children.

Two spellings, both accepted and round-tripped:

    PARENT:1;CHILD:3,2                         seed 003's snapshot (numeric codes)
    PARENT:STRUCTURE;CHILD:SEMANTIC,RECURSIVE  the named form (any strategy, any case)

A ``CHILD:``-only plan has no parent pipeline: each document is one parent. Step roles
follow seed 003: the first step of a pipeline is PRIMARY; a later RECURSIVE or
SLIDING_WINDOW step is the FALLBACK that guarantees the size; any other later step
OPTIMIZEs. Settings per strategy and pipeline come from ``kb.yaml``
(``chunking.parent.RECURSIVE.max_chars``); the parent pipeline starts from seed 003's
parent defaults (RECURSIVE 2200/180, SEMANTIC 480..1600, LLM 3500 with a 480..1600 fallback,
STRUCTURE's RECURSIVE fallback 2200/180).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from corpus_pipeline.chunking import registry
from corpus_pipeline.chunking.base import Strategy
from corpus_pipeline.chunking.params import StrategyConfig
from corpus_pipeline.errors import ConfigError


class Role(str, enum.Enum):
    PRIMARY = "PRIMARY"
    OPTIMIZE = "OPTIMIZE"
    FALLBACK = "FALLBACK"
    ENHANCE = "ENHANCE"


# Seed 003, section 3 and 7: the parent pipeline's thresholds.
PARENT_DEFAULTS: dict[str, dict[str, Any]] = {
    "RECURSIVE": {"max_chars": 2200, "overlap_chars": 180},
    "SLIDING_WINDOW": {"chunk_size": 2200, "chunk_overlap": 180},
    "SEMANTIC": {"min_chars": 480, "max_chars": 1600},
    "LLM": {"llm_max_chars": 3500, "fallback_min_chars": 480, "fallback_max_chars": 1600},
    "STRUCTURE": {"fallback_max_chars": 2200, "fallback_overlap_chars": 180},
}

# Children are what gets embedded, so by default they are sized in the embedding model's
# tokens (240 content tokens fit all-MiniLM-L6-v2's 256 positions) instead of the seed's
# 800 characters, which is ~800 tokens of Chinese and would be silently truncated. These
# defaults apply only when the KB gives no size setting of its own for the strategy.
CHILD_DEFAULTS: dict[str, dict[str, Any]] = {
    "RECURSIVE": {"size_unit": "tokens", "max_tokens": 240, "overlap_tokens": 32},
}
_SIZE_KEYS = frozenset({"size_unit", "max_chars", "overlap_chars", "max_tokens", "overlap_tokens"})
_SIZE_GUARDS = ("RECURSIVE", "SLIDING_WINDOW")

DEFAULT_PLAN = "PARENT:RECURSIVE;CHILD:RECURSIVE"


@dataclass(frozen=True)
class Step:
    strategy: str  # registered name, upper case
    role: Role
    config: StrategyConfig

    def build(self) -> Strategy:
        """The step's strategy, made once: a strategy holds nothing but its config, and the
        pipeline asks for it once per document."""
        built = self.__dict__.get("_built")
        if built is None:
            built = registry.get(self.strategy)(self.config)
            object.__setattr__(self, "_built", built)  # (not a field: equality and hash ignore it)
        return built


@dataclass(frozen=True)
class Plan:
    parent: tuple[Step, ...]
    child: tuple[Step, ...]

    @property
    def strategies(self) -> list[str]:
        return sorted({s.strategy for s in self.parent + self.child})

    def snapshot(self, *, numeric: bool = False) -> str:
        """``PARENT:1;CHILD:3,2`` (numeric, where every step has a code) or the named form."""

        def part(steps: tuple[Step, ...]) -> str:
            out = []
            for s in steps:
                code = registry.get(s.strategy).code
                out.append(str(code) if numeric and code is not None else s.strategy)
            return ",".join(out)

        parts = []
        if self.parent:
            parts.append("PARENT:" + part(self.parent))
        parts.append("CHILD:" + part(self.child))
        return ";".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "snapshot": self.snapshot(),
            "parent": [
                {"strategy": s.strategy, "role": s.role.value, "config": s.config.to_dict()} for s in self.parent
            ],
            "child": [{"strategy": s.strategy, "role": s.role.value, "config": s.config.to_dict()} for s in self.child],
        }


def parse_snapshot(snapshot: str) -> tuple[list[str], list[str]]:
    """Split a snapshot into parent and child strategy names (validated, upper case)."""
    if not isinstance(snapshot, str) or not snapshot.strip():
        raise ConfigError(
            f"plan {snapshot!r} is empty; write e.g. 'PARENT:RECURSIVE;CHILD:RECURSIVE' or 'PARENT:1;CHILD:3,2'."
        )
    found: dict[str, list[str]] = {}
    for section in snapshot.split(";"):
        section = section.strip()
        if not section:
            continue
        if ":" not in section:
            raise ConfigError(
                f"plan {snapshot!r}: section {section!r} has no 'PARENT:' or 'CHILD:' prefix; "
                "write e.g. 'PARENT:STRUCTURE;CHILD:SEMANTIC,RECURSIVE'."
            )
        head, _, body = section.partition(":")
        head = head.strip().upper()
        if head not in ("PARENT", "CHILD"):
            raise ConfigError(f"plan {snapshot!r}: {head!r} is not a pipeline; use PARENT and CHILD.")
        if head in found:
            raise ConfigError(f"plan {snapshot!r}: {head} appears twice.")
        names = [n.strip() for n in body.split(",") if n.strip()]
        if not names:
            raise ConfigError(f"plan {snapshot!r}: {head} lists no strategy.")
        try:
            found[head] = [registry.get(n).name for n in names]
        except ConfigError as exc:
            raise ConfigError(f"plan {snapshot!r}: {exc}") from None
    if "CHILD" not in found:
        raise ConfigError(f"plan {snapshot!r} has no CHILD pipeline; add e.g. ';CHILD:RECURSIVE'.")
    return found.get("PARENT", []), found["CHILD"]


def _role(i: int, name: str) -> Role:
    if i == 0:
        return Role.PRIMARY
    return Role.FALLBACK if name in _SIZE_GUARDS else Role.OPTIMIZE


def build_plan(
    snapshot: str,
    parent_settings: Mapping[str, Mapping[str, Any]] | None = None,
    child_settings: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    where: str = "chunking",
) -> Plan:
    """Validate a snapshot and per-strategy settings into a Plan; every error names its key."""
    parent_names, child_names = parse_snapshot(snapshot)

    def norm(settings: Mapping[str, Mapping[str, Any]] | None, key: str) -> dict[str, Mapping[str, Any]]:
        out: dict[str, Mapping[str, Any]] = {}
        for name, cfg in (settings or {}).items():
            try:
                canon = registry.get(name).name
            except ConfigError as exc:
                raise ConfigError(f"{where}.{key}.{name}: {exc}") from None
            out[canon] = cfg
        return out

    ps, cs = norm(parent_settings, "parent"), norm(child_settings, "child")

    def steps(
        names: list[str], settings: dict[str, Mapping[str, Any]], key: str, defaults: dict[str, dict[str, Any]]
    ) -> tuple[Step, ...]:
        out = []
        for i, name in enumerate(names):
            user = dict(settings.get(name) or {})
            base = defaults.get(name, {})
            if key == "child" and _SIZE_KEYS & user.keys():
                base = {}  # the KB sized this strategy itself: no token default under it
            merged = {**base, **user}
            cfg = registry.make_config(name, merged, where=f"{where}.{key}.{name}")
            out.append(Step(name, _role(i, name), cfg))
        return tuple(out)

    return Plan(steps(parent_names, ps, "parent", PARENT_DEFAULTS), steps(child_names, cs, "child", CHILD_DEFAULTS))
