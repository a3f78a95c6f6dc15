"""Ctrl-C, SIGTERM and a closed pipe end `corpus` quietly (issue 41): one line on stderr and
the documented exit code (130, 143, 141), never a traceback, not even one of a process
Dagster started (its compute-log watchers share the terminal's process group)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from faults.test_snapshots import CORPUS, _env

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("quiet") / "corpus"
    kb = home / "kbs" / "kb"
    kb.mkdir(parents=True)
    for i in range(3):
        (kb / f"d{i}.md").write_text(f"# Harbor {i}\n\nThe harbor opens at nine. Ships leave at noon, day {i}.\n")
    r = subprocess.run([CORPUS, "index"], env=_env(home), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return home


def _start(home: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [CORPUS, *args], env=_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip


def test_search_into_a_closed_pipe_ends_quietly(home: Path) -> None:
    read, write = os.pipe()
    os.close(read)  # (`corpus search ... | head -1` once head has exited)
    try:
        r = subprocess.run(
            [CORPUS, "search", "harbor", "--kb", "kb"], env=_env(home), stdout=write, stderr=subprocess.PIPE,
            text=True, timeout=300,
        )  # fmt: skip
    finally:
        os.close(write)
    assert r.returncode == 141 and r.stderr == "", r.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_search_loads_ends_with_one_line(home: Path, sig: signal.Signals) -> None:
    proc = _start(home, "search", "harbor", "--kb", "kb")
    time.sleep(1.5)  # (importing, opening the tables, loading the model: seconds)
    os.killpg(proc.pid, sig)  # the whole group, as a terminal's Ctrl-C
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err
    assert err == f"corpus search: interrupted by {sig.name}\n"


def test_ctrl_c_while_indexing_ends_with_one_line_and_no_traceback(home: Path) -> None:
    (home / "kbs" / "kb" / "new.md").write_text("# New\n\nA new page about the harbor's opening hours.\n")
    proc = _start(home, "index", "--kb", "kb", "--force")
    assert proc.stderr is not None
    seen = ""
    t0 = time.monotonic()
    while "✓ parsed_blocks" not in seen and time.monotonic() - t0 < 300:  # a run is under way
        line = proc.stderr.readline()
        if not line:
            break
        seen += line
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    err = seen + err
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.count("interrupted by SIGINT") == 1


def test_ctrl_c_while_step_processes_run_ends_with_one_line_and_no_traceback(home: Path) -> None:
    """The same with `--workers 2` and enough documents for batches in step processes."""
    big = home / "kbs" / "big"
    big.mkdir()
    numbers = " ".join(str(n) for n in range(200))
    for i in range(60):
        (big / f"d{i}.md").write_text(f"# Doc {i}\n\nThe harbor opens at nine on day {i}. {numbers}\n")
    proc = _start(home, "index", "--kb", "big", "--workers", "2")
    assert proc.stderr is not None
    seen = ""
    t0 = time.monotonic()
    while "✓ parsed_blocks (plan)" not in seen and time.monotonic() - t0 < 300:
        line = proc.stderr.readline()
        if not line:
            break
        seen += line
    time.sleep(1.0)  # (the batch steps' processes are starting)
    os.killpg(proc.pid, signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    err = seen + err
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err and "resource_tracker" not in err, err
    assert err.count("interrupted by SIGINT") == 1
