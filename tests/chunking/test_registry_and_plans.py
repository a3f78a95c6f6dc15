"""The registry (names and seed 003 codes), plan snapshots, the step pipeline, parent/child."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from chunking.helpers import chunk, ctx_for
from corpus_pipeline.chunking import registry
from corpus_pipeline.chunking.pipeline import cleanup, run_steps
from corpus_pipeline.chunking.plan import Role, build_plan, parse_snapshot
from corpus_pipeline.errors import ConfigError, UnknownStrategyError
from corpus_pipeline.models import Piece


@pytest.mark.parametrize(
    ("key", "name"),
    [
        ("STRUCTURE", "STRUCTURE"),
        ("1", "STRUCTURE"),
        (2, "RECURSIVE"),
        ("semantic", "SEMANTIC"),
        ("4", "LLM"),
        ("llm", "LLM"),
        ("Sliding_Window", "SLIDING_WINDOW"),
        ("PROPOSITION", "PROPOSITION"),
    ],
)
def test_strategies_are_found_by_name_or_seed_code(key: object, name: str) -> None:
    assert registry.get(key).name == name  # type: ignore[arg-type]


def test_an_unknown_strategy_lists_the_valid_ones() -> None:
    with pytest.raises(
        UnknownStrategyError,
        match=r"unknown strategy 'CHUNKY'; valid strategies: STRUCTURE \(1\), "
        r"RECURSIVE \(2\), SEMANTIC \(3\), LLM \(4\), PROPOSITION, SLIDING_WINDOW",
    ):
        registry.get("CHUNKY")


def test_every_strategy_describes_a_valid_default_config_with_documented_keys() -> None:
    for cls in registry.all_strategies():
        d = registry.describe(cls)
        assert set(d) >= {"name", "code", "description", "version", "default_config"}
        assert d["description"] and d["version"].startswith("v")
        assert cls.config_class.from_mapping(d["default_config"]) == cls.config_class()
        assert all(p["doc"] for p in d["parameters"])


def test_unknown_config_keys_are_refused_naming_the_key_and_the_allowed_ones() -> None:
    with pytest.raises(
        ConfigError, match=r"chunking.child.RECURSIVE: unknown key 'max_char'; allowed keys are: max_chars"
    ):
        build_plan("CHILD:RECURSIVE", None, {"RECURSIVE": {"max_char": 500}})


@pytest.mark.parametrize(
    ("snapshot", "named", "numeric"),
    [
        ("PARENT:1;CHILD:3,2", "PARENT:STRUCTURE;CHILD:SEMANTIC,RECURSIVE", "PARENT:1;CHILD:3,2"),
        (
            "PARENT:STRUCTURE;CHILD:SEMANTIC,RECURSIVE",
            "PARENT:STRUCTURE;CHILD:SEMANTIC,RECURSIVE",
            "PARENT:1;CHILD:3,2",
        ),
        ("parent:2 ; child:4,2", "PARENT:RECURSIVE;CHILD:LLM,RECURSIVE", "PARENT:2;CHILD:4,2"),
        ("CHILD:PROPOSITION", "CHILD:PROPOSITION", "CHILD:PROPOSITION"),
    ],
)
def test_snapshots_parse_and_round_trip(snapshot: str, named: str, numeric: str) -> None:
    plan = build_plan(snapshot)
    assert plan.snapshot() == named
    assert plan.snapshot(numeric=True) == numeric
    assert build_plan(plan.snapshot(numeric=True)).snapshot() == named


def test_roles_and_parent_defaults_follow_seed_003() -> None:
    plan = build_plan("PARENT:1,2;CHILD:3,2")
    assert [s.role for s in plan.parent] == [Role.PRIMARY, Role.FALLBACK]
    assert [s.role for s in plan.child] == [Role.PRIMARY, Role.FALLBACK]
    assert plan.parent[1].config.max_chars == 2200 and plan.parent[1].config.overlap_chars == 180
    assert plan.child[1].config.max_chars == 800 and plan.child[1].config.overlap_chars == 120
    assert plan.child[0].config.min_chars == 240 and plan.child[0].config.max_chars == 700
    # what a strategy knows about its place in a plan lives on the strategy
    assert registry.get("SEMANTIC").parent_defaults == {"min_chars": 480, "max_chars": 1600}
    assert build_plan("PARENT:SEMANTIC;CHILD:2").parent[0].config.max_chars == 1600


@pytest.mark.parametrize(
    ("snapshot", "message"),
    [
        ("", r"is empty"),
        ("PARENT:1", r"has no CHILD pipeline"),
        ("PARENT:9;CHILD:2", r"unknown strategy '9'"),
        ("CHILD:2;CHILD:3", r"CHILD appears twice"),
        ("KID:2", r"'KID' is not a pipeline"),
    ],
)
def test_bad_snapshots_are_refused(snapshot: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_snapshot(snapshot)


def test_cleanup_drops_blank_pieces_and_repeats_keeping_order() -> None:
    a, b = Piece("x", 0, 1), Piece("y", 2, 3)
    assert cleanup([a, Piece("  ", 1, 2), b, Piece("x", 0, 1), Piece("x", 0, 1, section_path="S")]) == [
        a,
        b,
        Piece("x", 0, 1, section_path="S"),
    ]


def test_cleanup_keeps_different_texts_at_one_position() -> None:
    # same section path and start, different text: both kept; a repeat of either dropped
    a, b, c = Piece("abc", 0, 3), Piece("ab", 0, 2), Piece("a", 0, 1)
    assert cleanup([a, b, Piece("abc", 0, 3), c, Piece("ab", 0, 2), Piece("a", 0, 1)]) == [a, b, c]


def test_each_step_feeds_the_next_and_marks_what_it_cut() -> None:
    doc = "# A\n" + "Alpha text. " * 100 + "\n# B\nshort\n"
    plan = build_plan(
        "CHILD:STRUCTURE,RECURSIVE", child_settings={"RECURSIVE": {"max_chars": 800, "overlap_chars": 120}}
    )
    pieces = run_steps(plan.child, [Piece(doc, 0, len(doc))], ctx_for(doc))
    assert [p.strategy for p in pieces][-1] == "STRUCTURE"  # short section passes RECURSIVE unchanged
    assert {p.strategy for p in pieces[:-1]} == {"RECURSIVE"}
    assert all(len(p.text) <= 800 for p in pieces)


ZH_EN = (
    "# 运维手册\n\n## CPU 高负载\n\n"
    + "CPU 使用率持续超过 85%，交易延迟升高。先用 top 定位进程。" * 40
    + "\n\n## Memory\n\n"
    + "Memory grows when the cache is not bounded. Restart the worker. " * 60
)


@pytest.mark.parametrize(
    "snapshot", ["PARENT:1;CHILD:3,2", "PARENT:2;CHILD:2", "PARENT:STRUCTURE,RECURSIVE;CHILD:SLIDING_WINDOW", "CHILD:2"]
)
def test_every_child_lies_inside_its_parent_and_fits_the_model(snapshot: str) -> None:
    ctx = ctx_for(ZH_EN)
    doc = chunk(snapshot, ZH_EN, ctx)
    assert doc.parents and doc.children
    assert [c.chunk_index for c in doc.children] == list(range(len(doc.children)))
    assert [p.parent_index for p in doc.parents] == list(range(len(doc.parents)))
    by_id = {p.parent_id: p for p in doc.parents}
    assert set(by_id) == {c.parent_id for c in doc.children}  # every parent has a child
    for c in doc.children:
        p = by_id[c.parent_id]
        assert ZH_EN[p.start_offset : p.end_offset] == p.text
        assert p.start_offset + p.overlap_chars <= c.start_offset < c.end_offset <= p.end_offset
        assert ZH_EN[c.start_offset : c.end_offset] == c.text
        assert c.token_count == ctx.token_counter.count(c.text) <= ctx.token_counter.max_tokens
    assert chunk(snapshot, ZH_EN) == doc  # deterministic: same ids, same records


def test_parent_sections_give_children_their_section_path() -> None:
    doc = chunk("PARENT:1;CHILD:2", ZH_EN)
    assert [p.section_path for p in doc.parents] == ["运维手册 > CPU 高负载", "运维手册 > Memory"]
    assert {c.section_path for c in doc.children} == {"运维手册 > CPU 高负载", "运维手册 > Memory"}


_fusable = st.lists(
    st.sampled_from(
        [
            "# A\n",
            "## B\n",
            "### C\n",
            "第一章 总则\n",
            "一、背景\n",
            "Title\n=====\n",
            "```\n# no\n```\n",
            "Alpha text. " * 30,
            "中文句子。" * 40,
            "\n\n",
            "short line\n",
            "1. item\n",
            "x" * 900,
        ]
    ),
    max_size=25,
).map("".join)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=_fusable, tokens=st.booleans(), overlap=st.booleans(), pieces=st.integers(1, 3))
# no heading: STRUCTURE's overlapping fallback chunks, re-cut by RECURSIVE, repeat pieces
@example(doc="x" * 2700 + "# A\n" + "x" * 900, tokens=False, overlap=False, pieces=1)
def test_fused_structure_then_recursive_equals_the_two_steps_apart(
    doc: str, tokens: bool, overlap: bool, pieces: int
) -> None:
    """run_steps fuses STRUCTURE -> RECURSIVE into one pass; the result must not change,
    whatever the sizes, the unit, and overlapping input pieces (repeats for the cleanup)."""
    recursive = (
        {"size_unit": "tokens", "max_tokens": 64, "overlap_tokens": 8 if overlap else 0}
        if tokens
        else {"max_chars": 300, "overlap_chars": 60 if overlap else 0}
    )
    plan = build_plan("CHILD:STRUCTURE,RECURSIVE", child_settings={"RECURSIVE": recursive})
    third = len(doc) // 3
    seeds = [Piece(doc[i * third :], i * third, len(doc), section_path="S", overlap_chars=0) for i in range(pieces)]
    seeds += [Piece(doc, 0, len(doc))] if pieces > 1 else []  # overlapping inputs: sections repeat
    fused = run_steps(plan.child, seeds, ctx_for(doc))
    apart = run_steps(plan.child, seeds, ctx_for(doc), fuse=False)
    assert fused == apart
    assert {p.strategy for p in fused} <= {"STRUCTURE", "RECURSIVE"}


def test_a_step_builds_its_strategy_once_and_compares_by_its_fields() -> None:
    import dataclasses

    step = build_plan("CHILD:RECURSIVE").child[0]
    assert step.build() is step.build()  # the pipeline asks once per document
    assert dataclasses.replace(step) == step and hash(dataclasses.replace(step)) == hash(step)
