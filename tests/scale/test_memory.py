"""A serial index runs every step in one process: between steps the memory of the last
step's tables goes back to the system (``corpus_pipeline.indexing.memory``), and Arrow
allocates from the system's malloc, which returns it (its bundled mimalloc kept twice as
much: see the module's figures and ``benchmarks/scale/RESULTS.md``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from assets.definitions import defs

REPO = Path(__file__).resolve().parents[2]

SETUP = """
import pyarrow as pa
from dagster import build_init_resource_context
from resources.corpus import CorpusResource
before = pa.default_memory_pool().backend_name
CorpusResource(home={home!r}).setup_for_execution(build_init_resource_context())
print(before, pa.default_memory_pool().backend_name)
"""


def _pools(tmp_path: Path, **env: str) -> list[str]:
    clean = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    out = subprocess.run(
        [sys.executable, "-c", SETUP.format(home=str(tmp_path))],
        env={**clean, **env}, cwd=REPO, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return out.stdout.split()


def test_the_corpus_resource_has_arrow_allocate_from_the_system_unless_a_pool_was_chosen(tmp_path):
    before, after = _pools(tmp_path)
    assert before != "system" and after == "system"  # (pyarrow's wheels default to mimalloc)
    assert _pools(tmp_path, ARROW_DEFAULT_MEMORY_POOL="jemalloc") == ["jemalloc", "jemalloc"]


def test_every_step_of_both_jobs_gives_its_memory_back_when_it_ends():
    for name in ("parse_kb", "index_version"):
        hooks = {h.name for h in defs.resolve_job_def(name).hook_defs}
        assert {"release_memory", "release_memory_on_failure"} <= hooks, name


def test_release_returns_freed_arrow_memory_to_the_system():
    """Freed Arrow buffers of a system-pool process leave its resident size once released
    (in a fresh process: the measure is the process's own)."""
    code = """
import os, pyarrow as pa
from corpus_pipeline.indexing.memory import release_unused, use_system_allocator
use_system_allocator()
rss = lambda: int(open(f"/proc/{os.getpid()}/statm").read().split()[1]) * 4096 >> 20
base = rss()
# many mid-sized buffers (below malloc's mmap threshold: what a table of strings makes)
parts = [pa.array([f"row {i} " * 8 for i in range(j, j + 2000)]) for j in range(0, 1_000_000, 2000)]
held = rss() - base
del parts
release_unused()
print(held, rss() - base)
"""
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120, check=True
    )
    held, left = (int(x) for x in out.stdout.split())
    assert held > 50 and left < held / 3, (held, left)
