"""Versions that never lose the good one (issue 40): ``corpus activate`` refuses a version
whose build did not complete, naming what is missing.

The first build of a KB is killed (SIGKILL, ``corpus index`` as users run it) after its
search table was written and just before it was published: a table on disk, no snapshot,
no record of a finished build. ``corpus versions`` must not call it built, and ``corpus
activate`` must refuse it (it accepted it: the table folder existed)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.versions import active_version, known_versions
from faults.test_snapshots import CORPUS, _env, _index, _kill_hook, _write_kb

pytestmark = pytest.mark.slow


def _corpus(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CORPUS, *args], env=_env(home), capture_output=True, text=True, timeout=300)


def test_a_version_whose_first_build_was_killed_is_not_built_and_cannot_be_activated(tmp_path: Path) -> None:
    home = tmp_path / "corpus"
    _write_kb(home)
    killed = _index(home, _kill_hook(home, "snapshot"))
    assert killed.returncode != 0
    layout = Layout(home)
    [version] = known_versions(layout, "ops")
    assert layout.search_table_dir("ops", version).is_dir()  # (the table was written)
    assert active_version(layout, "ops") is None

    listed = json.loads(_corpus(home, "versions", "--kb", "ops", "--json").stdout)
    assert [(v["strategy_version"], v["built"]) for v in listed] == [(version, False)]
    refused = _corpus(home, "activate", "--kb", "ops", version)
    assert refused.returncode != 0
    assert "did not finish" in refused.stderr and version in refused.stderr
    assert active_version(layout, "ops") is None

    done = _index(home)  # the next run builds it whole; then it can be activated
    assert done.returncode == 0, done.stderr
    assert active_version(layout, "ops") == version
    assert _corpus(home, "activate", "--kb", "ops", version).returncode == 0
