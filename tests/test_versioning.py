"""strategy_version: short, readable, stable, and changed by exactly what shapes chunks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from corpus_pipeline.errors import ConfigError
from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.versions import (
    active_version,
    build_kb,
    current_version,
    known_versions,
    load_version,
    register_version,
    set_active,
)
from corpus_pipeline.versioning import strategy_version


def _version(tmp_path: Path, yaml_text: str, name: str = "kb") -> str:
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    (d / "kb.yaml").write_text(yaml_text, encoding="utf-8")
    return strategy_version(resolve_kb(d))


def test_the_default_version_is_readable_and_short(tmp_path):
    v = _version(tmp_path, "")
    assert re.fullmatch(r"p1-c32-[0-9a-f]{8}", v)  # STRUCTURE parents; SEMANTIC, RECURSIVE children


def test_the_version_is_stable_across_calls_and_folders(tmp_path):
    a = _version(tmp_path, "description: one\n", name="a")
    b = _version(tmp_path, "description: two\ninclude: ['**/*.md']\n", name="b")
    assert a == b  # description and include globs cannot change chunks


@pytest.mark.parametrize(
    "yaml_text",
    [
        "chunking: {child: {RECURSIVE: {max_chars: 700}}}\n",
        "chunking: {plan: 'CHILD:RECURSIVE'}\n",
        "chunking: {overrides: [{match: '*.md', child: {RECURSIVE: {max_chars: 500}}}]}\n",
        "embedding: {model: all-MiniLM-L6-v2}\n",  # another model than the default
    ],
)
def test_anything_that_can_change_chunks_changes_the_version(tmp_path, yaml_text):
    assert _version(tmp_path, yaml_text, name="x") != _version(tmp_path, "", name="y")


def test_registered_versions_reload_their_own_config_after_kb_yaml_changes(tmp_path):
    layout = Layout(tmp_path)
    d = tmp_path / "kbs" / "kb"
    d.mkdir(parents=True)
    (d / "kb.yaml").write_text("chunking: {child: {RECURSIVE: {max_chars: 700}}}\n")
    old = register_version(layout, resolve_kb(d))
    assert current_version(layout, "kb") == old
    (d / "kb.yaml").write_text("chunking: {child: {RECURSIVE: {max_chars: 500}}}\n")
    new = register_version(layout, resolve_kb(d))
    assert old != new and known_versions(layout, "kb") == sorted([old, new])
    assert current_version(layout, "kb") == new  # what kb.yaml yields now
    assert load_version(layout, "kb", old).plan.child[0].config.max_chars == 700
    with pytest.raises(ConfigError, match=r"'nope' is not a version of knowledge base 'kb'"):
        load_version(layout, "kb", "nope")


def test_a_build_takes_what_the_version_does_not_hash_from_kb_yaml_as_it_is_now(tmp_path):
    """A loosened threshold, a moved endpoint or a new key variable applies to the next run
    of the version kb.yaml yields; an older version keeps its strategies and thresholds, and
    takes a moved endpoint only when it names the same vectors."""
    layout = Layout(tmp_path)
    d = tmp_path / "kbs" / "kb"
    d.mkdir(parents=True)
    endpoint = "embedding: {provider: openai, model: acme-embed, base_url: %s, api_key_env: %s}\n"
    (d / "kb.yaml").write_text("quality: {severity: {child_unique: warn}}\n" + endpoint % ("http://a:1/v1", "KEY_A"))
    v = register_version(layout, resolve_kb(d))
    (d / "kb.yaml").write_text("quality: {severity: {child_unique: error}}\n" + endpoint % ("http://b:2/v1", "KEY_B"))
    assert register_version(layout, resolve_kb(d)) == v  # none of it is in the version
    kb = build_kb(layout, "kb", v)
    assert kb.config.quality.severity == {"child_unique": "error"}
    assert (kb.config.embedding.base_url, kb.config.embedding.api_key_env) == ("http://b:2/v1", "KEY_B")
    assert load_version(layout, "kb", v).config.embedding.base_url == "http://a:1/v1"  # the registration

    # kb.yaml moves on to another version: the old one keeps its own plan and thresholds
    (d / "kb.yaml").write_text(
        "chunking: {child: {RECURSIVE: {max_chars: 500}}}\nquality: {severity: {}}\n"
        + endpoint % ("http://c:3/v1", "KEY_C")
    )
    assert register_version(layout, resolve_kb(d)) != v
    old = build_kb(layout, "kb", v)
    assert old.config.quality.severity == {"child_unique": "warn"} and old.plan == load_version(layout, "kb", v).plan
    assert old.config.embedding.base_url == "http://c:3/v1"  # same model, moved endpoint
    # another model now: the old version's vectors need its own
    (d / "kb.yaml").write_text(endpoint.replace("acme-embed", "other-embed") % ("http://d:4/v1", "KEY_D"))
    assert build_kb(layout, "kb", v).config.embedding.base_url == "http://a:1/v1"
    (d / "kb.yaml").write_text("chunking: [not, a, mapping]\n")  # kb.yaml broken: the registration alone
    assert build_kb(layout, "kb", v).config.embedding.base_url == "http://a:1/v1"


def test_the_active_version_is_switched_only_to_a_registered_one(tmp_path):
    layout = Layout(tmp_path)
    d = tmp_path / "kbs" / "kb"
    d.mkdir(parents=True)
    v = register_version(layout, resolve_kb(d))
    assert active_version(layout, "kb") is None
    set_active(layout, "kb", v)
    assert active_version(layout, "kb") == v
    with pytest.raises(ConfigError, match="is not a registered version"):
        set_active(layout, "kb", "p9-c9-00000000")
