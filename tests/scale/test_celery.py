"""A distributed index: the steps of a KB's runs executed by Celery workers (dagster-celery)
through a Redis broker, with the Dagster instance on PostgreSQL, as ``deploy/`` sets it up.

The test starts redis-server (apt) on 127.0.0.1 and two ``dagster-celery`` workers, and
launches the parse job and the index job with ``dagster job execute`` and
``CORPUS_EXECUTOR=celery``. It asserts that the runs succeeded, that every step ran in a
worker's process (not in the test, not in the launching process), and that the KB's chunks
and search table have the same rows and ids as ``corpus index`` of the same KB in another
home (serial, in process, SQLite instance).

Locally it skips without redis-server or PostgreSQL; under CORPUS_REQUIRE_PG (CI) it fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from dagster import DagsterEventType, DagsterInstance, DagsterRunStatus

from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.store.lance import open_search_table
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.parquet import read_partition
from corpus_pipeline.store.versions import register_version

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
KB = "fleet"
DOCS = {
    "backup.md": "# Backups\n\nSnapshots run nightly at 02:00 and are kept for 30 days.\n\n"
    "## Restore\n\nChoose a snapshot in the console and press Restore; files under 2 GB come back in a minute.\n",
    "network.md": "# Network\n\nThe console listens on port 8443. Replicas talk over TLS on port 9443.\n\n"
    "## Firewall\n\nOpen 8443 to operators only; 9443 stays inside the cluster network.\n",
    "oncall.txt": "值班手册\n\n告警：CPU 使用率持续 5 分钟超过 85%。\n\n处理：先用 top 定位进程，再扩容到 16 个实例；"
    "如果是代码问题，立即回滚最近一次发布。\n",
    "release.md": "# Releases\n\nEvery release is tagged and signed. Roll back by activating the previous tag.\n\n"
    "## Freeze\n\nNo releases on Fridays after 15:00 or during the quarterly freeze week.\n",
}
KB_YAML = (
    "chunking:\n  plan: PARENT:RECURSIVE;CHILD:RECURSIVE\n"
    "  parent: {RECURSIVE: {max_chars: 300, overlap_chars: 40}}\n"
    "  child: {RECURSIVE: {max_chars: 120, overlap_chars: 20}}\n"
)


def _required(what: str) -> None:
    if os.environ.get("CORPUS_REQUIRE_PG"):
        pytest.fail(f"CORPUS_REQUIRE_PG is set but {what} (scripts/system-deps.sh installs it)")
    pytest.skip(what)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(proc: subprocess.Popen[Any], timeout: float = 15) -> None:
    """Stop a process started in its own session, and all it started (no orphans)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # what is left of the group (pool children)
    proc.wait(5)


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A redis-server of its own on 127.0.0.1 (no persistence), stopped at teardown."""
    exe = shutil.which("redis-server")
    if exe is None:
        _required("redis-server is not installed (apt-get install redis-server)")
    port, work = _free_port(), tmp_path_factory.mktemp("redis")
    args = [exe, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no", "--dir", str(work)]
    log = (work / "log").open("w")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        t0 = time.monotonic()
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as c:
                    c.sendall(b"PING\r\n")
                    if c.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                pass
            assert proc.poll() is None, (work / "log").read_text()
            assert time.monotonic() - t0 < 20, "redis-server did not answer within 20 s"
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        _stop(proc)
        log.close()


@pytest.fixture
def pg_db() -> Iterator[dict[str, str]]:
    """A database of its own on the test PostgreSQL server (scripts/postgres.sh), as the
    DAGSTER_PG_* variables that dagster.postgres.yaml reads."""
    host = os.environ.get("CORPUS_TEST_PG_HOST")
    if not host:
        _required("no PostgreSQL server was started (CORPUS_TEST_PG_HOST; scripts/test.sh starts one)")
    import psycopg2

    db = f"corpus_celery_{uuid.uuid4().hex[:8]}"
    env = {
        "DAGSTER_PG_HOST": str(host),
        "DAGSTER_PG_PORT": os.environ["CORPUS_TEST_PG_PORT"],
        "DAGSTER_PG_USER": os.environ["CORPUS_TEST_PG_USER"],
        "DAGSTER_PG_PASSWORD": os.environ.get("CORPUS_TEST_PG_PASSWORD", "postgres"),
        "DAGSTER_PG_DB": db,
    }
    conn = psycopg2.connect(
        host=host, port=env["DAGSTER_PG_PORT"], user=env["DAGSTER_PG_USER"], password=env["DAGSTER_PG_PASSWORD"],
        dbname="postgres",
    )  # fmt: skip
    conn.autocommit = True
    conn.cursor().execute(f"CREATE DATABASE {db}")
    try:
        yield env
    finally:
        conn.cursor().execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        conn.close()


def _write_kb(home: Path) -> None:
    d = home / "kbs" / KB
    d.mkdir(parents=True)
    (d / "kb.yaml").write_text(KB_YAML, encoding="utf-8")
    for name, text in DOCS.items():
        (d / name).write_text(text, encoding="utf-8")


def _base_env(home: Path, dagster_home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_PG_", "CORPUS_EXECUTOR", "CORPUS_CELERY"))}
    env.update(
        CORPUS_HOME=str(home), DAGSTER_HOME=str(dagster_home), HF_HUB_OFFLINE="1", DO_NOT_TRACK="1",
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(REPO),
    )  # fmt: skip
    return env


def _rows(home: Path, version: str) -> dict[str, Any]:
    """The version's rows as search serves them: child chunks (id, parent, text) and the
    search table's (id, parent, text, vector rounded)."""
    layout = Layout(home)
    chunks = read_partition(layout.partition_dir("child_chunks", KB, version)).to_pylist()
    parents = read_partition(layout.partition_dir("parent_blocks", KB, version)).to_pylist()
    table = open_search_table(layout, KB, version).to_arrow().to_pylist()
    ids = [r["chunk_id"] for r in table]
    assert len(ids) == len(set(ids)), "duplicate rows in the search table"
    return {
        "chunks": sorted((r["chunk_id"], r["parent_id"], r["text"]) for r in chunks),
        "parents": sorted((r["parent_id"], r["text"]) for r in parents),
        "table": sorted(
            (r["chunk_id"], r["parent_id"], r["text"], tuple(round(float(x), 4) for x in r["vector"])) for r in table
        ),
    }


