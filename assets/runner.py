"""Materializing KBs from code (``corpus index``, ``corpus backfill``, tests).

Registers the partitions on the instance, then runs only what is stale (see
``corpus_pipeline.freshness``): the per-KB parse job when documents or parsing settings
changed, the per-version job when the version was never built or was built from an older
parse. Every run is recorded on the instance and shows in the UI like any other.
"""

import contextlib
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from dagster import (
    DagsterEventType,
    DagsterInstance,
    Definitions,
    JobDefinition,
    MultiPartitionKey,
)
from upath import UPath

from assets import health
from assets.definitions import build_definitions
from assets.partitions import kb_version_key, split_key
from corpus_pipeline import freshness, indexing, progress
from corpus_pipeline.indexing.publish import activate_if_current
from corpus_pipeline.indexing.stats import ChunkStats, DiscoverStats, EmbedStats, ParseStats, read_checks, read_stats
from corpus_pipeline.kbconfig import KnowledgeBase
from corpus_pipeline.store.drop import collect_images
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.locks import KBBusyError, kb_lock
from corpus_pipeline.store.parquet import read_manifest
from corpus_pipeline.store.versions import active_version, register_version

# Progress and failures are printed by corpus itself (below); Dagster's console logger
# would repeat every failure with a stack trace.
_QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


@dataclass
class KBIndexSummary:
    kb: str
    strategy_version: str
    status: str = "ok"  # ok | failed | busy (another process was writing the KB; nothing done)
    up_to_date: bool = False  # nothing had changed: no run was needed
    reason: str = ""
    active_version: str | None = None
    partitions_run: list[str] = field(default_factory=list)
    documents: int = 0
    documents_parsed: int = 0
    documents_reused: int = 0
    failed_documents: list[dict[str, str]] = field(default_factory=list)
    skipped_entries: list[dict[str, str]] = field(default_factory=list)  # {path, reason}: symlinks, unreadable, ...
    skipped_count: int = 0
    documents_chunked: int = 0
    parent_blocks: int = 0
    child_chunks: int = 0
    recut_chunks: int = 0  # chunks cut again to fit the embedding model's window (this run)
    embedded: int = 0
    reused: int = 0  # chunks whose vectors came from the cache
    checks_failed: list[dict[str, Any]] = field(default_factory=list)  # {asset, partition, check, severity, message}
    runs: list[str] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None

    @property
    def warnings(self) -> list[dict[str, Any]]:
        """The failed checks of severity WARN (the version is built and searchable)."""
        return [c for c in self.checks_failed if c.get("severity") != "ERROR"]

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "warnings": len(self.warnings)}


def register_partitions(instance: DagsterInstance, kb: str, version: str) -> None:
    if not instance.has_dynamic_partition("kb", kb):
        instance.add_dynamic_partitions("kb", [kb])
    if not instance.has_dynamic_partition("strategy_version", version):
        instance.add_dynamic_partitions("strategy_version", [version])


