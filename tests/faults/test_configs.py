"""Configurations an attacker (or a generator) writes (issue 40): a 535-byte kb.yaml whose
plan of 250 parent steps made the version name too long for a file name crashed `corpus
index` with a traceback, and stopped every other KB from being indexed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.versioning import MAX_VERSION_CHARS, strategy_version
from faults.test_snapshots import CORPUS, _env

pytestmark = pytest.mark.slow


def _long_plan(steps: int) -> str:
    return "chunking:\n  plan: 'PARENT:" + ",".join(["RECURSIVE"] * steps) + ";CHILD:RECURSIVE'\n"


def test_a_plan_of_many_steps_gets_a_short_unique_version_name(tmp_path: Path) -> None:
    names = set()
    for steps in (240, 250):
        kb = tmp_path / f"kb{steps}"
        kb.mkdir()
        (kb / "kb.yaml").write_text(_long_plan(steps))
        v = strategy_version(resolve_kb(kb))
        assert len(v) <= MAX_VERSION_CHARS and v.startswith("p") and v.replace("-", "").isalnum()
        names.add(v)
    assert len(names) == 2  # (cut names stay apart: the digest hashes the whole plan)


def test_one_kbs_bad_or_long_config_never_stops_the_others(tmp_path: Path) -> None:
    home = tmp_path / "corpus"
    for name, yaml in (("long", _long_plan(250)), ("bad", "chunking:\n  plna: x\n"), ("good", "")):
        d = home / "kbs" / name
        d.mkdir(parents=True)
        (d / "a.md").write_text(f"# {name}\n\nThe harbor opens at nine. Ships leave at noon.\n")
        if yaml:
            (d / "kb.yaml").write_text(yaml)
    r = subprocess.run([CORPUS, "index", "--json"], env=_env(home), capture_output=True, text=True, timeout=900)
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.returncode == 1  # (one KB was refused)
    out = {s["kb"]: s for s in json.loads(r.stdout)}
    assert out["bad"]["status"] == "invalid" and "plna" in out["bad"]["error"]
    assert out["good"]["status"] == "ok" and out["good"]["child_chunks"] >= 1
    assert out["long"]["status"] == "ok" and len(out["long"]["strategy_version"]) <= MAX_VERSION_CHARS


def test_an_invalid_folder_name_and_an_empty_kb_are_reported_and_the_others_indexed(tmp_path: Path) -> None:
    """Issue 41: a KB folder named `My Docs` is reported for that KB (the rule named) while
    the others are indexed; a KB with no document is not "ok" but says where it looked and
    what it skipped; skipped files are counted by reason and extension (`--verbose`: each)."""
    home = tmp_path / "corpus"
    kbs = home / "kbs"
    for name in ("My Docs", "good", "empty"):
        (kbs / name).mkdir(parents=True)
    for name in ("My Docs", "good"):
        (kbs / name / "a.md").write_text("# Harbor\n\nThe harbor opens at nine. Ships leave at noon.\n")
    for i in range(3):
        (kbs / "good" / f"data{i}.json").write_text("{}\n")
        (kbs / "empty" / f"e{i}.json").write_text("{}\n")
    (kbs / "good" / "feed.xml").write_text("<feed/>\n")
    (kbs / "empty" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n")  # (pictures: read through documents)
    r = subprocess.run([CORPUS, "index", "--json"], env=_env(home), capture_output=True, text=True, timeout=900)
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.returncode == 1  # (one KB refused, one empty)
    out = {s["kb"]: s for s in json.loads(r.stdout)}
    assert out["My Docs"]["status"] == "invalid" and "lower-case letters" in out["My Docs"]["error"]
    assert out["good"]["status"] == "ok" and out["good"]["child_chunks"] >= 1
    empty = out["empty"]
    assert empty["status"] == "empty" and empty["documents"] == 0
    assert f"no documents found in {kbs / 'empty'}; 3 files skipped: 3 .json: not a supported format" in empty["error"]
    r = subprocess.run([CORPUS, "index"], env=_env(home), capture_output=True, text=True, timeout=900)
    assert r.returncode == 1
    assert "empty @ " in r.stdout and ": EMPTY — no documents found in" in r.stdout
    assert "My Docs: INVALID CONFIGURATION, not indexed — knowledge base name 'My Docs' is not allowed" in r.stdout
    assert "active: None" not in r.stdout and "; active: none yet" in r.stdout
    assert "    4 files skipped (--verbose lists them):\n      3 .json, 1 .xml: not a supported format" in r.stdout
    assert "data0.json" not in r.stdout
    r = subprocess.run([CORPUS, "index", "--kb", "good", "--verbose"], env=_env(home), capture_output=True, text=True)
    assert r.returncode == 0 and "    skipped: data0.json: not a supported format" in r.stdout, r.stdout
    assert "feed.xml" in r.stdout and "files skipped (--verbose" not in r.stdout
