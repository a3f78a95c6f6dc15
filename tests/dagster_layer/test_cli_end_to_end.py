"""`corpus index` then `corpus search`, as a user runs them, on a tiny KB; then Dagster's
own CLI materializes a partition that `corpus index` registered."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]


def _run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, env=env, cwd=REPO, timeout=600)


def test_index_then_search_in_english_and_chinese(tiny_kb, corpus_home):
    env = {**os.environ}
    r = _run(str(BIN / "corpus"), "index", "--kb", "tiny", "--json", env=env)
    assert r.returncode == 0, r.stderr
    [summary] = json.loads(r.stdout)
    assert summary["kb"] == "tiny" and summary["documents"] == 2 and summary["failed_documents"] == []
    assert summary["child_chunks"] > 0 and summary["embedded"] == summary["child_chunks"]
    assert "✓ child_chunks" in r.stderr  # progress per asset and partition
    version = summary["strategy_version"]

    r = _run(str(BIN / "corpus"), "search", "how long are monthly snapshots kept", "--kb", "tiny", "--json", env=env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["strategy_version"] == version
    top = out["results"][0]
    assert "12 months" in top["text"] and top["doc_path"] == "harbor.md"
    assert set(top) >= {"parent_id", "score", "text", "doc_path", "start_offset", "end_offset", "hits"}
    assert set(top["hits"][0]) >= {"chunk_id", "score", "channels", "text"}  # chunk ids, for lineage

    r = _run(str(BIN / "corpus"), "search", "线程栈", "--kb", "tiny", "--json", env=env)
    assert r.returncode == 0, r.stderr
    assert any("jstack" in h["text"] for h in json.loads(r.stdout)["results"])

    # Dagster's own CLI can re-materialize the partition corpus index registered.
    r = _run(
        str(BIN / "dagster"),
        "asset",
        "materialize",
        "-m",
        "assets.definitions",
        "--select",
        "child_chunks",
        "--partition",
        f"tiny|{version}",
        env=env,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


def test_an_invalid_config_is_refused_before_anything_is_written(tiny_kb, corpus_home):
    (tiny_kb / "kb.yaml").write_text("chunking:\n  child: {RECURSIVE: {max_chars: 50}}\n")
    r = _run(str(BIN / "corpus"), "index", "--kb", "tiny", env={**os.environ})
    assert r.returncode == 2
    assert "chunking.child.RECURSIVE.max_chars = 50 is out of range: allowed 100..8000" in r.stderr
    assert not (corpus_home / "warehouse").exists() and not (corpus_home / "dagster").exists()