class _RunWatcher:
    """Reads one run's new event-log entries while it runs (from the main thread, beside the
    run's own) and tells the reporter: steps started and finished, checks failed, and the
    stages' progress lines (``corpus_pipeline.progress``). Reading is incremental (a cursor
    on the storage id), and best effort: an error is counted, three in a row stop the
    reading, and the run is never touched. At the end, the run's own events fill in what
    was not seen, so every step's line is printed once, live or not.

    SQLite: the event-log storage serializes its connections with one lock per instance
    (``SqliteEventLogStorage._db_lock``), so a read waits for a write of the run's thread
    and the other way round; both use the same instance object."""

    def __init__(self, instance: DagsterInstance, run_id: str, partition: str, reporter: progress.Reporter) -> None:
        self.instance, self.run_id, self.partition, self.reporter = instance, run_id, partition, reporter
        self.cursor: str | None = None
        self.seen: set[tuple[str, ...]] = set()
        self.errors = 0
        self.reads = 0
        self.retried: dict[str, str] = {}  # step -> the error its last retried attempt ended with

    def poll(self) -> None:
        if self.errors >= 3 or not self.run_id:
            return
        try:
            while True:
                conn = self.instance.get_records_for_run(self.run_id, cursor=self.cursor, limit=200)
                self.reads += 1
                for rec in conn.records:
                    self._entry(rec.event_log_entry)
                self.cursor = conn.cursor
                if not conn.has_more:
                    break
            self.errors = 0
        except Exception:  # noqa: BLE001 - a progress line is not worth failing a run for
            self.errors += 1

    def finish(self, result: Any) -> None:
        """The last entries, then whatever the reading missed, from the run's own events."""
        self.poll()
        for ev in result.all_events if result is not None else []:
            self._event(ev)

    def _entry(self, entry: Any) -> None:
        if entry.dagster_event is not None:
            self._event(entry.dagster_event)
            return
        update = progress.ProgressUpdate.from_message(entry.user_message)
        if update is not None and entry.step_key:
            self.reporter.step_progress(progress.step_label(entry.step_key), self.partition, update)

    def _event(self, ev: Any) -> None:
        data: Any = ev.event_specific_data  # (its type depends on the event's)
        kind = ev.event_type
        step = progress.step_label(str(ev.step_key or ""))
        key: tuple[str, ...] = (kind.value, step)
        if kind == DagsterEventType.ASSET_CHECK_EVALUATION:
            if data.passed:
                return
            key = (kind.value, data.asset_key.to_user_string(), data.check_name)
        elif kind == DagsterEventType.STEP_UP_FOR_RETRY:
            if data.error:
                self.retried[step] = _cause(data.error)
            return
        elif kind not in _STEP_EVENTS:
            return
        if key in self.seen:
            return
        self.seen.add(key)
        r, part = self.reporter, self.partition
        if kind == DagsterEventType.STEP_START:
            r.step_started(step, part)
        elif kind == DagsterEventType.STEP_SUCCESS:
            r.step_finished(step, part, "ok", data.duration_ms / 1000)
        elif kind == DagsterEventType.STEP_FAILURE:
            r.step_finished(step, part, "failed", None, _failure(data.error, self.retried.get(step)))
        elif kind == DagsterEventType.STEP_SKIPPED:
            r.step_finished(step, part, "skipped", None)
        else:
            r.check_failed(data.check_name, data.asset_key.to_user_string(), part, data.severity.value)


_STEP_EVENTS = {
    DagsterEventType.STEP_START,
    DagsterEventType.STEP_SUCCESS,
    DagsterEventType.STEP_FAILURE,
    DagsterEventType.STEP_SKIPPED,
}


def _written_by(folder: UPath, run_id: str | None) -> bool:
    return run_id is None or read_manifest(folder).get("run_id") == run_id


def _fill_parse(summary: KBIndexSummary, layout: Layout, kb: str, run_id: str | None) -> None:
    """Document counts from the parse partitions' recorded stats (``run_id``: only what that
    run wrote; None: what is on disk, when nothing ran)."""
    docs_dir, parsed_dir = layout.partition_dir("documents", kb), layout.partition_dir("parsed_blocks", kb)
    found = read_stats(docs_dir, DiscoverStats) if _written_by(docs_dir, run_id) else None
    parsed = read_stats(parsed_dir, ParseStats) if _written_by(parsed_dir, run_id) else None
    if found is not None:
        summary.documents = found.documents
        summary.skipped_entries, summary.skipped_count = list(found.skipped), found.skipped_count
    if parsed is not None:
        summary.documents = parsed.documents or summary.documents
        if run_id is None:  # nothing ran: everything on disk is reused
            summary.documents_reused = parsed.documents
        else:
            summary.documents_parsed, summary.documents_reused = parsed.parsed, parsed.reused
        summary.failed_documents = list(parsed.failed)


