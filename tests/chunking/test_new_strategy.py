"""Adding a strategy is one module plus its registration: a strategy defined here, in a
test, is planned, versioned, previewed, bounded by the quality checks and indexed by real
Dagster runs, without a change anywhere else."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest
from dagster import instance_for_test

from assets.definitions import build_definitions
from assets.runner import index_kb
from corpus_pipeline.chunking import registry
from corpus_pipeline.chunking import text as tx
from corpus_pipeline.chunking.base import ChunkContext, Strategy, sub_piece
from corpus_pipeline.chunking.params import StrategyConfig, param
from corpus_pipeline.chunking.plan import Role, build_plan
from corpus_pipeline.chunking.sizes import SizeBound
from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.models import Piece
from corpus_pipeline.preview import preview_file
from corpus_pipeline.quality.bounds import resolve_thresholds
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.parquet import read_partition
from corpus_pipeline.store.versions import register_version
from corpus_pipeline.versioning import strategy_version


@dataclass(frozen=True)
class LinesConfig(StrategyConfig):
    lines: int = param(2, ge=1, le=50, doc="non-blank lines per chunk")
    max_chars: int = param(400, ge=50, le=8000, doc="a chunk of more characters is cut by characters")


class Lines(Strategy):
    """A chunk every ``lines`` non-blank lines (a toy: what matters is what it declares)."""

    name = "TEST_LINES"
    short_code = "t"
    version = "v7"
    description = "Test-only: a chunk per N non-blank lines."
    config_class = LinesConfig
    config: LinesConfig
    size_guard = True
    child_defaults: ClassVar[Mapping[str, Any]] = {"lines": 3}
    size_keys = frozenset({"lines", "max_chars"})

    @classmethod
    def size_bound(cls, config: StrategyConfig) -> SizeBound:
        assert isinstance(config, LinesConfig)
        return SizeBound("chars", config.max_chars, None, f"{cls.name} max_chars")

    def split(self, piece: Piece, ctx: ChunkContext) -> list[Piece]:
        spans = tx.lines(ctx.text, piece.start, piece.end)
        out = []
        for i in range(0, len(spans), self.config.lines):
            group = spans[i : i + self.config.lines]
            a, b = group[0][0], group[-1][1]
            while b - a > self.config.max_chars:  # the declared bound holds
                out.append(sub_piece(piece, ctx.text, a, a + self.config.max_chars, strategy=self.name))
                a = tx.skip_ws(ctx.text, a + self.config.max_chars, b)
            if b > a:
                out.append(sub_piece(piece, ctx.text, a, b, strategy=self.name))
        return out


@pytest.fixture
def lines_strategy() -> Iterator[type[Strategy]]:
    registry.register(Lines)
    yield Lines
    registry.unregister(Lines.name)


DOC = "# Notes\n\nfirst line\nsecond line\nthird line\nfourth line\n\nfifth line\n"


def test_a_registered_strategy_is_planned_versioned_and_bounded_like_the_builtin_ones(lines_strategy, tmp_path):
    assert "TEST_LINES" in registry.names() and registry.get("test_lines") is Lines
    plan = build_plan("PARENT:STRUCTURE;CHILD:SEMANTIC,TEST_LINES", child_settings={"TEST_LINES": {"max_chars": 120}})
    assert [s.role for s in plan.child] == [Role.PRIMARY, Role.FALLBACK]  # a size guard
    # a KB that sizes it itself (a size key) gets no size default under it; else its child default
    assert plan.child[1].config == LinesConfig(lines=2, max_chars=120)
    assert build_plan("CHILD:TEST_LINES").child[0].config == LinesConfig(lines=3)
    kb_dir = tmp_path / "kbs" / "notes"
    kb_dir.mkdir(parents=True)
    (kb_dir / "kb.yaml").write_text("chunking: {plan: 'PARENT:RECURSIVE;CHILD:TEST_LINES'}\n", encoding="utf-8")
    kb = resolve_kb(kb_dir)
    version = strategy_version(kb)
    assert version.startswith("p2-ct-")  # its short code names it
    thresholds = resolve_thresholds(kb)
    assert thresholds.child.default.max_chars == 400  # the quality checks read its declared bound
    assert "TEST_LINES" in str(registry.describe(Lines))
    with pytest.raises(Exception, match="lines = 0 is out of range"):
        build_plan("CHILD:TEST_LINES", child_settings={"TEST_LINES": {"lines": 0}})


@pytest.mark.slow
def test_a_registered_strategy_is_indexed_by_real_runs_and_previewed_identically(lines_strategy, corpus_home):
    kb_dir = corpus_home / "kbs" / "notes"
    kb_dir.mkdir()
    (kb_dir / "notes.md").write_text(DOC * 3, encoding="utf-8")
    (kb_dir / "kb.yaml").write_text("chunking: {plan: 'PARENT:RECURSIVE;CHILD:TEST_LINES'}\n", encoding="utf-8")
    layout = Layout(corpus_home)
    kb = resolve_kb(kb_dir)
    version = register_version(layout, kb)
    with instance_for_test() as instance:
        summary = index_kb(build_definitions(str(corpus_home)), instance, layout, kb, version, say=lambda s: None)
    assert summary.status == "ok", summary.error
    assert summary.active_version == version
    assert not [c for c in summary.checks_failed if c["severity"] == "ERROR"], summary.checks_failed
    rows = read_partition(layout.partition_dir("child_chunks", "notes", version)).to_pylist()
    assert {r["strategy"] for r in rows} == {"TEST_LINES"} and {r["strategy_code_version"] for r in rows} == {"v7"}
    shown = preview_file(kb_dir / "notes.md", layout=layout, kb="notes")
    assert [c.chunk_id for c in shown.chunked.children] == [r["chunk_id"] for r in rows]
