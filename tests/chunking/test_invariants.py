"""Every registered strategy keeps the chunk contract: exact offsets, order, bounds,
coverage of every non-whitespace character, determinism; on literal text and Hypothesis."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunking.helpers import check_invariants, ctx_for, split
from corpus_pipeline.chunking import registry

EN = (
    "# Harbor backup\n\nHarbor keeps encrypted copies of your servers. The console listens on port 8443. "
    "Dr. Smith wrote it in 2019, e.g. for 3.5 GB disks.\n\n## Restoring\n\n"
    + "Open the console, choose the snapshot, and press Restore. Restores under 2 GB finish fast. " * 12
    + "\n\n```bash\n# not a heading\nharbor restore --all\n```\n\n- one\n- two\n"
)
ZH = (
    "一、项目背景\n\n"
    + "问题现象：CPU 使用率持续 5 分钟超过 85%，交易延迟升高。排查步骤：先用 top 命令定位进程，再定位线程。" * 10
    + "\n\n二、解决方案\n\n"
    + "如果是流量突增，先扩容到 16 个实例；如果是代码死循环，立即回滚最近一次发布！" * 8
    + "\n"
    + "没有标点的长中文文本" * 120
)
MIXED = "Title\n\n" + ("Short line\n" * 30) + ("word " * 400) + "\n\n" + ("x" * 3000)

SMALL = {
    "RECURSIVE": {"max_chars": 200, "overlap_chars": 40},
    "SLIDING_WINDOW": {"chunk_size": 200, "chunk_overlap": 40},
    "SEMANTIC": {"min_chars": 60, "max_chars": 200},
    "STRUCTURE": {"fallback_max_chars": 200, "fallback_overlap_chars": 40},
    "PROPOSITION": {"max_chunk_size": 200, "fallback_overlap": 40, "min_chunk_size": 20},
    "LLM": {"fallback_min_chars": 60, "fallback_max_chars": 200},
}
TOKENS = {
    "RECURSIVE": {"size_unit": "tokens", "max_tokens": 48, "overlap_tokens": 8},
    "SLIDING_WINDOW": {"size_unit": "tokens", "chunk_size": 48, "chunk_overlap": 8, "min_chunk_size": 4},
    "SEMANTIC": {"size_unit": "tokens", "min_tokens": 12, "max_tokens": 48},
    "STRUCTURE": {"size_unit": "tokens", "fallback_max_tokens": 48, "fallback_overlap_tokens": 8},
}

NAMES = [cls.name for cls in registry.all_strategies()]


def test_every_strategy_of_the_issue_is_registered() -> None:
    assert set(NAMES) >= {"SLIDING_WINDOW", "RECURSIVE", "STRUCTURE", "SEMANTIC", "PROPOSITION", "LLM"}


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    "doc", [EN, ZH, MIXED, "", "   \n\n ", "one"], ids=["en", "zh", "mixed", "empty", "blank", "word"]
)
@pytest.mark.parametrize("sizes", ["default", "small"])
def test_strategy_keeps_the_contract_on_literal_documents(name: str, doc: str, sizes: str) -> None:
    cls = registry.get(name)
    cfg = cls.config_class(**(SMALL[name] if sizes == "small" else {}))
    ctx = ctx_for(doc)
    pieces = split(name, doc, ctx, **cfg.to_dict())
    check_invariants(name, doc, pieces, ctx, cfg)
    assert split(name, doc, ctx_for(doc), **cfg.to_dict()) == pieces  # deterministic


@pytest.mark.parametrize("name", sorted(TOKENS))
@pytest.mark.parametrize("doc", [EN, ZH, MIXED], ids=["en", "zh", "mixed"])
def test_strategy_keeps_token_bounds(name: str, doc: str) -> None:
    cls = registry.get(name)
    cfg = cls.config_class(**TOKENS[name])
    ctx = ctx_for(doc)
    check_invariants(name, doc, split(name, doc, ctx, **cfg.to_dict()), ctx, cfg)


_alphabet = st.sampled_from(
    [
        *list("abc xyz.,;!?\n"),
        "\n\n",
        "。",
        "，",
        "中文",
        "# ",
        "## T\n",
        "1. ",
        "```\n",
        "3.14",
        " e.g. ",
        "“好。”",
        "\t",
    ]
)
documents = st.lists(_alphabet, max_size=300).map("".join)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=documents, name=st.sampled_from(NAMES), small=st.booleans())
def test_strategy_keeps_the_contract_on_generated_text(doc: str, name: str, small: bool) -> None:
    cls = registry.get(name)
    cfg = cls.config_class(**(SMALL[name] if small else {}))
    ctx = ctx_for(doc)
    check_invariants(name, doc, split(name, doc, ctx, **cfg.to_dict()), ctx, cfg)


@settings(max_examples=50, deadline=None)
@given(doc=documents, name=st.sampled_from(sorted(TOKENS)))
def test_token_sizes_hold_on_generated_text(doc: str, name: str) -> None:
    cls = registry.get(name)
    cfg = cls.config_class(**TOKENS[name])
    ctx = ctx_for(doc)
    check_invariants(name, doc, split(name, doc, ctx, **cfg.to_dict()), ctx, cfg)


CLEAN = [cls.name for cls in registry.all_strategies() if cls.clean_output]


def test_the_strategies_that_skip_the_cleanup_are_the_expected_ones() -> None:
    assert set(CLEAN) == {"RECURSIVE", "STRUCTURE"}


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=documents, name=st.sampled_from(CLEAN), small=st.booleans(), tokens=st.booleans(), cut=st.integers(0, 40))
def test_clean_output_claims_hold_so_skipping_the_cleanup_changes_nothing(
    doc: str, name: str, small: bool, tokens: bool, cut: int
) -> None:
    """A strategy with ``clean_output`` promises that, from one input piece, the pipeline's
    cleanup would keep every piece (none blank, none repeated): run_steps relies on it."""
    from corpus_pipeline.chunking.pipeline import cleanup
    from corpus_pipeline.models import Piece

    cls = registry.get(name)
    cfg = cls.config_class(**(TOKENS[name] if tokens else SMALL[name] if small else {}))
    ctx = ctx_for(doc)
    start = min(cut, len(doc))  # a span of the document, as a child pipeline gets one
    pieces = cls(cfg).split_all([Piece(doc[start:], start, len(doc), section_path="P")], ctx)
    assert cleanup(pieces) == pieces