def _fill_version(summary: KBIndexSummary, layout: Layout, kb: str, version: str, run_id: str | None) -> None:
    """Chunk and embedding counts and failed checks from the version's recorded stats."""
    parts = {a: layout.partition_dir(a, kb, version) for a in ("parent_blocks", "child_chunks", "chunk_embeddings")}
    parents = read_stats(parts["parent_blocks"], ChunkStats)
    children = read_stats(parts["child_chunks"], ChunkStats)
    emb = read_stats(parts["chunk_embeddings"], EmbedStats)
    summary.parent_blocks = parents.rows if parents else 0
    summary.child_chunks = children.rows if children else 0
    fresh = {a: _written_by(f, run_id) for a, f in parts.items()}
    if run_id is None or not fresh["child_chunks"]:
        summary.reused = summary.child_chunks
    else:
        summary.documents_chunked = children.documents if children else 0
        summary.recut_chunks = children.recut_chunks if children else 0
        if emb is not None and fresh["chunk_embeddings"]:
            summary.embedded, summary.reused = emb.embedded, emb.reused
    key = f"{kb}|{version}"
    for asset, folder in parts.items():
        if run_id is not None and not fresh[asset]:
            continue
        for c in read_checks(folder):
            if not c.get("passed", True):
                summary.checks_failed.append(
                    {"asset": asset, "partition": key, "check": c.get("name"), "severity": c.get("severity"),
                     "message": c.get("message")}
                )  # fmt: skip


class Interrupted(Exception):
    """``corpus index`` got SIGINT or SIGTERM: its run was marked failed and its slots freed."""

    def __init__(self, signo: int, message: str) -> None:
        super().__init__(message)
        self.signo = signo


def job_for(job: str, home: str, workers: int, batch_workers: int = 0) -> JobDefinition:
    """``job`` of the code location over ``home``: with ``workers`` > 1 on the multiprocess
    executor (at most ``workers`` steps at once), else on the in-process one; its stages'
    batches cut for ``batch_workers`` (0: ``workers`` when > 1, else ``CORPUS_WORKERS``).
    What ``corpus index`` runs, and what every step process of a ``--workers N`` run
    rebuilds (``reconstructable``)."""
    from assets.executors import MAX_CONCURRENT_ENV

    if workers > 1:
        os.environ[MAX_CONCURRENT_ENV] = str(workers)
        return build_definitions(home, executor="multiprocess", workers=batch_workers or workers).resolve_job_def(job)
    return build_definitions(home, executor="in_process", workers=batch_workers).resolve_job_def(job)


def _run_job(
    defs: Definitions,
    job: str,
    partition_key: str | MultiPartitionKey,
    instance: DagsterInstance,
    tags: dict[str, str],
    workers: int,
    home: str,
) -> Any:
    """One run of ``job`` (``execute_job`` of ``job_for``): in this process (``workers`` 1),
    else every step in its own process, ``workers`` at a time (Dagster's multiprocess
    executor). Not ``execute_in_process``: that keeps every step's output in memory until
    the run ends (for ``output_for_node``), so a serial index would hold every batch and
    every stage's tables of the partition at once; here an output lives on disk only."""
    from dagster import build_reconstructable_job, execute_job

    key = str(partition_key)
    corpus = (defs.resources or {}).get("corpus")
    batch_workers = int(getattr(corpus, "workers", 0) or 0)  # what ``defs`` cuts batches for
    args: Any = (job, home, workers, batch_workers)
    recon = build_reconstructable_job("assets.runner", "job_for", reconstructable_args=args)
    part_tags = defs.resolve_job_def(job).get_tags_for_partition_key(key, None)
    with execute_job(recon, instance=instance, tags={**part_tags, **tags}, run_config=_QUIET) as result:
        return result


