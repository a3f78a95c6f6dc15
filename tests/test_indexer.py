"""Indexing as a library call with the engine injected (``corpus_pipeline.indexer``).

The engine here is a recording one (the real Dagster engine is what every other indexing
test runs, through the same ``index``): what the library hands it, that an invalid
configuration never reaches it, and which engine ``KB.index`` and the CLI use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from corpus_pipeline import indexer as indexer_module
from corpus_pipeline.api import KB
from corpus_pipeline.errors import ConfigError
from corpus_pipeline.indexer import current_indexer, index, use_indexer
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.versions import known_versions


class Summary:
    def __init__(self, kb: str, version: str) -> None:
        self.kb, self.strategy_version, self.status = kb, version, "ok"

    def to_dict(self) -> dict[str, Any]:
        return {"kb": self.kb, "strategy_version": self.strategy_version, "status": self.status}


class Recording:
    def __init__(self) -> None:
        self.calls: list[tuple[list[tuple[str, str]], dict[str, Any]]] = []

    def __call__(self, layout: Layout, planned: Any, **kwargs: Any) -> list[Summary]:
        self.calls.append(([(kb.name, v) for kb, v in planned], kwargs))
        return [Summary(kb.name, v) for kb, v in planned]


def _kb(home: Path, name: str, yaml: str = "") -> None:
    d = home / "kbs" / name
    d.mkdir(parents=True)
    (d / "a.md").write_text("# A\n\nSome text.\n")
    if yaml:
        (d / "kb.yaml").write_text(yaml)


def test_the_library_registers_the_versions_and_hands_them_to_the_engine(corpus_home: Path) -> None:
    _kb(corpus_home, "one")
    _kb(corpus_home, "two")
    layout = Layout(corpus_home)
    engine = Recording()
    out = index(layout, ["one", "two"], force=True, workers=3, indexer=engine)
    [(planned, kwargs)] = engine.calls
    assert [kb for kb, _ in planned] == ["one", "two"]
    assert all(v in known_versions(layout, kb) for kb, v in planned)  # registered before the engine ran
    assert kwargs == {"force": True, "wait": 0.0, "reporter": None, "workers": 3}
    assert [s.kb for s in out] == ["one", "two"]


def test_an_invalid_kb_yaml_is_reported_and_registers_nothing_while_the_others_are_indexed(corpus_home: Path) -> None:
    _kb(corpus_home, "good")
    _kb(corpus_home, "bad", "chunking:\n  plan: PARENT:NOPE\n")
    layout = Layout(corpus_home)
    engine = Recording()
    out = index(layout, ["bad", "good"], indexer=engine)
    [(planned, _)] = engine.calls
    assert [kb for kb, _ in planned] == ["good"]  # the invalid one never reaches the engine
    assert [s.kb for s in out] == ["bad", "good"]  # (in the order asked)
    assert out[0].status == "invalid" and "NOPE" in str(out[0].error) and "kb.yaml" in str(out[0].error)
    assert known_versions(layout, "bad") == [] and known_versions(layout, "good") != []
    with pytest.raises(ConfigError):  # asked for alone: the error itself
        index(layout, ["bad"], indexer=engine)
    assert len(engine.calls) == 1


def test_kb_index_runs_the_installed_engine_else_the_entry_points(
    corpus_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _kb(corpus_home, "docs")
    engine = Recording()
    monkeypatch.setattr(indexer_module, "_installed", None)
    from assets.runner import index_planned

    assert current_indexer() is index_planned  # (found through the entry point, not imported by the library)
    use_indexer(engine)
    try:
        summary = KB("docs", corpus_home).index(force=True)
    finally:
        use_indexer(None)
    assert summary["kb"] == "docs" and engine.calls[0][1]["force"] is True
    other = Recording()
    KB("docs", corpus_home).index(indexer=other)  # passed: wins over the installed one
    assert len(other.calls) == 1 and len(engine.calls) == 1
