"""Fault injection on the real CLI: ``kill -9`` at each asset of a run, two crashes that
used to wedge the ``llm`` pool, a signal while waiting for a slot, two indexers at once.

Each case asserts what a user relies on: the previous version stays active and readable,
the re-run gives the same rows and ids as a clean run (no duplicates), nothing waits
forever, and the instance has no dead run left STARTED.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from dagster import DagsterEventType, DagsterInstance, DagsterRunStatus

from corpus_pipeline.store.lance import open_search_table
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.locks import is_locked
from corpus_pipeline.store.parquet import read_partition
from corpus_pipeline.store.versions import active_version

pytestmark = pytest.mark.slow
CORPUS = str(Path(sys.executable).with_name("corpus"))
REPO = Path(__file__).resolve().parents[2]
WORDS = [
    "backup",
    "restore",
    "console",
    "port",
    "snapshot",
    "encrypt",
    "replica",
    "server",
    "nightly",
    "copies",
    "retention",
    "policy",
]
YAML = (
    "chunking:\n  plan: PARENT:RECURSIVE;CHILD:RECURSIVE\n"
    "  parent: {{RECURSIVE: {{max_chars: 800, overlap_chars: 0}}}}\n"
    "  child: {{RECURSIVE: {{max_chars: {child}, overlap_chars: 20}}}}\n"
)


def _write_kb(home: Path, name: str, docs: int = 8, child: int = 200) -> Path:
    d = home / "kbs" / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "kb.yaml").write_text(YAML.format(child=child))
    for i in range(docs):
        paras = [" ".join(WORDS[(i * 7 + j * 3 + k) % len(WORDS)] for k in range(40)) + "." for j in range(12)]
        (d / f"doc{i}.md").write_text(f"# {name} document {i}\n\n" + "\n\n".join(paras) + "\n")
    return d


def _env(home: Path) -> dict[str, str]:
    dagster = home / "dagster"
    if (home / "DAGSTER_HOME").is_file():  # the instance kept off the disk under test
        dagster = Path((home / "DAGSTER_HOME").read_text().strip())
    return {**os.environ, "CORPUS_HOME": str(home), "DAGSTER_HOME": str(dagster), "HF_HUB_OFFLINE": "1"}


def _index(home: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CORPUS, "index", *args], env=_env(home), cwd=REPO, capture_output=True, text=True, timeout=timeout
    )


def _start(home: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [CORPUS, "index", *args], env=_env(home), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )  # fmt: skip


def _instance(home: Path) -> DagsterInstance:
    return DagsterInstance.from_config(str(home / "dagster"))


def _wait_for_step(home: Path, proc: subprocess.Popen[str], step: str, known: set[str], timeout: float = 120) -> str:
    """Poll the instance until a run not in ``known`` has started ``step``; returns its id."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        assert proc.poll() is None, f"corpus index ended before {step} started: {proc.communicate()}"
        try:
            with _instance(home) as inst:
                for run in inst.get_runs(limit=6):
                    if run.run_id in known or run.tags.get("corpus/pid") != str(proc.pid):
                        continue
                    for rec in inst.all_logs(run.run_id, of_type=DagsterEventType.STEP_START):
                        if rec.step_key == step or str(rec.step_key).startswith(step + "."):  # a fanned-out asset's
                            return run.run_id
        except Exception:
            pass
        time.sleep(0.05)
    raise AssertionError(f"{step} never started within {timeout} s")


def _kill_each_holding_a_slot(
    home: Path, procs: list[subprocess.Popen[str]], pool: str, step: str, known: set[str], timeout: float
) -> None:
    """Kill -9 each process as soon as its run holds a slot of ``pool`` for ``step``. The
    processes are watched together: waiting for one first let the other's batch start and
    end unseen on a loaded machine (its slot already freed when the test looked)."""
    pending = {proc.pid: proc for proc in procs}
    t0 = time.monotonic()
    while pending and time.monotonic() - t0 < timeout:
        try:
            with _instance(home) as inst:
                claimed = inst.event_log_storage.get_concurrency_info(pool).claimed_slots
                holders = {c.run_id for c in claimed if c.step_key == step}
                for run in inst.get_runs(limit=8):
                    pid = run.tags.get("corpus/pid")
                    if run.run_id not in known and run.run_id in holders and pid and int(pid) in pending:
                        os.killpg(int(pid), signal.SIGKILL)
                        del pending[int(pid)]
        except Exception:
            pass
        for proc in pending.values():
            assert proc.poll() is None, f"corpus index ended before {step} held a slot: {proc.communicate()}"
        time.sleep(0.02)
    assert not pending, f"{step} never held a slot of {pool!r} within {timeout} s"


