"""The strategy registry: strategies register by name (and seed 003's numeric code).

    @register
    class Recursive(Strategy):
        name = "RECURSIVE"; code = 2; ...

``get("recursive")``, ``get("2")`` and ``get(2)`` all return the class; an unknown name
raises ``UnknownStrategyError`` listing the valid ones. Adding a strategy is one module
with its class (which says what it knows about itself: ``base.Strategy``) and
``@register``; plans, versions, preview, indexing and the quality checks need nothing else.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from corpus_pipeline.chunking.base import Strategy
from corpus_pipeline.chunking.params import StrategyConfig
from corpus_pipeline.errors import ConfigError, UnknownStrategyError

_BUILTIN_MODULES = (
    "corpus_pipeline.chunking.recursive",
    "corpus_pipeline.chunking.sliding_window",
    "corpus_pipeline.chunking.structure",
    "corpus_pipeline.chunking.semantic",
    "corpus_pipeline.chunking.proposition",
    "corpus_pipeline.chunking.llm_split",
)

_BY_NAME: dict[str, type[Strategy]] = {}
_BY_CODE: dict[int, type[Strategy]] = {}
_loaded = False


def register(cls: type[Strategy]) -> type[Strategy]:
    """Class decorator adding a strategy to the registry."""
    key = cls.name.upper()
    if key in _BY_NAME and _BY_NAME[key] is not cls:
        raise ValueError(f"strategy {key} is registered twice")
    _BY_NAME[key] = cls
    if cls.code is not None:
        _BY_CODE[cls.code] = cls
    return cls


def unregister(name: str) -> None:
    """Remove a strategy (for strategies registered by tests or plugins)."""
    cls = _BY_NAME.pop(name.upper(), None)
    if cls is not None and cls.code is not None and _BY_CODE.get(cls.code) is cls:
        del _BY_CODE[cls.code]


def _load_builtin() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for mod in _BUILTIN_MODULES:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name != mod:  # a real import error inside the module
                raise


def names() -> list[str]:
    _load_builtin()
    return sorted(_BY_NAME)


def all_strategies() -> list[type[Strategy]]:
    _load_builtin()
    return [_BY_NAME[n] for n in sorted(_BY_NAME, key=lambda n: (_BY_NAME[n].code is None, _BY_NAME[n].code or 0, n))]


def get(name_or_code: str | int) -> type[Strategy]:
    """The strategy class for a name (any case) or a numeric code."""
    _load_builtin()
    key = str(name_or_code).strip()
    if key.isdigit():
        cls = _BY_CODE.get(int(key))
        if cls is not None:
            return cls
    else:
        cls = _BY_NAME.get(key.upper())
        if cls is not None:
            return cls
    valid = ", ".join(f"{c.name}" + (f" ({c.code})" if c.code is not None else "") for c in all_strategies())
    raise UnknownStrategyError(f"unknown strategy {name_or_code!r}; valid strategies: {valid}.")


def make_config(name_or_code: str | int, data: Mapping[str, Any] | None, *, where: str = "config") -> StrategyConfig:
    """Validate ``data`` against the strategy's config class (unknown keys refused)."""
    cls = get(name_or_code)
    if data is not None and not isinstance(data, Mapping):
        raise ConfigError(f"{where} must be a mapping of settings, got {type(data).__name__}: {data!r}")
    return cls.config_class.from_mapping(data, where=where)


def describe(cls: type[Strategy]) -> dict[str, Any]:
    """The ``corpus strategies --json`` entry of a strategy."""
    return {
        "name": cls.name,
        "code": cls.code,
        "description": cls.description,
        "version": cls.version,
        "keeps_source_text": cls.keeps_source_text,
        "default_config": cls.config_class().to_dict(),
        "parameters": cls.config_class.describe(),
    }
