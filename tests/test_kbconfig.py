"""kb.yaml: defaults, what is read, and errors that name the file, key and value."""

from __future__ import annotations

from pathlib import Path

import pytest

from corpus_pipeline.errors import ConfigError
from corpus_pipeline.globs import match_glob
from corpus_pipeline.kbconfig import load_kb_config, resolve_kb


def _kb(tmp_path: Path, yaml_text: str | None, name: str = "kb1") -> Path:
    d = tmp_path / name
    d.mkdir()
    if yaml_text is not None:
        (d / "kb.yaml").write_text(yaml_text, encoding="utf-8")
    return d


@pytest.mark.parametrize("yaml_text", [None, "", "# only a comment\n"])
def test_missing_or_empty_kb_yaml_takes_every_default(tmp_path, yaml_text):
    kb = resolve_kb(_kb(tmp_path, yaml_text))
    assert kb.plan.snapshot() == "PARENT:STRUCTURE;CHILD:SEMANTIC,RECURSIVE"
    parent, semantic, child = kb.plan.parent[0].config, kb.plan.child[0].config, kb.plan.child[1].config
    # a document without headings falls back to seed 003's parent sizes
    assert (parent.fallback_max_chars, parent.fallback_overlap_chars) == (2200, 180)
    assert semantic.similarity == "jaccard"  # no model call to find the breakpoints
    # children are embedded: sized in the model's tokens unless the KB says otherwise
    assert (child.size_unit, child.max_tokens, child.overlap_tokens) == ("tokens", 240, 32)
    assert kb.config.embedding.model == "multilingual-e5-small"
    assert kb.config.include == ["**/*"]


def test_plan_and_per_strategy_settings_are_read(tmp_path):
    kb = resolve_kb(
        _kb(
            tmp_path,
            "chunking:\n"
            "  plan: 'PARENT:2;CHILD:2'\n"
            "  parent: {RECURSIVE: {max_chars: 3000, overlap_chars: 200}}\n"
            "  child: {recursive: {max_chars: 500, overlap_chars: 50}}\n",
        )
    )
    assert kb.plan.snapshot(numeric=True) == "PARENT:2;CHILD:2"
    assert kb.plan.parent[0].config.max_chars == 3000
    assert kb.plan.child[0].config.to_dict()["max_chars"] == 500
    assert kb.plan.child[0].config.size_unit == "chars"  # a size setting of its own: no token default


def test_an_unknown_top_level_key_names_the_key_and_the_file(tmp_path):
    d = _kb(tmp_path, "descripton: typo\n")
    with pytest.raises(ConfigError, match=r"kb1/kb\.yaml: unknown key 'descripton'; allowed here: description"):
        resolve_kb(d)


def test_an_unknown_nested_key_names_its_full_path(tmp_path):
    d = _kb(tmp_path, "chunking:\n  plann: 'PARENT:1;CHILD:2'\n")
    with pytest.raises(
        ConfigError, match=r"unknown key 'chunking\.plann'; allowed here: plan, parent, child, overrides"
    ):
        resolve_kb(d)


def test_an_unknown_strategy_setting_is_refused_with_the_allowed_keys(tmp_path):
    d = _kb(tmp_path, "chunking:\n  child: {RECURSIVE: {max_char: 500}}\n")
    with pytest.raises(
        ConfigError, match=r"chunking\.child\.RECURSIVE: unknown key 'max_char'; allowed keys are: max_chars"
    ):
        resolve_kb(d)


@pytest.mark.parametrize(
    ("yaml_text", "hint"),
    [
        ("chunkng:\n  plan: 'PARENT:1;CHILD:2'\n", "unknown key 'chunkng'; allowed here: description, include"),
        ("embedding: {modle: e5-small}\n", "unknown key 'embedding.modle'"),
        ("chunking:\n  child: {RECURSIVE: {max_char: 500}}\n", "unknown key 'max_char'"),
    ],
    ids=["top-level", "nested", "strategy-setting"],
)
def test_an_unknown_key_is_answered_with_the_nearest_allowed_one(tmp_path, yaml_text, hint):
    """Issue 41: a kb.yaml key typo gets "did you mean", as a KB name does."""
    with pytest.raises(ConfigError) as err:
        resolve_kb(_kb(tmp_path, yaml_text))
    near = {"top-level": "chunking", "nested": "model", "strategy-setting": "max_chars"}
    message = str(err.value)
    assert hint in message
    assert any(f"Did you mean {w!r}?" in message for w in near.values()), message
    assert message.count("Did you mean") == 1


def test_an_unknown_key_far_from_every_allowed_one_gets_no_guess(tmp_path):
    with pytest.raises(ConfigError) as err:
        resolve_kb(_kb(tmp_path, "zzzzqq: 1\n"))
    assert "unknown key 'zzzzqq'" in str(err.value) and "Did you mean" not in str(err.value)


def test_an_out_of_range_value_names_key_value_and_range(tmp_path):
    d = _kb(tmp_path, "chunking:\n  child: {RECURSIVE: {max_chars: 50}}\n")
    with pytest.raises(
        ConfigError, match=r"chunking\.child\.RECURSIVE\.max_chars = 50 is out of range: allowed 100\.\.8000"
    ):
        resolve_kb(d)


