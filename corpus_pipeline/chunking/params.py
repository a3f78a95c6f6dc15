"""Typed, bounded, documented strategy configurations.

Every strategy declares a frozen dataclass of ``param(...)`` fields. Bounds are checked in
``__post_init__`` (so an invalid config can never exist), cross-field rules in ``check``;
``from_mapping`` refuses unknown keys and prefixes every message with where the value came
from (``chunking.child.RECURSIVE.overlap_chars = 500 ...``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from corpus_pipeline.errors import ConfigError, did_you_mean


def param(
    default: Any,
    *,
    doc: str,
    ge: float | None = None,
    le: float | None = None,
    choices: tuple[Any, ...] | None = None,
) -> Any:
    """A config field with a default, a one-line explanation and its allowed range."""
    return field(default=default, metadata={"doc": doc, "ge": ge, "le": le, "choices": choices})


def _type_name(tp: Any) -> str:
    return tp if isinstance(tp, str) else getattr(tp, "__name__", str(tp))


@dataclass(frozen=True)
class StrategyConfig:
    """Base of every strategy's config. Subclasses add ``param`` fields and ``check``."""

    _numeric: ClassVar[tuple[type, ...]] = (int, float)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            meta = f.metadata
            expected = _type_name(f.type)
            if expected in ("int", "float"):
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise ConfigError(f"{f.name} = {value!r} is not a number; expected {expected}.")
                if expected == "int" and not float(value).is_integer():
                    raise ConfigError(f"{f.name} = {value!r} must be a whole number.")
                if expected == "int":
                    object.__setattr__(self, f.name, int(value))
                else:
                    object.__setattr__(self, f.name, float(value))
                value = getattr(self, f.name)
            elif expected == "bool" and not isinstance(value, bool):
                raise ConfigError(f"{f.name} = {value!r} must be true or false.")
            elif expected == "str" and not isinstance(value, str):
                raise ConfigError(f"{f.name} = {value!r} must be a string.")
            lo, hi, choices = meta.get("ge"), meta.get("le"), meta.get("choices")
            if choices is not None and value not in choices:
                allowed = ", ".join(repr(c) for c in choices)
                raise ConfigError(f"{f.name} = {value!r} is not allowed; choose one of {allowed}.")
            if (lo is not None and value < lo) or (hi is not None and value > hi):
                raise ConfigError(
                    f"{f.name} = {value!r} is out of range: allowed {_fmt(lo)}..{_fmt(hi)}. ({meta.get('doc', '')})"
                )
        self.check()

    def check(self) -> None:
        """Cross-field rules; raise ConfigError naming both keys and values."""

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None, *, where: str = "config") -> Self:
        data = dict(data or {})
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = [k for k in data if k not in names]
        if unknown:
            raise ConfigError(
                f"{where}: unknown key {unknown[0]!r}; allowed keys are: {', '.join(names)}."
                + did_you_mean(unknown[0], names)
            )
        try:
            return cls(**data)
        except ConfigError as exc:
            raise ConfigError(f"{where}.{exc}") from None

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def replace(self, **changes: Any) -> Self:
        return dataclasses.replace(self, **changes)

    @classmethod
    def describe(cls) -> list[dict[str, Any]]:
        """One entry per key: name, type, default, allowed range, explanation."""
        out = []
        for f in dataclasses.fields(cls):
            meta = f.metadata
            out.append(
                {
                    "key": f.name,
                    "type": _type_name(f.type),
                    "default": f.default,
                    "min": meta.get("ge"),
                    "max": meta.get("le"),
                    "choices": list(meta["choices"]) if meta.get("choices") else None,
                    "doc": meta.get("doc", ""),
                }
            )
        return out


def _fmt(x: float | None) -> str:
    if x is None:
        return ""
    return str(int(x)) if float(x).is_integer() else str(x)