def execute(
    defs: Definitions,
    job: str,
    partition_key: str | MultiPartitionKey,
    kb: str,
    instance: DagsterInstance,
    say: Callable[[str], None],
    reporter: progress.Reporter | None = None,
    workers: int = 1,
    home: str = "",
) -> Any:
    """Run one partition of a job in process, tagged with this process (so a later
    ``corpus index`` can tell it died), in a worker thread: Dagster defers interrupts to
    its step boundaries and does not check them while a step waits for a pool slot, so the
    main thread answers SIGINT/SIGTERM itself: it marks the run failed, frees its slots and
    raises ``Interrupted``. What the run wrote is what a ``kill -9`` would leave: every
    output is replaced atomically, the previous version stays active.

    Meanwhile the main thread reads the run's new events twice a second and tells
    ``reporter`` (``_RunWatcher``): each step's line as it ends, progress as it goes."""
    invocation = uuid.uuid4().hex
    tags = {**health.process_tags(kb), health.INVOCATION_TAG: invocation}
    box: dict[str, Any] = {}
    label = "|".join(split_key(partition_key)) if isinstance(partition_key, MultiPartitionKey) else partition_key
    watcher = _RunWatcher(instance, "", label, reporter or progress.LineReporter(say))

    def work() -> None:
        try:
            box["result"] = _run_job(defs, job, partition_key, instance, tags, workers, home)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=work, name=f"corpus-{job}", daemon=True)
    # SQLAlchemy imports parts of its ORM lazily; two threads importing them at once race
    # ("partially initialized module"), so they are imported here, before the run's thread.
    import sqlalchemy.orm  # noqa: F401

    # The reading's first query, also before the run's thread (its imports).
    health.find_run(instance, invocation)
    got: list[int] = []

    def on_signal(signo: int, _frame: FrameType | None) -> None:
        got.append(signo)
        raise KeyboardInterrupt

    main = threading.current_thread() is threading.main_thread()
    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)} if main else {}
    try:
        worker.start()
        told, waited = False, 0.0
        while worker.is_alive():
            worker.join(0.25)
            waited += 0.25
            if not watcher.run_id:  # execute_job names its own run: found by this invocation's tag
                found = health.find_run(instance, invocation)
                if found is not None:
                    watcher.run_id = found.run_id
            if waited % 0.5 == 0 and watcher.run_id:  # twice a second (~5 ms of CPU a read)
                watcher.poll()
            if not told and waited >= 3.0 and waited % 3.0 < 0.25:
                note = _waiting_note(instance, invocation)
                if note:
                    say(f"  … {note}")
                    told = True
    except KeyboardInterrupt:
        name = signal.Signals(got[0]).name if got else "SIGINT"
        run = health.find_run(instance, invocation)
        _stop_step_processes()
        if run is not None:
            health.fail_run(instance, run, f"interrupted by {name}")
        where = f"run {run.run_id} ({job} {partition_key})" if run is not None else f"{job} {partition_key}"
        raise Interrupted(
            got[0] if got else signal.SIGINT,
            f"interrupted by {name}: {where} marked failed and its slots freed; the active version is unchanged",
        ) from None
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    if "error" in box:
        raise box["error"]
    result = box["result"]
    watcher.finish(result)
    from resources.batch_io import remove_staging

    remove_staging(home, result.run_id)  # what a failed run's batches left (a merge removes its own)
    return result


def _stop_step_processes() -> None:
    """The step processes of a multiprocess run (children of this process), on interrupt."""
    import psutil

    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            child.kill()


def _waiting_note(instance: DagsterInstance, invocation: str) -> str | None:
    """Whether the run is queued for a pool slot (read beside the run's own thread: a
    failure to read says nothing, it never stops the run)."""
    try:
        run = health.find_run(instance, invocation)
        return health.waiting_for(instance, run.run_id) if run is not None else None
    except Exception:  # noqa: BLE001 - a progress note is not worth failing a run for
        return None


def index_kb(
    defs: Definitions,
    instance: DagsterInstance,
    layout: Layout,
    kb: KnowledgeBase,
    version: str,
    say: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
    *,
    force: bool = False,
    wait: float = 0.0,
    reporter: progress.Reporter | None = None,
    workers: int = 1,
) -> KBIndexSummary:
    """Bring one KB's ``version`` up to date: parse if stale, then chunk, embed, index.

    One writer per KB: the KB's file lock is held throughout, and a run of the KB that
    Dagster's daemon is executing is waited for (``wait`` seconds; 0: the KB is reported
    busy at once, the other KBs go on). What happens is told to ``reporter`` as it
    happens (default: ``say`` gets a line per step and failed check)."""
    t0 = time.monotonic()
    if reporter is None:
        reporter = progress.LineReporter(say)
    else:
        say = reporter.line
    for line in health.repair_dead_runs(instance):
        say(f"  repaired: {line}")
    try:
        with kb_lock(layout, kb.name, wait=wait, say=say):
            _wait_for_other_runs(instance, kb.name, wait, say)
            return _index_kb_locked(defs, instance, layout, kb, version, reporter, force=force, t0=t0, workers=workers)
    except KBBusyError as exc:
        say(f"▶ {kb.name}: busy — {exc}")
        return KBIndexSummary(
            kb.name, version, status="busy", reason="busy", error=str(exc),
            active_version=active_version(layout, kb.name), seconds=round(time.monotonic() - t0, 2),
        )  # fmt: skip


