"""``corpus index``: validate every KB's config, register partitions, materialize through
Dagster on the instance in DAGSTER_HOME, and summarize per KB."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from corpus_pipeline.errors import ConfigError
from corpus_pipeline.indexer import index
from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.store.layout import Layout


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("index", help="index knowledge bases (all under $CORPUS_HOME/kbs by default)")
    p.add_argument("--kb", action="append", default=[], metavar="NAME", help="a KB to index (repeatable)")
    p.add_argument("--json", action="store_true", help="print a JSON list of per-KB summaries")
    p.add_argument("--force", action="store_true", help="re-run every partition even if nothing changed")
    p.add_argument(
        "--verbose", "-v", action="store_true",
        help="list every skipped file (by default they are counted by reason and extension)",
    )  # fmt: skip
    p.add_argument(
        "--workers", type=_workers, default=0, metavar="N",
        help="processes that parse and embed a KB's batches at once (default: one per core; 1: all in this "
        "process). Small changes run in this process anyway",
    )  # fmt: skip
    p.add_argument(
        "--wait", type=float, nargs="?", const=-1.0, default=0.0, metavar="SECONDS",
        help="when another process is writing a KB, wait for it (as long as it takes, or SECONDS) "
        "instead of reporting the KB busy",
    )  # fmt: skip
    p.set_defaults(func=run)
    b = sub.add_parser(
        "backfill", help="after a strategy upgrade: rebuild the KBs whose plans use that strategy, and no others"
    )
    b.add_argument("--strategy", required=True, help="strategy name or code whose version changed")
    b.add_argument("--kb", action="append", default=[], metavar="NAME", help="limit to these KBs (repeatable)")
    b.add_argument("--dry-run", action="store_true", help="list the partitions that would be built, build nothing")
    b.add_argument("--json", action="store_true", help="print a JSON list of per-KB summaries")
    b.set_defaults(func=run_backfill)
    d = sub.add_parser(
        "doctor",
        help="show the Dagster instance's state (runs whose process died, slots nobody frees, KBs whose active "
        "version is not kb.yaml's) and, with --repair, repair it",
    )
    d.add_argument("--repair", action="store_true", help="mark dead runs failed and free the slots they hold")
    d.add_argument(
        "--fail", action="append", default=[], metavar="RUN_ID",
        help="also mark this unfinished run failed and free its slots (a run this host cannot check; repeatable)",
    )  # fmt: skip
    d.add_argument("--json", action="store_true", help="print the instance's state as JSON")
    d.set_defaults(func=run_doctor)
    x = sub.add_parser(
        "drop", help="remove a KB's outputs: partitions, search tables, versions, state, Dagster partitions, "
        "what its killed runs staged, and the images no other KB uses (its documents under kbs/ are left alone)",
    )  # fmt: skip
    x.add_argument("--kb", metavar="NAME", help="the KB to remove")
    x.add_argument(
        "--caches", action="store_true",
        help="also remove the caches shared by every KB (vectors, image descriptions, LLM answers: text derived "
        "from documents, also of deleted ones); the next index computes what it needs again",
    )  # fmt: skip
    x.add_argument("--yes", action="store_true", help="do it (without it, only list what would be removed)")
    x.add_argument("--json", action="store_true", help="print what was (or would be) removed as JSON")
    x.set_defaults(func=run_drop)
    u = sub.add_parser(
        "ui", help="start Dagster (webserver + daemon for the sensor and schedule) on this CORPUS_HOME's instance"
    )
    u.add_argument("--port", type=int, default=3000, help="port of the Dagster UI (default 3000)")
    u.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    u.set_defaults(func=run_ui)


def run(args: argparse.Namespace) -> int:
    from corpus_pipeline.progress import open_reporter, should_draw

    layout = Layout.from_env()
    names = args.kb or layout.list_kbs()
    # Step lines on stderr as they happen; bars too on a terminal (never with --json)
    with open_reporter(should_draw(args.json)) as reporter:
        summaries = _interruptible(
            lambda: index(layout, names, force=args.force, wait=args.wait, reporter=reporter, workers=args.workers),
            reporter,
        )
    _print_summaries(summaries, args.json, verbose=args.verbose)
    return 0 if all(s.status == "ok" for s in summaries) else 1


def _workers(raw: str) -> int:
    try:
        n = int(raw)
    except ValueError:
        n = -1
    if n < 1:
        raise argparse.ArgumentTypeError(f"--workers {raw!r}: a number of processes, 1 or more")
    return n


def _interruptible(call: Callable[[], list[Any]], reporter: Any = None) -> list[Any]:
    """Run the indexing; on SIGINT/SIGTERM (the runner has marked its run failed and freed its
    slots) say so and exit at once with 128 + the signal: a step still running in the run's
    thread is abandoned as a ``kill -9`` would leave it (outputs are replaced atomically)."""
    from assets.interrupts import Interrupted

    try:
        return call()
    except Interrupted as exc:
        if reporter is not None:  # (stderr may still point at the abandoned run's compute log)
            reporter.line(f"corpus: {exc}")
            reporter.close()  # the terminal back as it was (no bar left, the cursor shown)
        else:
            print(f"corpus: {exc}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(128 + exc.signo)


def _print_summaries(summaries: list[Any], as_json: bool, *, verbose: bool = False) -> None:
    from corpus_pipeline.cli import print_json

    if as_json:
        print_json([s.to_dict() for s in summaries])
        return
    for s in summaries:
        if s.status == "busy":
            print(f"{s.kb}: BUSY — {s.error}; active: {s.active_version or 'none yet'}")
            continue
        if s.status == "invalid":  # (nothing of it written; the other KBs were indexed)
            print(f"{s.kb}: INVALID CONFIGURATION, not indexed — {s.error}; active: {s.active_version or 'none yet'}")
            continue
        if s.status == "empty":  # (built, with nothing in it: search finds nothing)
            print(f"{s.kb} @ {s.strategy_version}: EMPTY — {s.error}; active: {s.active_version or 'none yet'}")
            _print_skipped(s, verbose, grouped=False)
            continue
        mark = "up to date" if s.up_to_date else ("ok" if s.status == "ok" else "FAILED")
        warned = [c for c in s.checks_failed if c.get("severity") != "ERROR"]
        blocked = [c for c in s.checks_failed if c.get("severity") == "ERROR"]
        if blocked:
            mark += f", {_count(len(blocked), 'blocking check')} failed ({_names(blocked)})"
        if warned:
            mark += f", {_count(len(warned), 'warning')} ({_names(warned)})"
        print(
            f"{s.kb} @ {s.strategy_version}: {mark} — {s.documents} documents "
            f"({s.documents_parsed} parsed, {s.documents_reused} reused, {len(s.failed_documents)} failed), "
            f"{s.parent_blocks} parent blocks, {s.child_chunks} child chunks "
            f"({s.documents_chunked} documents re-chunked), {s.embedded} embedded, {s.reused} reused, "
            f"{s.seconds}s; active: {s.active_version or 'none yet'}"
        )
        if s.recut_chunks:
            print(f"    {s.recut_chunks} chunk(s) were over the embedding model's window and were cut again")
        for f in s.failed_documents:
            print(f"    failed: {f['path']}: {f['error']}")
        _print_skipped(s, verbose)
        for c in blocked + warned:  # ✗ stopped the version; ⚠ the version is built and searchable
            sign = "✗" if c in blocked else "⚠"
            print(f"    {sign} check {c['check']} ({c['severity']}) on {c['asset']} {c['partition']}: {c['message']}")
        if s.error:
            print(f"    error: {s.error}")


def _print_skipped(s: Any, verbose: bool, *, grouped: bool = True) -> None:
    """The files discovery skipped: counted by reason and extension, or (``verbose``) each."""
    from corpus_pipeline.indexer import group_skipped

    if verbose:
        for e in s.skipped_entries:
            print(f"    skipped: {e['path']}: {e['reason']}")
        if s.skipped_count > len(s.skipped_entries):
            print(f"    … and {s.skipped_count - len(s.skipped_entries)} more skipped")
    elif grouped and s.skipped_count:
        print(f"    {_count(s.skipped_count, 'file')} skipped (--verbose lists them):")
        for line in group_skipped(s.skipped_entries, s.skipped_count):
            print(f"      {line}")


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _names(checks: list[dict[str, Any]]) -> str:
    return ", ".join(dict.fromkeys(f"{c['check']} on {c['asset']}" for c in checks))


def run_backfill(args: argparse.Namespace) -> int:
    from corpus_pipeline.chunking import registry
    from corpus_pipeline.cli import print_json
    from corpus_pipeline.instance import prepare_dagster_home
    from corpus_pipeline.versioning import strategy_version, uses_strategy

    layout = Layout.from_env()
    strategy = registry.get(args.strategy).name
    kbs = [resolve_kb(layout.kb_dir(n)) for n in (args.kb or layout.list_kbs())]
    chosen = [kb for kb in kbs if uses_strategy(kb, strategy)]
    if args.dry_run:
        plan = [{"kb": kb.name, "strategy_version": strategy_version(kb)} for kb in chosen]
        if args.json:
            print_json({"strategy": strategy, "partitions": plan})
        else:
            print(f"{strategy}: {len(plan)} partition(s) to build")
            for p in plan:
                print(f"  {p['kb']}|{p['strategy_version']}")
        return 0
    if not chosen:
        print(f"no knowledge base uses {strategy}; nothing to backfill", file=sys.stderr)
        if args.json:
            print_json([])
        return 0
    prepare_dagster_home(layout)
    from assets.runner import backfill_strategy  # Dagster is imported only here
    from corpus_pipeline.progress import open_reporter, should_draw

    with open_reporter(should_draw(args.json)) as reporter:
        summaries = _interruptible(lambda: backfill_strategy(layout, chosen, strategy, reporter=reporter), reporter)
    _print_summaries(summaries, args.json)
    return 0 if all(s.status == "ok" for s in summaries) else 1


def run_ui(args: argparse.Namespace) -> int:
    import os
    import subprocess
    from pathlib import Path

    from corpus_pipeline.instance import prepare_dagster_home

    layout = Layout.from_env()
    os.environ["CORPUS_HOME"] = str(layout.home)  # absolute: the code server runs in the repo folder
    home = prepare_dagster_home(layout)
    repo = Path(__file__).resolve().parents[2]
    print(f"DAGSTER_HOME={home}; open http://{args.host}:{args.port}", file=sys.stderr)
    dagster = Path(sys.executable).with_name("dagster")
    cmd = [str(dagster), "dev", "-h", args.host, "-p", str(args.port), "-w", str(repo / "workspace.yaml")]
    return subprocess.call(cmd, cwd=repo, env=os.environ.copy())


def run_doctor(args: argparse.Namespace) -> int:
    from corpus_pipeline.cli import print_json
    from corpus_pipeline.instance import prepare_dagster_home
    from corpus_pipeline.store.versions import active_version, yielded_version

    layout = Layout.from_env()
    home = prepare_dagster_home(layout)
    from dagster import DagsterInstance

    from assets import health  # Dagster is imported only here

    instance = DagsterInstance.get()
    report = health.inspect(instance)
    known = {r.run_id for r in report.runs}
    unknown_ids = [r for r in args.fail if r not in known]
    if unknown_ids:
        raise ConfigError(
            f"--fail {unknown_ids[0]}: no unfinished run or slot holder with that id (see `corpus doctor`)"
        )
    kbs = []
    for name in layout.list_kbs():  # (kb.yaml as it is now, not as the last index saw it)
        act = active_version(layout, name)
        try:
            cur, error = yielded_version(layout, name), None
        except ConfigError as exc:
            cur, error = None, str(exc)
        if cur != act:
            kbs.append({"kb": name, "active": act, "current": cur, "error": error,
                        "fix": f"corpus index --kb {name}" if error is None else "fix kb.yaml, then corpus index"})  # fmt: skip
    actions = health.repair(instance, report, fail=tuple(args.fail)) if (args.repair or args.fail) else []
    problems = report.problems
    if args.json:
        print_json({"dagster_home": str(home), **report.to_dict(), "kbs_not_current": kbs, "repaired": actions})
        return 0 if (not problems or actions) else 1
    print(f"Dagster instance: {home} ({type(instance.run_storage).__name__})")
    for pool in report.pools:
        print(f"  pool {pool.pool}: limit {pool.limit}, {pool.claimed} claimed, {pool.pending} waiting"
              + (f" (held by {', '.join(pool.holders)})" if pool.holders else ""))  # fmt: skip
    if not report.runs:
        print("  no unfinished runs, no slots held")
    for r in report.runs:
        slots = f"; holds {', '.join(r.slots)}" if r.slots else ""
        print(f"  run {r.run_id} {r.job} {r.partition} {r.status}: {r.state} — {r.reason}{slots}")
    for k in kbs:
        if k["error"]:
            print(f"  kb {k['kb']}: active {k['active'] or '(none yet)'}; its kb.yaml is invalid: {k['error']}")
        else:
            print(
                f"  kb {k['kb']}: active {k['active'] or '(none yet)'} but kb.yaml yields {k['current']}: "
                f"run `{k['fix']}`"
            )
    for line in actions:
        print(f"  repaired: {line}")
    if problems and not actions:
        fixable = [r for r in problems if r.repairable]
        if fixable:
            print(f"{len(fixable)} run(s) can be repaired: run `corpus doctor --repair`")
        for r in problems:
            if r.state == "unknown":
                print(f"  run {r.run_id}: cannot be checked from here ({r.reason}); if it is dead, "
                      f"`corpus doctor --fail {r.run_id}`")  # fmt: skip
        return 1
    return 0


def _drop_caches(layout: Layout, yes: bool, as_json: bool, *, quiet: bool = False) -> int:
    """Remove ``warehouse/cache`` while holding every KB's lock (no index is writing it)."""
    import contextlib
    import shutil

    from corpus_pipeline.cli import print_json
    from corpus_pipeline.store.locks import kb_lock

    size = sum(f.stat().st_size for f in layout.cache.rglob("*") if f.is_file()) if layout.cache.is_dir() else 0
    if yes:
        with contextlib.ExitStack() as stack:
            for name in layout.list_kbs():
                stack.enter_context(kb_lock(layout, name))
            shutil.rmtree(layout.cache, ignore_errors=True)
    if quiet:
        return 0
    if as_json:
        print_json({"dry_run": not yes, "caches": str(layout.cache), "bytes": size})
    else:
        verb = "removed" if yes else "would remove (run again with --yes)"
        print(f"{verb}: the caches under {layout.cache} ({size / 1048576:.1f} MB)")
    return 0


