"""Parent/child plans (seed 003): which strategies cut parents, which cut children.

Two spellings, both accepted and round-tripped:

    PARENT:1;CHILD:3,2                         seed 003's snapshot (numeric codes)
    PARENT:STRUCTURE;CHILD:SEMANTIC,RECURSIVE  the named form (any strategy, any case)

A ``CHILD:``-only plan has no parent pipeline: each document is one parent. Step roles
follow seed 003: the first step of a pipeline is PRIMARY; a later size guard (RECURSIVE,
SLIDING_WINDOW: ``Strategy.size_guard``) is the FALLBACK that guarantees the size; any
other later step OPTIMIZEs.

Settings are typed from the edge inward. ``PipelineSettings`` holds the keys a KB wrote for
the strategies of one pipeline (``chunking.parent`` / ``chunking.child`` of kb.yaml),
validated when kb.yaml is read; a per-document override is merged into the KB's key by key
(``merged``), so ``{overlap_chars: 20}`` changes that key and nothing else. A step's config
is then the strategy's defaults for its pipeline (``Strategy.role_defaults``: seed 003's
parent thresholds, token-sized children) under those keys.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from corpus_pipeline.chunking import registry
from corpus_pipeline.chunking.base import Strategy
from corpus_pipeline.chunking.params import StrategyConfig
from corpus_pipeline.errors import ConfigError

#: Chosen by the retrieval benchmark (benchmarks/retrieval/RESULTS.md): against
#: RECURSIVE;RECURSIVE, sections as parents and SEMANTIC (Jaccard) then RECURSIVE children
#: found more English answers (parent recall 0.790 vs 0.781) and ranked them higher (MRR 0.740
#: vs 0.665 on COVID-QA; 0.986 vs 0.984 on CMRC) in fewer characters (3,863 vs 4,318), for
#: 2 of 1,000 CMRC questions fewer found (hit 0.998 vs 1.0) and 7-20 % more index time.
DEFAULT_PLAN = "PARENT:STRUCTURE;CHILD:SEMANTIC,RECURSIVE"
PIPELINES = ("parent", "child")


class Role(str, enum.Enum):  # noqa: UP042 - written as plain strings
    PRIMARY = "PRIMARY"
    OPTIMIZE = "OPTIMIZE"
    FALLBACK = "FALLBACK"
    ENHANCE = "ENHANCE"


@dataclass(frozen=True)
class PipelineSettings:
    """The settings a KB wrote for the strategies of one pipeline: ``{strategy: {key: value}}``
    with registered (canonical) strategy names, each mapping validated against the
    strategy's config. Only the keys written are kept: defaults stay the strategy's."""

    pipeline: str = "child"
    by_strategy: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @classmethod
    def parse(
        cls, raw: Mapping[str, Any] | None, *, pipeline: str, where: str, validate: bool = True
    ) -> PipelineSettings:
        """Read ``{strategy name or code: {key: value}}``; errors name ``where``, the strategy
        and the key. ``validate=False`` checks only names and shapes: an override's keys are
        valid or not once merged into the KB's (``merged(...).validate(where)``)."""
        if pipeline not in PIPELINES:
            raise ValueError(f"pipeline must be one of {PIPELINES}, got {pipeline!r}")
        if raw is None:
            return cls(pipeline, {})
        if not isinstance(raw, Mapping):
            raise ConfigError(f"{where} must be a mapping of strategy -> settings, got {type(raw).__name__}: {raw!r}")
        out: dict[str, dict[str, Any]] = {}
        for name, values in raw.items():
            try:
                canon = registry.get(name).name
            except ConfigError as exc:
                raise ConfigError(f"{where}.{name}: {exc}") from None
            if values is not None and not isinstance(values, Mapping):
                raise ConfigError(
                    f"{where}.{name} must be a mapping of settings, got {type(values).__name__}: {values!r}"
                )
            merged = {**out.get(canon, {}), **dict(values or {})}
            out[canon] = merged
        settings = cls(pipeline, out)
        return settings.validate(where) if validate else settings

    def validate(self, where: str) -> PipelineSettings:
        """Every strategy's config built once (unknown keys, ranges, cross-key rules); self."""
        for name in self.by_strategy:
            self.config_for(name, where=f"{where}.{name}")
        return self

    def merged(self, other: PipelineSettings) -> PipelineSettings:
        """These settings with ``other``'s written over them, key by key."""
        out = {name: dict(values) for name, values in self.by_strategy.items()}
        for name, values in other.by_strategy.items():
            out[name] = {**out.get(name, {}), **dict(values)}
        return PipelineSettings(self.pipeline, out)

    def keys_for(self, strategy: str) -> dict[str, Any]:
        return dict(self.by_strategy.get(registry.get(strategy).name, {}))

    def config_for(self, strategy: str, *, where: str = "") -> StrategyConfig:
        """The config of ``strategy`` in this pipeline: its defaults here, under the keys written."""
        cls = registry.get(strategy)
        user = self.keys_for(cls.name)
        merged = {**cls.role_defaults(self.pipeline, set(user)), **user}
        return registry.make_config(cls.name, merged, where=where or f"chunking.{self.pipeline}.{cls.name}")

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {name: dict(values) for name, values in sorted(self.by_strategy.items())}

    def __iter__(self) -> Iterator[str]:
        return iter(self.by_strategy)


