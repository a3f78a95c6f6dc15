"""The ``quality:`` section of kb.yaml, and the thresholds derived from the plan and model."""

from __future__ import annotations

from pathlib import Path

import pytest

from corpus_pipeline.errors import ConfigError
from corpus_pipeline.kbconfig import KBConfig, kb_from_config, load_kb_config
from corpus_pipeline.quality.bounds import (
    model_dimension,
    plan_limits,
    resolve_thresholds,
)
from corpus_pipeline.quality.checks import severity_of
from corpus_pipeline.versioning import strategy_version


def _kb(tmp_path: Path, yaml_text: str):
    d = tmp_path / "kb1"
    d.mkdir(exist_ok=True)
    (d / "kb.yaml").write_text(yaml_text, encoding="utf-8")
    return kb_from_config(d, load_kb_config(d))


def test_defaults_come_from_the_plan_and_the_embedding_model(tmp_path):
    kb = _kb(
        tmp_path,
        "chunking:\n  plan: 'PARENT:RECURSIVE;CHILD:RECURSIVE'\n  child: {RECURSIVE: {max_chars: 600, overlap_chars: 60}}\n",
    )
    th = resolve_thresholds(kb)
    assert th.token_limit == 507  # multilingual-e5-small: 512 - <s>, </s> and the 3 tokens of "passage: "
    assert th.embedding_dimension == 384
    assert (th.child.default.max_chars, th.child.default.min_chars) == (600, 60)
    assert th.parent.default.max_chars == 2200  # seed 003's parent default
    assert th.child.char_count == {"p50": (30, None), "p95": (None, 600)}
    assert th.child.token_count == {"p95": (None, 507)}
    assert severity_of(th, "child_token_limit") == "ERROR" and severity_of(th, "child_quantiles") == "WARN"


@pytest.mark.parametrize(
    ("plan", "child", "expected"),
    [
        ("PARENT:RECURSIVE;CHILD:RECURSIVE", {"RECURSIVE": {"size_unit": "tokens", "max_tokens": 200}}, (None, 200)),
        (
            "PARENT:RECURSIVE;CHILD:SLIDING_WINDOW",
            {"SLIDING_WINDOW": {"chunk_size": 400, "chunk_overlap": 40}},
            (600, None),
        ),
        (
            "PARENT:RECURSIVE;CHILD:STRUCTURE,RECURSIVE",
            {"RECURSIVE": {"max_chars": 500, "overlap_chars": 50}},
            (500, None),
        ),
        ("PARENT:RECURSIVE;CHILD:STRUCTURE", {}, (2200, None)),  # no child bound: the parent's
        ("CHILD:STRUCTURE", {}, (None, None)),
    ],
)
def test_a_pipeline_is_bounded_by_its_last_step_that_declares_a_size(tmp_path, plan, child, expected):
    cfg = KBConfig.model_validate({"chunking": {"plan": plan, "child": child}})
    d = tmp_path / "kb2"
    d.mkdir()
    kb = kb_from_config(d, cfg)
    lim = plan_limits(kb.plan, "child")
    assert (lim.max_chars, lim.max_tokens) == expected


def test_kb_yaml_thresholds_replace_the_derived_ones_and_overrides_get_their_own_plan_bounds(tmp_path):
    kb = _kb(
        tmp_path,
        "chunking:\n"
        "  child: {RECURSIVE: {max_chars: 800, overlap_chars: 120}}\n"
        "  overrides:\n"
        "    - match: 'faq/**'\n"
        "      child: {RECURSIVE: {max_chars: 300, overlap_chars: 30}}\n"
        "quality:\n"
        "  token_limit: 200\n"
        "  child:\n"
        "    min_chars: 25\n"
        "    char_count: {p5: [20, null]}\n"
        "  severity: {child_quantiles: error, child_duplicate_text: warn}\n",
    )
    th = resolve_thresholds(kb)
    assert th.token_limit == 200
    assert th.child.limits_for("faq/a.md").max_chars == 300
    assert th.child.limits_for("guide.md").max_chars == 800
    assert th.child.limits_for("guide.md").min_chars == 25
    assert th.child.char_count["p5"] == (20, None) and th.child.char_count["p95"] == (None, 800)
    assert severity_of(th, "child_quantiles") == "ERROR"


def test_quality_settings_never_change_the_strategy_version(tmp_path):
    plain = _kb(tmp_path, "chunking:\n  child: {RECURSIVE: {max_chars: 600, overlap_chars: 60}}\n")
    (tmp_path / "kb1" / "kb.yaml").write_text(
        "chunking:\n  child: {RECURSIVE: {max_chars: 600, overlap_chars: 60}}\n"
        "quality: {token_limit: 100, child: {max_chars: 10}, severity: {child_quantiles: error}}\n",
        encoding="utf-8",
    )
    tuned = kb_from_config(tmp_path / "kb1", load_kb_config(tmp_path / "kb1"))
    assert strategy_version(plain) == strategy_version(tuned)


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        ("quality: {tokn_limit: 100}\n", "unknown key 'quality.tokn_limit'"),
        ("quality: {child: {max_char: 100}}\n", "unknown key 'quality.child.max_char'"),
        ("quality: {token_limit: 3}\n", "quality.token_limit = 3"),
        ("quality: {child: {small_share: 1.5}}\n", "quality.child.small_share = 1.5"),
        ("quality: {child: {char_count: {p50: [500, 100]}}}\n", "min 500 is larger than max 100"),
        ("quality: {child: {min_chars: 900, max_chars: 100}}\n", "min_chars = 900 is larger than max_chars = 100"),
        ("quality: {severity: {child_token_limt: warn}}\n", "unknown check 'child_token_limt'"),
        ("quality: {severity: {child_token_limit: fatal}}\n", "quality.severity.child_token_limit"),
    ],
)
def test_invalid_quality_settings_name_the_key_and_the_allowed_values(tmp_path, yaml_text, message):
    d = tmp_path / "kb3"
    d.mkdir()
    (d / "kb.yaml").write_text(yaml_text, encoding="utf-8")
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("[", r"\[")):
        load_kb_config(d)


def test_a_token_limit_above_the_models_is_refused(tmp_path):
    kb = _kb(tmp_path, "quality: {token_limit: 600}\n")
    with pytest.raises(ConfigError, match=r"quality.token_limit = 600 is above the limit .* \(507 tokens\)"):
        resolve_thresholds(kb)


def test_the_vector_dimension_is_read_from_the_model_folder():
    assert model_dimension("all-MiniLM-L6-v2") == 384
    assert model_dimension("/no/such/model") is None