def test_overlap_over_half_the_size_is_refused(tmp_path):
    d = _kb(tmp_path, "chunking:\n  child: {RECURSIVE: {max_chars: 400, overlap_chars: 300}}\n")
    with pytest.raises(
        ConfigError, match=r"overlap_chars = 300 is more than half of max_chars = 400; allowed 0\.\.200"
    ):
        resolve_kb(d)


def test_an_unknown_strategy_in_the_plan_lists_the_valid_ones(tmp_path):
    d = _kb(tmp_path, "chunking:\n  plan: 'PARENT:RECURSIV;CHILD:RECURSIVE'\n")
    with pytest.raises(ConfigError, match=r"unknown strategy 'RECURSIV'; valid strategies: .*RECURSIVE \(2\)"):
        resolve_kb(d)


def test_invalid_yaml_is_reported_with_the_file(tmp_path):
    d = _kb(tmp_path, "chunking: [unclosed\n")
    with pytest.raises(ConfigError, match=r"kb1/kb\.yaml: not valid YAML"):
        resolve_kb(d)


def test_a_kb_folder_name_that_cannot_be_a_partition_key_is_refused(tmp_path):
    d = _kb(tmp_path, None, name="My KB|2")
    with pytest.raises(ConfigError, match=r"knowledge base name 'My KB\|2' is not allowed"):
        resolve_kb(d)


def test_document_overrides_beat_the_kb_plan_first_match_wins(tmp_path):
    kb = resolve_kb(
        _kb(
            tmp_path,
            "chunking:\n"
            "  plan: 'PARENT:RECURSIVE;CHILD:RECURSIVE'\n"
            "  child: {RECURSIVE: {max_chars: 600, overlap_chars: 60}}\n"
            "  overrides:\n"
            "    - match: 'contracts/**/*.md'\n"
            "      child: {RECURSIVE: {max_chars: 300, overlap_chars: 30}}\n"
            "    - match: '**/*.md'\n"
            "      plan: 'CHILD:RECURSIVE'\n",
        )
    )
    plan, match = kb.plan_for("contracts/2024/a.md")
    assert match == "contracts/**/*.md" and plan.child[0].config.max_chars == 300
    plan, match = kb.plan_for("notes.md")
    assert match == "**/*.md" and plan.parent == () and plan.child[0].config.max_chars == 600
    plan, match = kb.plan_for("notes.txt")
    assert match is None and plan.child[0].config.max_chars == 600


@pytest.mark.parametrize(
    ("path", "pattern", "expected"),
    [
        ("a.md", "**/*.md", True),
        ("x/y/a.md", "**/*.md", True),
        ("contracts/a.pdf", "contracts/**/*.pdf", True),
        ("contracts/2024/a.pdf", "contracts/**/*.pdf", True),
        ("other/a.pdf", "contracts/**/*.pdf", False),
        ("a.txt", "*.md", False),
    ],
)
def test_globs_match_like_gitignore_double_star(path, pattern, expected):
    assert match_glob(path, pattern) is expected


def test_an_override_changes_only_the_keys_it_sets_merged_into_the_kbs(tmp_path):
    kb = resolve_kb(
        _kb(
            tmp_path,
            "chunking:\n"
            "  plan: 'PARENT:RECURSIVE;CHILD:RECURSIVE'\n"
            "  child: {RECURSIVE: {max_chars: 500, overlap_chars: 100}}\n"
            "  parent: {RECURSIVE: {max_chars: 3000}}\n"
            "  overrides:\n"
            "    - match: '*.md'\n"
            "      child: {RECURSIVE: {overlap_chars: 20}}\n",
        )
    )
    plan, _ = kb.plan_for("notes.md")
    child = plan.child[0].config
    assert (child.max_chars, child.overlap_chars, child.size_unit) == (500, 20, "chars")  # max_chars kept
    assert plan.parent[0].config.max_chars == 3000  # the KB's parent settings apply too
    assert kb.plan_for("notes.txt")[0].child[0].config.overlap_chars == 100


def test_an_override_is_valid_or_not_once_merged_into_the_kbs_settings(tmp_path):
    # {max_chars: 200} alone would clash with the default overlap of 120; merged it is fine
    ok = resolve_kb(
        _kb(
            tmp_path,
            "chunking:\n  plan: 'PARENT:RECURSIVE;CHILD:RECURSIVE'\n  child: {RECURSIVE: {overlap_chars: 50}}\n"
            "  overrides: [{match: '*.md', child: {RECURSIVE: {max_chars: 200}}}]\n",
        )
    )
    assert ok.plan_for("a.md")[0].child[0].config.max_chars == 200
    with pytest.raises(ConfigError, match=r"chunking\.overrides\[0\]\.child\.RECURSIVE\.overlap_chars = 300"):
        resolve_kb(
            _kb(
                tmp_path,
                "chunking:\n  child: {RECURSIVE: {max_chars: 500}}\n"
                "  overrides: [{match: '*.md', child: {RECURSIVE: {overlap_chars: 300}}}]\n",
                name="kb2",
            )
        )
    with pytest.raises(ConfigError, match=r"overrides\[0\]\.child\.RECURSIVE: unknown key 'overlap'"):
        resolve_kb(
            _kb(tmp_path, "chunking:\n  overrides: [{match: '*.md', child: {RECURSIVE: {overlap: 3}}}]\n", name="kb3")
        )