def _kill_at(home: Path, step: str, *args: str) -> str:
    with _instance(home) as inst:
        known = {r.run_id for r in inst.get_runs()}
    proc = _start(home, *args)
    try:
        run_id = _wait_for_step(home, proc, step, known)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    return run_id


def _snapshot(home: Path, kb: str) -> dict[str, Any]:
    """What search serves: the active version, its chunk rows and its search table's rows."""
    layout = Layout(home)
    v = active_version(layout, kb)
    assert v is not None
    chunks = read_partition(layout.partition_dir("child_chunks", kb, v))
    ids = chunks.column("chunk_id").to_pylist()
    assert len(ids) == len(set(ids)), "duplicate chunk ids in child_chunks"
    table = open_search_table(layout, kb, v).to_arrow()
    tids = table.column("chunk_id").to_pylist()
    assert len(tids) == len(set(tids)), "duplicate rows in the search table"
    assert sorted(tids) == sorted(ids)
    return {"version": v, "rows": sorted(zip(ids, chunks.column("text").to_pylist(), strict=True))}


def _runs_left_started(home: Path) -> list[str]:
    with _instance(home) as inst:
        return [
            r.run_id
            for r in inst.get_runs()
            if r.status in (DagsterRunStatus.STARTED, DagsterRunStatus.STARTING, DagsterRunStatus.NOT_STARTED)
        ]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A home with KB ``kb`` built at child size 200 (v1), and the clean result of the change
    every case makes (one document edited, child size 260: v2) built in a separate home."""
    base = tmp_path_factory.mktemp("faults")
    template = base / "template"
    _write_kb(template, "kb")
    r = _index(template, "--kb", "kb")
    assert r.returncode == 0, r.stderr
    v1 = _snapshot(template, "kb")
    clean = base / "clean"
    shutil.copytree(template / "kbs", clean / "kbs")
    _change(clean)
    r = _index(clean, "--kb", "kb")
    assert r.returncode == 0, r.stderr
    return {"template": template, "v1": v1, "v2": _snapshot(clean, "kb")}


def _change(home: Path) -> None:
    d = home / "kbs" / "kb"
    (d / "kb.yaml").write_text(YAML.format(child=260))
    doc = d / "doc3.md"
    doc.write_text(doc.read_text().replace("document 3", "document 3 (edited)"))


def _copy(built: dict[str, Any], dest: Path) -> Path:
    shutil.copytree(built["template"], dest)
    return dest


# (a fanned-out asset is killed in its batch step: its plan takes no time)
STEPS = [
    "documents",
    "parsed_blocks.parse_batch[b0]",
    "parent_blocks.parents_batch[b0]",
    "child_chunks.children_batch[b0]",
    "chunk_embeddings.embed_batch[b0]",
    "search_index",
]


@pytest.mark.parametrize("step", STEPS)
def test_kill_9_at_each_asset_keeps_the_old_version_and_a_rerun_equals_a_clean_run(built, tmp_path, step):
    home = _copy(built, tmp_path / "home")
    _change(home)
    dead = _kill_at(home, step, "--kb", "kb")
    # The previous version is still the active one, whole and readable.
    assert _snapshot(home, "kb") == built["v1"]
    assert dead in _runs_left_started(home)  # (what the next index repairs)
    r = _index(home, "--kb", "kb")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"run {dead}" in r.stderr and "marked failed" in r.stderr
    assert _snapshot(home, "kb") == built["v2"]
    assert _runs_left_started(home) == []


def test_two_kills_during_chunking_do_not_wedge_the_next_kb(built, tmp_path):
    """The issue's case: two indexers killed (kill -9) while `child_chunks` holds slots of
    the llm pool (limit 2) used to make every later run of every KB wait forever."""
    home = _copy(built, tmp_path / "home")
    _change(home)
    # Enough documents that a chunk batch is still running when the test sees it start
    # (a batch of 8 can end before the kill), in one batch (--workers 1).
    _write_kb(home, "kb", docs=240, child=260)
    _write_kb(home, "second", docs=480, child=260)  # (long enough a batch to be seen holding its slot under load)
    _write_kb(home, "other", docs=2)
    with _instance(home) as inst:
        known = {r.run_id for r in inst.get_runs()}
    procs = [_start(home, "--kb", name, "--workers", "1") for name in ("kb", "second")]
    try:  # each killed while its batch runs, holding a slot
        _kill_each_holding_a_slot(home, procs, "llm", "child_chunks.children_batch[b0]", known, timeout=240)
    finally:
        for proc in procs:
            proc.communicate(timeout=30)
    with _instance(home) as inst:
        assert inst.event_log_storage.get_concurrency_info("llm").active_slot_count == 2  # the pool is full
    doctor = subprocess.run([CORPUS, "doctor"], env=_env(home), cwd=REPO, capture_output=True, text=True, timeout=120)
    assert doctor.returncode == 1 and doctor.stdout.count(": dead — process") == 2, doctor.stdout
    r = _index(home, "--kb", "other", timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (
        r.stderr.count("marked failed") == 2
        and r.stderr.count("freed 1 slot(s): llm:child_chunks.children_batch[b0]") == 2
    )
    with _instance(home) as inst:
        assert inst.event_log_storage.get_concurrency_info("llm").active_slot_count == 0
    assert _runs_left_started(home) == []
    doctor = subprocess.run([CORPUS, "doctor"], env=_env(home), cwd=REPO, capture_output=True, text=True, timeout=120)
    assert doctor.returncode == 0 and "no unfinished runs" in doctor.stdout, doctor.stdout
    assert _snapshot(home, "kb") == built["v1"]  # the killed KB still serves its previous version


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_an_index_waiting_for_a_slot(built, tmp_path, sig):
    home = _copy(built, tmp_path / "home")
    _change(home)
    with _instance(home) as inst:
        inst.event_log_storage.set_concurrency_slots("llm", 0)  # nothing in the pool can run
    proc = _start(home, "--kb", "kb")
    try:
        t0 = time.monotonic()
        while "waiting for a slot of pool 'llm'" not in _peek(proc) and time.monotonic() - t0 < 120:
            assert proc.poll() is None
            time.sleep(0.2)
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 128 + sig, err
    assert f"interrupted by {signal.Signals(sig).name}" in err and "marked failed" in err
    assert _runs_left_started(home) == []
    assert _snapshot(home, "kb") == built["v1"]


_stderr_seen: dict[int, str] = {}


def _peek(proc: subprocess.Popen[str]) -> str:
    """What the process has written to stderr so far (non-blocking)."""
    import fcntl

    assert proc.stderr is not None
    fd = proc.stderr.fileno()
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
    try:
        chunk = os.read(fd, 65536).decode(errors="replace")
    except BlockingIOError:
        chunk = ""
    _stderr_seen[proc.pid] = _stderr_seen.get(proc.pid, "") + chunk
    return _stderr_seen[proc.pid]


def test_two_indexers_of_one_kb_one_waits_or_is_told_busy(built, tmp_path):
    home = _copy(built, tmp_path / "home")
    _change(home)
    first = _start(home, "--kb", "kb")
    try:
        t0 = time.monotonic()
        while not is_locked(Layout(home), "kb") and time.monotonic() - t0 < 60:
            time.sleep(0.05)
        busy = _index(home, "--kb", "kb")
        waited = _start(home, "--kb", "kb", "--wait")
        _out, err = first.communicate(timeout=300)
        w_out, w_err = waited.communicate(timeout=300)
    finally:
        for p in (first,):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    assert first.returncode == 0, err
    assert busy.returncode == 1 and "BUSY" in busy.stdout and "is being written by pid" in busy.stdout, busy.stdout
    assert waited.returncode == 0 and "waiting for pid" in w_err, w_err
    assert "up to date" in w_out  # the second did not redo the work
    assert _snapshot(home, "kb") == built["v2"]


def _mount_tmpfs(where: Path, size_kb: int) -> bool:
    where.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(where)], capture_output=True)
    return r.returncode == 0


def test_a_full_disk_says_so_keeps_the_old_version_and_a_rerun_after_freeing_space_is_clean(built, tmp_path):
    mnt = tmp_path / "mnt"
    if not _mount_tmpfs(mnt, 64 * 1024):
        pytest.skip("cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): the full-disk case is not run")
    try:
        home = mnt / "home"
        shutil.copytree(built["template"], home, ignore=shutil.ignore_patterns("dagster"))
        shutil.copytree(built["template"] / "dagster", tmp_path / "dagster")
        (home / "DAGSTER_HOME").write_text(str(tmp_path / "dagster"))
        _change(home)
        free_kb = int(subprocess.run(["df", "-k", str(mnt)], capture_output=True, text=True).stdout.split()[-3])
        filler = mnt / "filler"
        with open(filler, "wb") as f:  # leave 24 KB: the new version's Parquet cannot be written
            f.truncate(0)
            f.write(b"\0" * max(0, (free_kb - 24) * 1024))
        r = _index(home, "--kb", "kb")
        assert r.returncode == 1, r.stdout + r.stderr
        assert "No space left on device" in r.stdout and "the disk of the warehouse is full" in r.stdout, r.stdout
        assert "Error occurred while" not in r.stdout + r.stderr  # the cause, not Dagster's wrapper
        filler.unlink()
        assert _snapshot(home, "kb") == built["v1"]
        r = _index(home, "--kb", "kb")
        assert r.returncode == 0, r.stdout + r.stderr
        assert _snapshot(home, "kb") == built["v2"]
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
