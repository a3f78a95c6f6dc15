"""Materializing KBs from code (``corpus index``, ``corpus backfill``, tests).

Registers the partitions on the instance, then runs only what is stale (see
``corpus_pipeline.freshness``): the per-KB parse job when documents or parsing settings
changed, the per-version job when the version was never built or was built from an older
parse. Every run is recorded on the instance and shows in the UI like any other.
"""

import os
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from dagster import (
    DagsterInstance,
    Definitions,
    JobDefinition,
    MultiPartitionKey,
)
from upath import UPath

from assets import health
from assets.definitions import build_definitions
from assets.interrupts import in_worker_thread
from assets.partitions import kb_version_key, split_key
from assets.run_errors import first_error
from assets.watch import RunWatcher
from corpus_pipeline import freshness, indexing, progress
from corpus_pipeline.indexer import KBIndexSummary
from corpus_pipeline.indexing.publish import activate_if_current
from corpus_pipeline.indexing.stats import ChunkStats, DiscoverStats, EmbedStats, ParseStats, read_checks, read_stats
from corpus_pipeline.kbconfig import KnowledgeBase
from corpus_pipeline.store.drop import collect_images
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.locks import KBBusyError, kb_lock
from corpus_pipeline.store.parquet import read_manifest
from corpus_pipeline.store.staging import remove_dead_staging
from corpus_pipeline.store.versions import active_version, register_version

# Progress and failures are printed by corpus itself (below); Dagster's console logger
# would repeat every failure with a stack trace.
_QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def register_partitions(instance: DagsterInstance, kb: str, version: str) -> None:
    if not instance.has_dynamic_partition("kb", kb):
        instance.add_dynamic_partitions("kb", [kb])
    if not instance.has_dynamic_partition("strategy_version", version):
        instance.add_dynamic_partitions("strategy_version", [version])


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
    raises ``Interrupted`` (``assets.interrupts``). What the run wrote is what a ``kill -9``
    would leave: every output is replaced atomically, the previous version stays active.

    Meanwhile the main thread reads the run's new events twice a second and tells
    ``reporter`` (``assets.watch``): each step's line as it ends, progress as it goes."""
    invocation = uuid.uuid4().hex
    tags = {**health.process_tags(kb), health.INVOCATION_TAG: invocation}
    label = "|".join(split_key(partition_key)) if isinstance(partition_key, MultiPartitionKey) else partition_key
    watcher = RunWatcher(instance, "", label, reporter or progress.LineReporter(say))
    # SQLAlchemy imports parts of its ORM lazily; two threads importing them at once race
    # ("partially initialized module"), so they are imported here, before the run's thread.
    import sqlalchemy.orm  # noqa: F401

    # The reading's first query, also before the run's thread (its imports).
    health.find_run(instance, invocation)
    told: list[bool] = []

    def tick(waited: float) -> None:
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
                told.append(True)

    def on_interrupt(signal_name: str) -> str:
        run = health.find_run(instance, invocation)
        if run is not None:
            health.fail_run(instance, run, f"interrupted by {signal_name}")
        return f"run {run.run_id} ({job} {partition_key})" if run is not None else f"{job} {partition_key}"

    result = in_worker_thread(
        lambda: _run_job(defs, job, partition_key, instance, tags, workers, home), f"corpus-{job}", tick, on_interrupt
    )
    watcher.finish(result)
    from resources.batch_io import remove_staging

    remove_staging(home, result.run_id)  # what a failed run's batches left (a merge removes its own)
    return result


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
    # The KB's lock is held and no other run of it is live (waited for above): any staging
    # folder of the KB is a dead run's (kill -9), holding document text. Removed first.
    dead = remove_dead_staging(layout, kb.name)
    if dead:
        say(f"  removed the staged batches of {len(dead)} dead run(s) of {kb.name}: {', '.join(dead)}")
    register_partitions(instance, kb.name, version)
    found = indexing.discover_documents(kb)
    discovered = found.table
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
            summary.status, summary.error = "failed", first_error(r1)
    _fill_parse(summary, layout, kb.name, parse_run)
    if parse_run is None and isinstance(found.stats, DiscoverStats):  # what is skipped now, not at the last parse
        summary.skipped_entries, summary.skipped_count = list(found.stats.skipped), found.stats.skipped_count
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
            summary.status, summary.error = "failed", first_error(r2, summary.checks_failed)
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


def index_planned(
    layout: Layout,
    planned: Sequence[tuple[KnowledgeBase, str]],
    *,
    force: bool = False,
    wait: float = 0.0,
    reporter: progress.Reporter | None = None,
    workers: int = 1,
) -> list[KBIndexSummary]:
    """The Dagster indexer (``corpus_pipeline.indexer``): the CORPUS_HOME's instance made
    ready, then ``index_kbs`` (``workers`` 0: one per CPU)."""
    from corpus_pipeline.instance import prepare_dagster_home

    prepare_dagster_home(layout)
    return index_kbs(
        layout, list(planned), force=force, wait=wait, reporter=reporter, workers=workers or os.cpu_count() or 1
    )


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