def _wait_for_other_runs(instance: DagsterInstance, kb: str, wait: float, say: Callable[[str], None]) -> None:
    t0 = time.monotonic()
    told = False
    while True:
        others = health.live_runs_of(instance, kb)
        if not others:
            return
        r = others[0]
        what = f"run {r.run_id} ({r.job} {r.partition}, {r.status}) launched by Dagster"
        if wait == 0:
            raise KBBusyError(f"knowledge base {kb!r} is being written by {what}: wait for it, or run with --wait")
        if 0 < wait < time.monotonic() - t0:
            raise KBBusyError(f"knowledge base {kb!r} is still being written by {what} after {wait:g} s")
        if not told:
            say(f"▶ {kb}: waiting for {what} to finish")
            told = True
        time.sleep(1.0)


def _index_kb_locked(
    defs: Definitions,
    instance: DagsterInstance,
    layout: Layout,
    kb: KnowledgeBase,
    version: str,
    reporter: progress.Reporter,
    *,
    force: bool,
    t0: float,
    workers: int = 1,
) -> KBIndexSummary:
    say = reporter.line
    home = str(layout.home)
    summary = KBIndexSummary(kb.name, version)
    register_partitions(instance, kb.name, version)
    discovered = indexing.discover_documents(kb).table
    fresh = freshness.check(layout, kb, version, discovered)
    summary.reason = "forced" if force else fresh.reason
    parse_ok = True
    parse_run: str | None = None
    if force or fresh.parse_needed:
        say(f"▶ {kb.name}: parse (partition {kb.name}) — {summary.reason}")
        previous = None if force else indexing.previous_parse_state(layout.partition_dir("parsed_blocks", kb.name))
        todo = len(indexing.documents_to_parse(kb, discovered, previous))
        r1 = execute(defs, "parse_kb", kb.name, kb.name, instance, say, reporter, _processes(workers, todo), home)
        summary.runs.append(r1.run_id)
        summary.partitions_run.append(kb.name)
        parse_run = r1.run_id
        parse_ok = r1.success
        if not r1.success:
            summary.status, summary.error = "failed", _first_error(r1)
    _fill_parse(summary, layout, kb.name, parse_run)
    if parse_run is not None and parse_ok:
        collect_images(layout)  # images of deleted documents (unused by every KB, past a grace period)
    version_run: str | None = None
    if parse_ok and (force or fresh.index_needed):
        key = kb_version_key(kb.name, version)
        say(f"▶ {kb.name}: chunk, embed, index (partition {kb.name}|{version})")
        built = layout.partition_dir("chunk_embeddings", kb.name, version).exists()
        todo = summary.documents_parsed if built and not force else discovered.num_rows
        r2 = execute(defs, "index_version", key, kb.name, instance, say, reporter, _processes(workers, todo), home)
        summary.runs.append(r2.run_id)
        summary.partitions_run.append(f"{kb.name}|{version}")
        version_run = r2.run_id
        _fill_version(summary, layout, kb.name, version, version_run)
        if not r2.success:
            summary.status, summary.error = "failed", _first_error(r2, summary.checks_failed)
    if not summary.partitions_run:
        summary.up_to_date = True
        _fill_version(summary, layout, kb.name, version, None)
        before = active_version(layout, kb.name)
        activate_if_current(layout, kb.name, version)  # kb.yaml reverted to a built version
        if before != version and active_version(layout, kb.name) == version:
            say(f"▶ {kb.name}: {version} is built and matches kb.yaml — activated (was {before})")
        else:
            say(f"▶ {kb.name}: up to date ({version}) — nothing changed")
    summary.active_version = active_version(layout, kb.name)
    summary.seconds = round(time.monotonic() - t0, 2)
    return summary


