"""Versions that never lose the good one (issue 40): retention counts only built versions,
a failed version's partitions go once a newer version is built, and ``corpus doctor``
reports a KB whose kb.yaml yields a version that is not the active one.

Retention used to count every registered version: with ``keep_versions: 2``, a version
that failed its blocking checks took the second place, and the next successful index
retired the only built rollback while keeping the failed one (and its text) forever."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.versions import VERSIONED_ASSETS, active_version, known_versions, list_versions
from faults.test_snapshots import CORPUS, _env, _index, _write_kb

pytestmark = pytest.mark.slow

PLAN = (
    "chunking:\n  plan: PARENT:RECURSIVE;CHILD:RECURSIVE\n"
    "  parent: {{RECURSIVE: {{max_chars: 600, overlap_chars: 0}}}}\n"
    "  child: {{RECURSIVE: {{max_chars: {child}, overlap_chars: 20}}}}\n"
    "retention: {{keep_versions: 2}}\n"
)


def _configure(home: Path, child: int, extra: str = "") -> None:
    (home / "kbs" / "ops" / "kb.yaml").write_text(PLAN.format(child=child) + extra)


def _corpus(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CORPUS, *args], env=_env(home), capture_output=True, text=True, timeout=300)


def _built(layout: Layout, version: str) -> bool:
    return {v["strategy_version"]: v["built"] for v in list_versions(layout, "ops")}[version]


def _new_version(layout: Layout, before: set[str]) -> str:
    [v] = set(known_versions(layout, "ops")) - before
    return v


def _indexed_once(tmp_path: Path) -> tuple[Path, Layout, str]:
    """A home whose KB ``ops`` was indexed once: (home, layout, its built version)."""
    home = tmp_path / "corpus"
    layout = Layout(home)
    _write_kb(home)
    _configure(home, 200)
    assert _index(home).returncode == 0
    [built] = known_versions(layout, "ops")
    return home, layout, built


def test_a_failed_version_never_displaces_the_built_rollback_and_its_partitions_are_purged(tmp_path: Path) -> None:
    home, layout, good = _indexed_once(tmp_path)

    # A new strategy whose children fail the blocking token check: registered, never built.
    _configure(home, 150, "quality: {token_limit: 8}\n")
    failed_run = _index(home)
    assert failed_run.returncode != 0
    failed = _new_version(layout, {good})
    assert active_version(layout, "ops") == good and not _built(layout, failed)
    assert layout.partition_dir("child_chunks", "ops", failed).is_dir()  # (kept to explain the failure)

    # The next strategy builds: the rollback kept is the built one, the failed one purged.
    _configure(home, 250)
    assert _index(home).returncode == 0
    newest = _new_version(layout, {good, failed})
    assert active_version(layout, "ops") == newest
    assert sorted(known_versions(layout, "ops")) == sorted([good, newest])
    assert _built(layout, good)
    for asset in VERSIONED_ASSETS:
        assert not layout.partition_dir(asset, "ops", failed).exists(), asset
    assert not layout.search_table_dir("ops", failed).exists()

    # ... and it can be rolled back to, with no rebuild.
    assert _corpus(home, "activate", "--kb", "ops", good).returncode == 0
    assert active_version(layout, "ops") == good


def test_doctor_reports_a_kb_whose_kb_yaml_changed_since_its_last_index(tmp_path: Path) -> None:
    home, _, built = _indexed_once(tmp_path)

    clean = json.loads(_corpus(home, "doctor", "--json").stdout)
    assert clean["kbs_not_current"] == []

    _configure(home, 300)  # edited, not indexed yet: search still reads `built`
    report = _corpus(home, "doctor", "--json")
    [kb] = json.loads(report.stdout)["kbs_not_current"]
    assert kb["kb"] == "ops" and kb["active"] == built and kb["current"] not in (None, built)
    text = _corpus(home, "doctor").stdout
    assert f"active {built} but kb.yaml yields {kb['current']}" in text and "corpus index --kb ops" in text

    (home / "kbs" / "ops" / "kb.yaml").write_text("chunking: {plan: NOPE}\n")
    [broken] = json.loads(_corpus(home, "doctor", "--json").stdout)["kbs_not_current"]
    assert broken["current"] is None and "kb.yaml" in broken["error"]
