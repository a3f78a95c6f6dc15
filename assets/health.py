"""The health of a Dagster instance: runs whose process is gone, slots nobody will free.

A run killed with ``kill -9`` (or by the OOM killer) never reports its end: it stays
STARTED, and the concurrency slots its steps claimed (pools ``llm`` and ``vision``, limit 2)
stay claimed, so after two such crashes every later run of every KB waits forever. Dagster's
daemon frees the slots of *finished* runs (``run_monitoring.free_slots_after_run_end_seconds``
in the shipped dagster.yaml), but it cannot tell that a run started by ``corpus index``
(in process) has died.

Here a run is *dead* when the process that executes it is known and gone: its pid comes
from the run's tags (``corpus/pid``, ``corpus/pid_started``, ``corpus/host``, set by
``corpus index``) or from Dagster's own engine event ("Started process for run (pid: N)"),
and it is checked only on the host that ran it (runs of a SQLite instance are local by
construction; runs of a shared PostgreSQL instance need the host tag). A pid that exists
but belongs to a process started after the run is a reused pid: dead too.

``inspect`` reports; ``repair`` marks dead runs failed and frees the slots of dead and
finished runs. ``corpus index`` repairs before it starts; ``corpus doctor`` shows and,
with ``--repair``, repairs (``--fail RUN_ID`` for a run this host cannot check).
"""

from __future__ import annotations

import socket
from dataclasses import asdict, dataclass, field
from typing import Any

import psutil
from dagster import DagsterEventType, DagsterInstance, DagsterRunStatus, RunsFilter

HOST_TAG = "corpus/host"
PID_TAG = "corpus/pid"
PID_STARTED_TAG = "corpus/pid_started"  # the process's start time: guards against pid reuse
KB_TAG = "corpus/kb"
INVOCATION_TAG = "corpus/invocation"  # one `corpus index` call's id: finds its run on a signal

_UNFINISHED = [
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
    DagsterRunStatus.CANCELING,
]
_FINISHED = {DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED}


def this_host() -> str:
    return socket.gethostname()


def process_tags(kb: str) -> dict[str, str]:
    """Tags for a run executed by this process (``corpus index``)."""
    me = psutil.Process()
    return {
        KB_TAG: kb,
        HOST_TAG: this_host(),
        PID_TAG: str(me.pid),
        PID_STARTED_TAG: f"{me.create_time():.2f}",
    }


@dataclass
class RunHealth:
    run_id: str
    job: str
    partition: str
    status: str
    state: str  # alive | dead | finished | queued | unknown
    reason: str
    pid: int | None = None
    host: str | None = None
    slots: list[str] = field(default_factory=list)  # "pool:step" claimed by the run

    @property
    def repairable(self) -> bool:
        return self.state == "dead" or (self.state == "finished" and bool(self.slots))


@dataclass
class PoolHealth:
    pool: str
    limit: int | None
    claimed: int
    pending: int
    holders: list[str]  # run ids


@dataclass
class InstanceHealth:
    runs: list[RunHealth]
    pools: list[PoolHealth]

    @property
    def problems(self) -> list[RunHealth]:
        return [r for r in self.runs if r.state in ("dead", "unknown") or r.repairable]

    def to_dict(self) -> dict[str, Any]:
        return {"runs": [asdict(r) for r in self.runs], "pools": [asdict(p) for p in self.pools]}


def _local_storage(instance: DagsterInstance) -> bool:
    """A SQLite instance lives on one machine: every run in it ran here."""
    return "sqlite" in type(instance.run_storage).__name__.lower()


def _run_pid(instance: DagsterInstance, run_id: str, tags: dict[str, str]) -> int | None:
    if tags.get(PID_TAG, "").isdigit():
        return int(tags[PID_TAG])
    for rec in instance.all_logs(run_id, of_type=DagsterEventType.ENGINE_EVENT):
        ev = rec.dagster_event
        data = ev.engine_event_data if ev is not None else None
        pid = data.metadata.get("pid") if data is not None else None
        value = str(pid.value) if pid is not None else ""
        if value.isdigit():
            return int(value)  # the first one: the run worker (or the in-process executor)
    return None