def _wait_ready(logs: list[Path], procs: list[subprocess.Popen[Any]], timeout: float = 90) -> None:
    t0 = time.monotonic()
    while not all(" ready." in p.read_text(errors="replace") for p in logs):
        for proc, p in zip(procs, logs, strict=True):
            assert proc.poll() is None, f"a celery worker exited: {p.read_text(errors='replace')[-3000:]}"
        assert time.monotonic() - t0 < timeout, "celery workers not ready: " + logs[0].read_text()[-3000:]
        time.sleep(0.2)


def _descendants(procs: list[subprocess.Popen[Any]]) -> set[int]:
    pids: set[int] = set()
    for proc in procs:
        p = psutil.Process(proc.pid)
        pids |= {p.pid, *(c.pid for c in p.children(recursive=True))}
    return pids


def test_an_index_whose_steps_run_on_celery_workers_equals_a_serial_index(redis_url, pg_db, tmp_path):
    t0 = time.monotonic()
    serial, dist = tmp_path / "serial", tmp_path / "dist"
    _write_kb(serial)
    _write_kb(dist)
    # the reference: `corpus index` as a user runs it, serial, in process, on SQLite (beside the rest)
    serial_env = _base_env(serial, serial / "dagster")
    reference = subprocess.Popen(
        [str(BIN / "corpus"), "index", "--kb", KB, "--json"], env=serial_env, cwd=REPO, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip

    # the distributed instance: dagster.postgres.yaml as shipped, in a DAGSTER_HOME of its own
    dagster_home = tmp_path / "dagster"
    dagster_home.mkdir()
    shutil.copy(REPO / "dagster.postgres.yaml", dagster_home / "dagster.yaml")
    env = {
        **_base_env(dist, dagster_home), **pg_db,
        "CORPUS_EXECUTOR": "celery", "CORPUS_CELERY_BROKER": redis_url, "CORPUS_CELERY_BACKEND": redis_url,
    }  # fmt: skip
    workers: list[subprocess.Popen[bytes]] = []
    logs: list[Path] = []
    try:
        for i in (1, 2):
            logs.append(tmp_path / f"worker{i}.log")
            cmd = [str(BIN / "dagster-celery"), "worker", "start", "-A", "dagster_celery.app",
                   "-y", str(REPO / "deploy" / "celery-worker.yaml"), "-n", f"corpus{i}", "--", "-c", "1"]  # fmt: skip
            with logs[-1].open("wb") as log:
                workers.append(
                    subprocess.Popen(
                        cmd, env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
                    )
                )
        # meanwhile: the KB's version and partitions, as corpus index registers them
        layout = Layout(dist)
        version = register_version(layout, resolve_kb(layout.kb_dir(KB)))
        with _pg_env(pg_db), DagsterInstance.from_config(str(dagster_home)) as instance:
            instance.add_dynamic_partitions("kb", [KB])
            instance.add_dynamic_partitions("strategy_version", [version])
        _wait_ready(logs, workers)
        t_ready = time.monotonic() - t0

        launches = {
            "parse_kb": {"dagster/partition": KB},
            "index_version": {
                "dagster/partition": f"{KB}|{version}",
                "dagster/partition/kb": KB,
                "dagster/partition/strategy_version": version,
            },
        }
        launchers: dict[str, int] = {}
        took: dict[str, float] = {}
        for job, tags in launches.items():
            t_job = time.monotonic()
            cmd = [str(BIN / "dagster"), "job", "execute", "-m", "assets.definitions", "-a", "defs", "-j", job,
                   "--tags", json.dumps(tags)]  # fmt: skip
            run = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            out, _ = run.communicate(timeout=240)
            assert run.returncode == 0, f"{job}: {out[-4000:]}\nworker: {logs[0].read_text()[-3000:]}"
            launchers[job] = run.pid
            took[job] = round(time.monotonic() - t_job, 1)
        worker_pids = _descendants(workers)

        with _pg_env(pg_db), DagsterInstance.from_config(str(dagster_home)) as instance:
            runs = {r.job_name: r for r in instance.get_runs()}
            assert set(runs) == set(launches)
            hosts: set[str] = set()
            step_s: dict[str, float] = {}
            for job, run in runs.items():
                assert run.status == DagsterRunStatus.SUCCESS, job
                assert run.tags["dagster/partition"] == launches[job]["dagster/partition"]
                records = instance.all_logs(run.run_id)
                done = [
                    r.dagster_event
                    for r in records
                    if r.dagster_event and r.dagster_event.event_type == DagsterEventType.STEP_SUCCESS
                ]
                assert done, f"{job}: no step succeeded"
                for ev in done:
                    step_s[str(ev.step_key)] = round(ev.event_specific_data.duration_ms / 1000, 1)
                    assert ev.pid not in (os.getpid(), launchers[job]), (
                        f"{job}: step {ev.step_key} ran outside a worker"
                    )
                    assert ev.pid in worker_pids, f"{job}: step {ev.step_key} ran in pid {ev.pid}, no worker's"
                for r in records:
                    ev = r.dagster_event
                    if ev is not None and ev.event_type == DagsterEventType.ENGINE_EVENT and ev.step_key:
                        entries = ev.engine_event_data.metadata if ev.engine_event_data else {}
                        if "Celery worker" in entries:
                            hosts.add(str(entries["Celery worker"].value))
            assert {h.split("@")[0] for h in hosts} <= {"corpus1", "corpus2"} and hosts, hosts
            # an asset's step, or the steps of a graph-backed asset's ops (``asset.op[batch]``)
            steps = {r.step_key for run in runs.values() for r in instance.all_logs(run.run_id) if r.step_key}
            assets = {k.split(".")[0] for k in steps}
            assert {
                "documents",
                "parsed_blocks",
                "parent_blocks",
                "child_chunks",
                "chunk_embeddings",
                "search_index",
            } <= assets, steps
    finally:
        for w in workers:
            _stop(w)
    t_ref = time.monotonic()
    out, err = reference.communicate(timeout=300)
    waited = time.monotonic() - t_ref
    assert reference.returncode == 0, err[-4000:]
    (summary,) = json.loads(out)
    assert summary["status"] == "ok" and summary["strategy_version"] == version, summary
    got, want = _rows(dist, version), _rows(serial, version)
    assert want["chunks"] and want["table"]
    assert got == want
    print(
        f"celery index: workers ready after {t_ready:.1f} s, runs {took} s, then waited {waited:.1f} s for the "
        f"serial index; total {time.monotonic() - t0:.1f} s; {len(steps)} steps on {sorted(hosts)}: {step_s}"
    )


class _pg_env:
    """The DAGSTER_PG_* variables set in this process while the instance is opened."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values, self.saved = values, {k: os.environ.get(k) for k in values}

    def __enter__(self) -> None:
        os.environ.update(self.values)

    def __exit__(self, *exc: object) -> None:
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