@dataclass(frozen=True)
class Step:
    strategy: str  # registered name, upper case
    role: Role
    config: StrategyConfig

    @property
    def strategy_class(self) -> type[Strategy]:
        return registry.get(self.strategy)

    def build(self) -> Strategy:
        """The step's strategy, made once: a strategy holds nothing but its config, and the
        pipeline asks for it once per document."""
        built = self.__dict__.get("_built")
        if built is None:
            built = self.strategy_class(self.config)
            object.__setattr__(self, "_built", built)  # (not a field: equality and hash ignore it)
        return built

    @property
    def calls_llm(self) -> bool:
        return self.strategy_class.calls_llm(self.config)

    @property
    def needs_embedder(self) -> bool:
        return self.strategy_class.needs_embedder(self.config)


@dataclass(frozen=True)
class Plan:
    parent: tuple[Step, ...]
    child: tuple[Step, ...]

    @property
    def steps(self) -> tuple[Step, ...]:
        return self.parent + self.child

    @property
    def strategies(self) -> list[str]:
        return sorted({s.strategy for s in self.steps})

    @property
    def calls_llm(self) -> bool:
        return any(s.calls_llm for s in self.steps)

    @property
    def needs_embedder(self) -> bool:
        return any(s.needs_embedder for s in self.steps)

    def code_versions(self) -> dict[str, str]:
        """Each strategy's code version, by name."""
        return {s.strategy: s.strategy_class.version for s in self.steps}

    def snapshot(self, *, numeric: bool = False) -> str:
        """``PARENT:1;CHILD:3,2`` (numeric, where every step has a code) or the named form."""

        def part(steps: tuple[Step, ...]) -> str:
            out = []
            for s in steps:
                code = s.strategy_class.code
                out.append(str(code) if numeric and code is not None else s.strategy)
            return ",".join(out)

        parts = []
        if self.parent:
            parts.append("PARENT:" + part(self.parent))
        parts.append("CHILD:" + part(self.child))
        return ";".join(parts)

    def to_dict(self) -> dict[str, Any]:
        def steps(ss: tuple[Step, ...]) -> list[dict[str, Any]]:
            return [{"strategy": s.strategy, "role": s.role.value, "config": s.config.to_dict()} for s in ss]

        return {"snapshot": self.snapshot(), "parent": steps(self.parent), "child": steps(self.child)}


def parse_snapshot(snapshot: str) -> tuple[list[str], list[str]]:
    """Split a snapshot into parent and child strategy names (validated, upper case)."""
    if not isinstance(snapshot, str) or not snapshot.strip():
        raise ConfigError(
            f"plan {snapshot!r} is empty; write e.g. 'PARENT:RECURSIVE;CHILD:RECURSIVE' or 'PARENT:1;CHILD:3,2'."
        )
    found: dict[str, list[str]] = {}
    for raw_section in snapshot.split(";"):
        section = raw_section.strip()
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
    return Role.FALLBACK if registry.get(name).size_guard else Role.OPTIMIZE


def _settings(value: PipelineSettings | Mapping[str, Any] | None, pipeline: str, where: str) -> PipelineSettings:
    if isinstance(value, PipelineSettings):
        return PipelineSettings(pipeline, value.by_strategy) if value.pipeline != pipeline else value
    return PipelineSettings.parse(value, pipeline=pipeline, where=f"{where}.{pipeline}")


def build_plan(
    snapshot: str,
    parent_settings: PipelineSettings | Mapping[str, Any] | None = None,
    child_settings: PipelineSettings | Mapping[str, Any] | None = None,
    *,
    where: str = "chunking",
) -> Plan:
    """A validated Plan from a snapshot and each pipeline's settings (typed, or a raw mapping
    validated here); every error names ``where``, the pipeline, the strategy and the key."""
    try:
        parent_names, child_names = parse_snapshot(snapshot)
    except ConfigError as exc:  # name the file and key the plan came from (parse_snapshot's own say "plan ...")
        raise ConfigError(f"{where}.plan: {exc}") from None
    ps, cs = _settings(parent_settings, "parent", where), _settings(child_settings, "child", where)

    def steps(names: list[str], settings: PipelineSettings) -> tuple[Step, ...]:
        return tuple(
            Step(name, _role(i, name), settings.config_for(name, where=f"{where}.{settings.pipeline}.{name}"))
            for i, name in enumerate(names)
        )

    return Plan(steps(parent_names, ps), steps(child_names, cs))