def _alive(pid: int, started: float | None, run_start: float | None) -> tuple[bool, str]:
    try:
        proc = psutil.Process(pid)
        created = proc.create_time()
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False, f"process {pid} is a zombie"
    except psutil.NoSuchProcess:
        return False, f"process {pid} is gone (killed or crashed)"
    except psutil.Error as exc:  # access denied: it exists
        return True, f"process {pid} exists ({exc.__class__.__name__})"
    if started is not None and abs(created - started) > 1.0:
        return False, f"process {pid} is gone; the pid now belongs to another process"
    if started is None and run_start is not None and created > run_start + 2.0:
        return False, f"process {pid} is gone; the pid now belongs to a newer process"
    return True, f"process {pid} is running"


def _slots_by_run(instance: DagsterInstance) -> tuple[dict[str, list[str]], list[PoolHealth]]:
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return {}, []
    by_run: dict[str, list[str]] = {}
    pools = []
    for key in sorted(storage.get_concurrency_keys()):
        info = storage.get_concurrency_info(key)
        for slot in info.claimed_slots:
            by_run.setdefault(slot.run_id, []).append(f"{key}:{slot.step_key}")
        pools.append(
            PoolHealth(key, info.limit, info.active_slot_count, info.pending_step_count, sorted(info.active_run_ids))
        )
    return by_run, pools


def inspect(instance: DagsterInstance) -> InstanceHealth:
    """Every unfinished run and every run that holds a concurrency slot, with its state."""
    slots, pools = _slots_by_run(instance)
    here = this_host()
    local = _local_storage(instance)
    records = list(instance.get_run_records(filters=RunsFilter(statuses=_UNFINISHED)))
    seen = {r.dagster_run.run_id for r in records}
    holders = [rid for rid in slots if rid not in seen]
    if holders:
        records += list(instance.get_run_records(filters=RunsFilter(run_ids=holders)))
    runs: list[RunHealth] = []
    for rec in records:
        run = rec.dagster_run
        tags = dict(run.tags)
        partition = tags.get("dagster/partition", "")
        h = RunHealth(
            run.run_id, run.job_name, partition, run.status.value, "alive", "", slots=slots.get(run.run_id, [])
        )
        if run.status == DagsterRunStatus.QUEUED:
            h.state, h.reason = "queued", "queued: the daemon starts it when its pools and KB are free"
        elif run.status in _FINISHED:
            h.state, h.reason = "finished", "finished; its slots were never freed" if h.slots else "finished"
        else:
            h.host = tags.get(HOST_TAG) or (here if local else None)
            h.pid = _run_pid(instance, run.run_id, tags)
            if h.host is None:
                h.state, h.reason = "unknown", "no host recorded (launched elsewhere on a shared instance)"
            elif h.host != here:
                h.state, h.reason = "unknown", f"runs on host {h.host}; check it there"
            elif h.pid is None:
                h.state, h.reason = "unknown", "no process recorded for it yet"
            else:
                started = float(tags[PID_STARTED_TAG]) if tags.get(PID_STARTED_TAG) else None
                alive, h.reason = _alive(h.pid, started, rec.create_timestamp.timestamp())
                h.state = "alive" if alive else "dead"
        runs.append(h)
    # slots whose run is not in run storage at all (deleted run)
    for rid in holders:
        if rid not in {r.run_id for r in runs}:
            runs.append(RunHealth(rid, "?", "", "DELETED", "finished", "run deleted; its slots were never freed",
                                  slots=slots[rid]))  # fmt: skip
    return InstanceHealth(runs, pools)