def run_drop(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from corpus_pipeline.cli import print_json
    from corpus_pipeline.instance import prepare_dagster_home
    from corpus_pipeline.store.drop import DropReport, drop_kb
    from corpus_pipeline.store.layout import check_kb_name
    from corpus_pipeline.store.locks import kb_lock
    from corpus_pipeline.store.versions import known_versions

    layout = Layout.from_env()
    if args.kb is None:
        if not args.caches:
            raise ConfigError("corpus drop: say what to remove: --kb NAME, --caches, or both")
        return _drop_caches(layout, args.yes, args.json)
    kb = check_kb_name(args.kb)
    versions = known_versions(layout, kb)
    if not args.yes:
        parts = sorted(f"{p.parent.name}/{p.name}" for p in layout.warehouse.glob(f"*/kb={kb}"))
        plan = DropReport(kb, partitions=parts, versions=versions)
        if args.json:
            print_json({"dry_run": True, **asdict(plan)})
        else:
            print(f"would remove {len(parts)} partition folder(s) and {len(versions)} version(s) of {kb!r}: "
                  "run again with --yes")  # fmt: skip
        return 0
    if args.caches:
        _drop_caches(layout, True, False, quiet=args.json)
    with kb_lock(layout, kb):
        prepare_dagster_home(layout)
        from dagster import DagsterInstance  # Dagster is imported only here

        from assets import health

        instance = DagsterInstance.get()
        # Runs that may be running (the daemon's hold no KB lock): their staging is kept, and
        # while one runs the KB's images wait for their grace period (store/drop.py says why).
        report = drop_kb(layout, kb, live_runs=lambda: health.live_run_ids(instance))
        if instance.has_dynamic_partition("kb", kb):
            instance.delete_dynamic_partition("kb", kb)
        others = {v for name in layout.list_kbs() if name != kb for v in known_versions(layout, name)}
        for v in report.versions:
            if v not in others and instance.has_dynamic_partition("strategy_version", v):
                instance.delete_dynamic_partition("strategy_version", v)
    still = layout.kbs / kb
    if args.json:
        print_json(asdict(report))
    else:
        print(f"dropped {kb!r}: {len(report.partitions)} partition folder(s), {len(report.tables)} search table(s), "
              f"{len(report.versions)} version(s), {len(report.staging)} dead run(s)' staged batches, "
              f"{report.images_removed} unused image(s)")  # fmt: skip
        if report.images_kept:
            print(f"kept {report.images_kept} image(s) only {kb!r} used while {', '.join(report.images_kept_for)} "
                  "is being indexed (it may be storing the same images): once they are an hour old, the next index "
                  "that parses or the next drop removes them")  # fmt: skip
        if still.is_dir():
            print(f"its documents are still in {still}: the next `corpus index` (or the sensor) indexes them again; "
                  "remove the folder to stop that")  # fmt: skip
    return 0
