"""The corpus command as a script meets it: --version, every option explained, an unknown
KB named with the ones there are (and the nearest), errors as JSON under --json."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from corpus_pipeline.cli import build_parser

CORPUS = str(Path(sys.executable).with_name("corpus"))


def _run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CORPUS_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    return subprocess.run([CORPUS, *args], env=env, capture_output=True, text=True, timeout=120)


def test_every_option_of_every_command_has_help():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = [
        f"{name} {a.option_strings or a.dest}"
        for name, sp in sub.choices.items()
        for a in sp._actions
        if not isinstance(a, argparse._HelpAction) and not a.help
    ]
    assert missing == []
    assert all(sub._choices_actions), "every command has a help line"


def test_version(corpus_home):
    r = _run(corpus_home, "--version")
    assert r.returncode == 0 and r.stdout.startswith("corpus 0.")


@pytest.mark.parametrize(
    "argv",
    [
        ["search", "anything", "--kb", "product-manul"],
        ["versions", "--kb", "product-manul"],
        ["index", "--kb", "product-manul"],
        ["stats", "--kb", "product-manul"],
    ],
    ids=["search", "versions", "index", "stats"],
)
def test_an_unknown_kb_is_refused_with_the_known_ones_and_the_nearest(corpus_home, argv):
    for name in ("product-manual", "ops-runbook"):
        (corpus_home / "kbs" / name).mkdir()
    r = _run(corpus_home, *argv)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "no knowledge base 'product-manul'" in r.stderr
    assert "Did you mean 'product-manual'?" in r.stderr and "ops-runbook, product-manual" in r.stderr


def test_errors_are_json_under_json(corpus_home):
    r = _run(corpus_home, "search", "anything", "--kb", "nope", "--json")
    assert r.returncode == 2
    err = json.loads(r.stdout)["error"]
    assert err["code"] == "invalid_configuration" and err["command"] == "search" and "'nope'" in err["message"]
    r = _run(corpus_home, "activate", "--kb", "nope", "v1", "--json")
    assert r.returncode == 2 and json.loads(r.stdout)["error"]["command"] == "activate"


@pytest.mark.parametrize("argv", [["strategies"], ["versions", "--kb", "kb"], ["versions", "--kb", "kb", "--json"]])
def test_a_closed_pipe_ends_quietly_with_sigpipes_code(corpus_home, argv):
    """Issue 41: `corpus ... | head -1` once head has exited: no BrokenPipeError traceback."""
    (corpus_home / "kbs" / "kb").mkdir(parents=True, exist_ok=True)
    read, write = os.pipe()
    os.close(read)
    env = {**os.environ, "CORPUS_HOME": str(corpus_home), "HF_HUB_OFFLINE": "1"}
    try:
        r = subprocess.run([CORPUS, *argv], env=env, stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert r.returncode == 141 and r.stderr == "", r.stderr