def repair(instance: DagsterInstance, health: InstanceHealth, *, fail: tuple[str, ...] = ()) -> list[str]:
    """Mark dead runs (and the runs in ``fail``) failed and free the slots of dead and finished
    runs. Returns one line per action."""
    done: list[str] = []
    for h in health.runs:
        forced = h.run_id in fail
        if not (h.repairable or forced):
            continue
        if h.state != "finished":
            run = instance.get_run_by_id(h.run_id)
            if run is not None and run.status not in _FINISHED:
                why = h.reason if h.state == "dead" else "marked failed by `corpus doctor --fail`"
                instance.report_run_failed(run, message=f"corpus: {why}; marked failed")
                done.append(f"run {h.run_id} ({h.job} {h.partition}): {why}: marked failed")
        if instance.event_log_storage.supports_global_concurrency_limits:
            instance.event_log_storage.free_concurrency_slots_for_run(h.run_id)  # and its queued steps
        if h.slots:
            done.append(f"run {h.run_id}: freed {len(h.slots)} slot(s): {', '.join(h.slots)}")
    return done


def repair_dead_runs(instance: DagsterInstance) -> list[str]:
    """What ``corpus index`` does before it starts: only what is provably dead or finished."""
    return repair(instance, inspect(instance))


def live_run_ids(instance: DagsterInstance) -> set[str]:
    """The unfinished runs of every KB that are not provably dead (queued ones included)."""
    return {h.run_id for h in inspect(instance).runs if h.state not in ("dead", "finished")}


def live_runs_of(instance: DagsterInstance, kb: str) -> list[RunHealth]:
    """Unfinished runs of one KB, other than this process's, that are not provably dead
    (queued runs included: the daemon will start them)."""
    me = str(psutil.Process().pid)
    out = []
    for h in inspect(instance).runs:
        if h.state in ("dead", "finished"):
            continue
        run = instance.get_run_by_id(h.run_id)
        if run is None:
            continue
        tags = dict(run.tags)
        if tags.get(PID_TAG) == me and tags.get(HOST_TAG) == this_host():
            continue
        if kb in (tags.get(KB_TAG), tags.get("dagster/partition"), tags.get("dagster/partition/kb")):
            out.append(h)
    return out


def find_run(instance: DagsterInstance, invocation: str) -> Any:
    """The run tagged with one invocation id (the run a signal interrupted)."""
    recs = instance.get_run_records(filters=RunsFilter(tags={INVOCATION_TAG: invocation}), limit=1)
    return recs[0].dagster_run if recs else None


def fail_run(instance: DagsterInstance, run: Any, why: str) -> None:
    """Mark one unfinished run failed and free its slots (an interrupted ``corpus index``)."""
    if run.status not in _FINISHED:
        instance.report_run_failed(run, message=f"corpus: {why}")
    if instance.event_log_storage.supports_global_concurrency_limits:
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)


def waiting_for(instance: DagsterInstance, run_id: str) -> str | None:
    """If the run's steps are queued for a pool slot: which pool and who holds it."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return None
    for key in sorted(storage.get_concurrency_keys()):
        info = storage.get_concurrency_info(key)
        if run_id in info.pending_run_ids:
            if not info.limit:
                return (
                    f"waiting for a slot of pool {key!r}, whose limit is {info.limit}: nothing will run; "
                    f"set it with `dagster instance concurrency set {key} 2` (Ctrl-C stops)"
                )
            held = ", ".join(sorted(info.active_run_ids)) or "nobody"
            return (
                f"waiting for a slot of pool {key!r} (limit {info.limit}; held by run(s) {held}); "
                "`corpus doctor` shows them, Ctrl-C stops"
            )
    return None


__all__ = [
    "HOST_TAG", "INVOCATION_TAG", "KB_TAG", "PID_STARTED_TAG", "PID_TAG", "InstanceHealth", "PoolHealth",
    "RunHealth", "fail_run", "find_run", "inspect", "process_tags", "repair", "repair_dead_runs", "this_host",
    "waiting_for",
]  # fmt: skip
