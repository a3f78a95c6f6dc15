"""Deleted means deleted: a deleted document's text leaves every file of the warehouse after
the next index, repeated ``--force`` keeps sizes stable, ``corpus drop`` removes a KB."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import DagsterInstance

from corpus_pipeline.store.layout import Layout
from tests.faults.leaks import files_containing

pytestmark = pytest.mark.slow
CORPUS = str(Path(sys.executable).with_name("corpus"))
SECRET_LINE = "The vault combination is ZEBRA-4471-QUOKKA and it opens the north door."


def _run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CORPUS_HOME": str(home), "DAGSTER_HOME": str(home / "dagster"), "HF_HUB_OFFLINE": "1"}
    return subprocess.run([CORPUS, *args], env=env, capture_output=True, text=True, timeout=600)


def _size(root: Path) -> int:
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file())


def test_a_deleted_document_leaves_no_text_and_force_keeps_sizes_stable(tiny_kb, corpus_home):
    (tiny_kb / "vault.md").write_text(f"# Vault\n\n{SECRET_LINE}\n")
    r = _run(corpus_home, "index", "--kb", "tiny")
    assert r.returncode == 0, r.stderr
    wh = corpus_home / "warehouse"
    needle = "ZEBRA-4471-QUOKKA"
    assert files_containing(wh, needle)  # the test can see the text where it is
    (tiny_kb / "vault.md").unlink()
    r = _run(corpus_home, "index", "--kb", "tiny")
    assert r.returncode == 0, r.stderr
    assert files_containing(wh, needle) == []

    sizes = []
    for _ in range(3):
        r = _run(corpus_home, "index", "--kb", "tiny", "--force")
        assert r.returncode == 0, r.stderr
        sizes.append(_size(wh / "lancedb") + _size(wh / "child_chunks"))
    assert max(sizes) <= min(sizes) * 1.05, sizes


def test_drop_removes_a_kb_and_nothing_else(tiny_kb, corpus_home):
    other = corpus_home / "kbs" / "other"
    shutil.copytree(tiny_kb, other)
    (tiny_kb / "vault.md").write_text(f"# Vault\n\n{SECRET_LINE}\n")
    (other / "link.md").symlink_to(other / "harbor.md")  # skipped, and said so
    r = _run(corpus_home, "index")
    assert r.returncode == 0, r.stderr
    assert "1 file skipped (--verbose lists them):\n      1 .md: a symbolic link (file)" in r.stdout, r.stdout
    layout = Layout(corpus_home)
    dry = _run(corpus_home, "drop", "--kb", "tiny")
    assert dry.returncode == 0 and "--yes" in dry.stdout
    assert files_containing(corpus_home / "warehouse", "ZEBRA-4471-QUOKKA")  # nothing removed yet
    r = _run(corpus_home, "drop", "--kb", "tiny", "--yes")
    assert r.returncode == 0, r.stderr
    assert "dropped 'tiny'" in r.stdout and "still in" in r.stdout
    assert files_containing(corpus_home / "warehouse", "ZEBRA-4471-QUOKKA") == []
    assert list(layout.warehouse.glob("*/kb=tiny")) == [] and not layout.version_dir("tiny").exists()
    assert not any(p.name.startswith("chunks__tiny__") for p in layout.lancedb.iterdir())
    with DagsterInstance.from_config(str(corpus_home / "dagster")) as inst:
        assert not inst.has_dynamic_partition("kb", "tiny") and inst.has_dynamic_partition("kb", "other")
    # the other KB still searches
    s = _run(corpus_home, "search", "which port does the console listen on", "--kb", "other", "--json")
    assert s.returncode == 0 and "8443" in s.stdout, s.stderr


def test_drop_caches_removes_text_derived_from_documents(tiny_kb, corpus_home):
    r = _run(corpus_home, "index", "--kb", "tiny")
    assert r.returncode == 0, r.stderr
    cache = corpus_home / "warehouse" / "cache"
    assert any(f.is_file() for f in cache.rglob("*"))
    dry = _run(corpus_home, "drop", "--caches")
    assert dry.returncode == 0 and "would remove" in dry.stdout and cache.is_dir()
    r = _run(corpus_home, "drop", "--caches", "--yes")
    assert r.returncode == 0 and "removed" in r.stdout, r.stderr
    assert not cache.exists()
    assert _run(corpus_home, "drop").returncode == 2  # nothing named
    again = _run(corpus_home, "index", "--kb", "tiny", "--force")
    assert again.returncode == 0, again.stderr  # the caches come back as needed