def test_a_key_written_twice_is_refused_with_both_lines(tmp_path):
    d = tmp_path / "dup"
    d.mkdir()
    (d / "kb.yaml").write_text(
        "chunking:\n  plan: 'PARENT:1;CHILD:2'\nembedding: {batch_size: 8}\nchunking:\n  plan: 'PARENT:2;CHILD:2'\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match=r"kb.yaml: not valid YAML: key 'chunking' appears twice .*lines 1 and 4"):
        load_kb_config(d)
    (d / "kb.yaml").write_text("search: {final_top_k: 3, final_top_k: 4}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"key 'final_top_k' appears twice"):
        load_kb_config(d)


def test_an_alias_bomb_is_refused_at_once_with_a_short_message(tmp_path):
    d = tmp_path / "bomb"
    d.mkdir()
    lines = ['a: &a ["xxxxxxxxxx"]'] + [
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}]" for i in range(9)
    ]
    (d / "kb.yaml").write_text("\n".join(lines) + "\ndescription: *j\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"aliases \(\*name\) are not allowed") as err:
        load_kb_config(d)
    assert len(str(err.value)) < 2000


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[" * 100_000 + "]" * 100_000, r"nested too deeply to read"),  # a RecursionError escaped before
        ("description: " + "x" * 1_100_000 + "\n", r"over the 1,000,000 a kb.yaml may have"),
    ],
    ids=["nesting-bomb", "huge-file"],
)
def test_config_bombs_are_refused_with_a_config_error(tmp_path, content, message):
    d = tmp_path / "bomb"
    d.mkdir()
    (d / "kb.yaml").write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError, match=message) as err:
        load_kb_config(d)
    assert len(str(err.value)) < 2000


def test_a_long_bad_value_is_quoted_short(tmp_path):
    d = tmp_path / "long"
    d.mkdir()
    (d / "kb.yaml").write_text("max_file_mb: '" + "9" * 100_000 + "x'\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"max_file_mb = '9{50}.*… \(100003 characters\)") as err:
        load_kb_config(d)
    assert len(str(err.value)) < 1000


def test_an_invalid_plan_names_the_file_and_the_key(tmp_path):
    d = _kb(tmp_path, "chunking:\n  plan: 'PARENT:NOPE;CHILD:2'\n")
    with pytest.raises(
        ConfigError, match=r"kb1/kb.yaml: chunking.plan: plan 'PARENT:NOPE;CHILD:2': unknown strategy 'NOPE'"
    ):
        resolve_kb(d)


@pytest.mark.parametrize(
    ("model", "what"), [("/etc", "is not a sentence-transformers model folder"), ("/no/such", "does not exist")]
)
def test_a_model_path_that_is_no_model_folder_is_refused_before_any_run(tmp_path, model, what):
    d = _kb(tmp_path, f"embedding: {{model: {model}}}\n")
    with pytest.raises(ConfigError, match=rf"kb.yaml: embedding.model = '{model}' {what}"):
        resolve_kb(d)


ENDPOINT_SECTIONS = {  # section -> its URL key (rerank's is the endpoint itself)
    "embedding": "base_url",
    "llm": "base_url",
    "vision": "base_url",
    "rerank": "url",
}


@pytest.mark.parametrize("section", sorted(ENDPOINT_SECTIONS))
def test_every_endpoint_section_checks_its_url_and_key_variable_alike(tmp_path, section):
    """One declaration (``corpus_pipeline.endpoints``) for the keys of the four sections that
    call an endpoint: the same checks everywhere (vision's key variable was not checked)."""
    key = ENDPOINT_SECTIONS[section]
    head = f"{section}:\n" + ("  provider: openai\n  model: m\n" if section == "embedding" else "  model: m\n")
    cases = {
        "creds": (f"  {key}: https://user:sk-secret@gpu-box:8000/v1\n", "holds credentials"),
        "scheme": (f"  {key}: file:///etc/passwd\n", "is not an http\\(s\\) URL"),
        "keyvar": ("  api_key_env: 'MY-KEY; rm'\n", "api_key_env"),
        "timeout": ("  timeout_s: 0\n", "timeout_s"),
    }
    for n, (line, message) in cases.items():
        with pytest.raises(ConfigError, match=message):
            resolve_kb(_kb(tmp_path, head + line, name=f"{section}-{n}"))
    ok = resolve_kb(_kb(tmp_path, head + f"  {key}: http://127.0.0.1:8000/v1\n", name=f"{section}-ok"))
    assert getattr(getattr(ok.config, section), key) == "http://127.0.0.1:8000/v1"
