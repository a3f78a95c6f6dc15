"""The indexing processes take their Arrow buffers from a pool that gives freed pages back
(``corpus_pipeline.store.memory``): the CLI and the Dagster code location choose it, the
environment's ``ARROW_DEFAULT_MEMORY_POOL`` wins, a library import changes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(
    "jemalloc" not in pa.supported_memory_backends(), reason="this pyarrow is built without jemalloc"
)


#: The two entry points: the Dagster code location and the ``corpus`` CLI.
ENTRIES = ("import assets.definitions", "from corpus_pipeline.cli import main\nmain(['versions', '--kb', 'none'])")


def _last_line(script: str, **env: str) -> str:
    """The last line ``script`` prints in a fresh interpreter, without the test process's
    ``ARROW_DEFAULT_MEMORY_POOL`` (``env`` added)."""
    base = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    out = subprocess.run(
        [sys.executable, "-c", script], env={**base, **env}, cwd=REPO, capture_output=True, text=True, check=True
    )
    return out.stdout.strip().splitlines()[-1]


def _backend(code: str, **env: str) -> str:
    """The default pool's backend after ``code`` runs in a fresh interpreter."""
    return _last_line(code + "\nimport pyarrow as pa\nprint(pa.default_memory_pool().backend_name)", **env)


def _home(tmp_path: Path) -> dict[str, str]:
    return {"CORPUS_HOME": str(tmp_path), "DAGSTER_HOME": str(tmp_path / "dagster")}


def test_the_code_location_and_the_cli_use_jemalloc(tmp_path: Path) -> None:
    for entry in ENTRIES:
        assert _backend(entry, **_home(tmp_path)) == "jemalloc"


_SCAN = """
import pyarrow as pa, pyarrow.dataset as ds, pyarrow.parquet as pq
words = ["x" * 300 + str(i) for i in range(50_000)]
pq.write_table(pa.table({"a": words}), PATH)
kept = ds.dataset(PATH).to_table(filter=ds.field("a").isin(words[::7]))
whole = pq.read_table(PATH)
print(pa.mimalloc_memory_pool().max_memory() if "mimalloc" in pa.supported_memory_backends() else 0)
"""


@pytest.mark.parametrize("entry", ENTRIES)
def test_arrows_own_buffers_come_from_the_chosen_pool_too(tmp_path: Path, entry: str) -> None:
    """Why: ``pa.set_memory_pool`` leaves Arrow's C++ default (Parquet pages, file reads, a
    dataset filter's temporaries) as pyarrow's import chose it, mimalloc, which kept what a
    step freed. After an entry point, a filtered scan and a read take nothing from mimalloc."""
    script = entry + "\n" + _SCAN.replace("PATH", repr(str(tmp_path / "t.parquet")))
    assert int(_last_line(script, **_home(tmp_path))) == 0


def test_a_library_import_keeps_arrows_default_and_the_environment_wins(tmp_path: Path) -> None:
    assert _backend("import corpus_pipeline.api") == _backend("pass")  # importing does not choose
    env = {"ARROW_DEFAULT_MEMORY_POOL": "system", "CORPUS_HOME": str(tmp_path)}
    assert _backend("import assets.definitions", **env) == "system"


def test_freed_buffers_are_given_back_to_the_system() -> None:
    """Why: mimalloc (Arrow's default on Linux) keeps what a step freed, so a serial run's
    resident size only grows; jemalloc returns it within its decay time (~1 s)."""
    script = textwrap.dedent(
        """
        import gc, time, psutil, pyarrow as pa
        from corpus_pipeline.store.memory import use_returning_pool
        use_returning_pool()
        proc = psutil.Process()
        strs = [("x" * 300) + str(i) for i in range(20_000)]
        base = proc.memory_info().rss
        parts = [pa.array(strs).take(pa.array(range(i % 7, 20_000, 2))) for i in range(100)]
        held = proc.memory_info().rss - base
        del parts
        gc.collect()
        for _ in range(100):
            time.sleep(0.1)
            if proc.memory_info().rss - base < held / 4:
                break
        print(held >> 20, (proc.memory_info().rss - base) >> 20)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True)
    held, left = map(int, out.stdout.split())
    assert held > 200 and left < held / 4, (held, left)


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's malloc")
@pytest.mark.parametrize("entry", ENTRIES)
def test_the_entry_points_cap_mallocs_arenas_unless_the_environment_does(tmp_path: Path, entry: str) -> None:
    """Why: LanceDB's index build allocates with glibc's malloc from many threads; each got an
    arena of its own that kept what it freed (a 20k-document KB's search-table step: 1,145 MB
    peak, 774 MB with two arenas). The cap reaches the processes an entry point starts."""
    cores = str(max(2, os.cpu_count() or 2))
    show = entry + "\nimport os\nprint(os.environ.get('MALLOC_ARENA_MAX'))"
    base = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    out = subprocess.run(
        [sys.executable, "-c", show],
        env={**base, **_home(tmp_path)},
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip().splitlines()[-1] == cores
    assert _last_line(show, MALLOC_ARENA_MAX="3", **_home(tmp_path)) == "3"


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's malloc")
def test_give_back_returns_mallocs_free_pages_to_the_system() -> None:
    """Why: memory freed inside glibc's heap stays resident until ``malloc_trim``; a step's
    end (``store.memory.give_back``, called by the IO manager) hands it back."""
    script = textwrap.dedent(
        """
        import ctypes, psutil
        from corpus_pipeline.store.memory import give_back
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc.restype = ctypes.c_void_p
        libc.free.argtypes = [ctypes.c_void_p]
        blocks = [libc.malloc(100_000) for _ in range(2_000)]  # (~200 MB, below mmap's threshold)
        for b in blocks:
            ctypes.memset(b, 1, 100_000)
        for b in blocks[:-1]:
            libc.free(b)  # (the last one stays: the heap's top is not free, so nothing is trimmed)
        before = psutil.Process().memory_info().rss
        give_back()
        print((before - psutil.Process().memory_info().rss) // 2**20)
        """
    )
    assert int(_last_line(script)) > 100