def _processes(workers: int, documents: int) -> int:
    """``workers`` processes when ``documents`` to process make more than one batch
    (``indexing.batches``), else 1: the forkserver's start (seconds of imports, once a run)
    and a step process's model load cost more than a small change takes in this process."""
    from corpus_pipeline.indexing import batches

    return workers if workers > 1 and batches.batch_count(documents, workers, batches.rule("parse")) > 1 else 1


def _first_error(result: Any, checks_failed: list[dict[str, Any]] | None = None) -> str:
    """What stopped a run: a blocking check's own message (partition, document, chunk,
    figure, limit, fix), else the first failed step's error."""
    for c in checks_failed or []:
        if c.get("severity") == "ERROR":
            return f"blocking check {c['check']} on {c['asset']} ({c['partition']}) failed: {c['message']}"
    retried: dict[str, str] = {}
    for ev in result.all_events:
        data: Any = ev.event_specific_data
        if ev.event_type == DagsterEventType.STEP_UP_FOR_RETRY and data.error:
            retried[str(ev.step_key)] = _cause(data.error)
        if ev.event_type == DagsterEventType.STEP_FAILURE and data.error:
            return f"{ev.step_key}: {_failure(data.error, retried.get(str(ev.step_key)))}"
    return "run failed"


def _failure(error: Any, retried: str | None) -> str:
    """A failed step's error; for a batch that failed again after its retries, the error of
    its last attempt (Dagster's own says only "Exceeded max_retries of 2")."""
    if error is None:
        return retried or ""
    message = _cause(error)
    if retried and message.startswith("Exceeded max_retries"):
        return f"{retried} (failed again after {message.removeprefix('Exceeded max_retries of ').strip()} retries)"
    return message


def _wrapper(cls_name: str) -> bool:
    """Dagster's errors around a step's own (and a retry policy's request to retry it)."""
    return cls_name.startswith(("Dagster", "RetryRequested"))


def _cause(error: Any) -> str:
    """The message of the error that started it all: Dagster wraps the step's exception in
    "Error occurred while executing op ...", which says nothing about what went wrong."""
    while getattr(error, "cause", None) is not None and _wrapper(str(getattr(error, "cls_name", ""))):
        error = error.cause
    message = str(error.message).strip()
    if "[Errno 28]" in message or "No space left on device" in message:
        message += " — the disk of the warehouse is full: free space (or move CORPUS_HOME) and run again; the active version is unchanged"
    return message


def index_kbs(
    layout: Layout,
    kbs: list[tuple[KnowledgeBase, str]],
    say: Callable[[str], None] | None = None,
    *,
    force: bool = False,
    wait: float = 0.0,
    reporter: progress.Reporter | None = None,
    workers: int = 1,
) -> list[KBIndexSummary]:
    """``workers`` > 1: the stages' batches run in that many processes at once (Dagster's
    multiprocess executor; the instance must be persistent, as ``corpus``'s is)."""
    instance = DagsterInstance.get()
    defs = build_definitions(str(layout.home), workers=workers)
    kwargs: dict[str, Any] = {"say": say} if say else {}
    return [
        index_kb(
            defs, instance, layout, kb, version, force=force, wait=wait, reporter=reporter, workers=workers, **kwargs
        )
        for kb, version in kbs
    ]


def backfill_strategy(
    layout: Layout,
    kbs: list[KnowledgeBase],
    strategy: str,
    say: Callable[[str], None] | None = None,
    *,
    reporter: progress.Reporter | None = None,
) -> list[KBIndexSummary]:
    """After a strategy's code version changed: materialize the new version of exactly the
    KBs whose plans use it (their other partitions and other KBs are left alone)."""
    from corpus_pipeline.versioning import uses_strategy

    chosen = [(kb, register_version(layout, kb)) for kb in kbs if uses_strategy(kb, strategy)]
    return index_kbs(layout, chosen, say, reporter=reporter)
