"""``corpus index``: validate every KB's config, register partitions, materialize through
Dagster on the instance in DAGSTER_HOME, and summarize per KB."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from corpus_pipeline.errors import ConfigError
from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.versions import register_version


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("index", help="index knowledge bases (all under $CORPUS_HOME/kbs by default)")
    p.add_argument("--kb", action="append", default=[], metavar="NAME", help="a KB to index (repeatable)")
    p.add_argument("--json", action="store_true", help="print a JSON list of per-KB summaries")
    p.add_argument("--force", action="store_true", help="re-run every partition even if nothing changed")
    p.set_defaults(func=run)
    b = sub.add_parser(
        "backfill", help="after a strategy upgrade: rebuild the KBs whose plans use that strategy, and no others"
    )
    b.add_argument("--strategy", required=True, help="strategy name or code whose version changed")
    b.add_argument("--kb", action="append", default=[], metavar="NAME", help="limit to these KBs (repeatable)")
    b.add_argument("--dry-run", action="store_true", help="list the partitions that would be built, build nothing")
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=run_backfill)
    u = sub.add_parser(
        "ui", help="start Dagster (webserver + daemon for the sensor and schedule) on this CORPUS_HOME's instance"
    )
    u.add_argument("--port", type=int, default=3000)
    u.add_argument("--host", default="127.0.0.1")
    u.set_defaults(func=run_ui)


def run(args: argparse.Namespace) -> int:
    from corpus_pipeline.instance import prepare_dagster_home

    layout = Layout.from_env()
    names = args.kb or layout.list_kbs()
    if not names:
        raise ConfigError(f"no knowledge bases under {layout.kbs}: make a folder there with your documents in it.")
    # Every KB's configuration is validated before anything is written.
    kbs = [resolve_kb(layout.kb_dir(n)) for n in names]
    planned = [(kb, register_version(layout, kb)) for kb in kbs]
    prepare_dagster_home(layout)

    from assets.runner import index_kbs  # Dagster is imported only here

    summaries = index_kbs(layout, planned, force=args.force)
    _print_summaries(summaries, args.json)
    return 0 if all(s.status == "ok" for s in summaries) else 1


def _print_summaries(summaries: list[Any], as_json: bool) -> None:
    from corpus_pipeline.cli import print_json

    if as_json:
        print_json([s.to_dict() for s in summaries])
        return
    for s in summaries:
        mark = "up to date" if s.up_to_date else ("ok" if s.status == "ok" else "FAILED")
        print(
            f"{s.kb} @ {s.strategy_version}: {mark} — {s.documents} documents "
            f"({s.documents_parsed} parsed, {s.documents_reused} reused, {len(s.failed_documents)} failed), "
            f"{s.parent_blocks} parent blocks, {s.child_chunks} child chunks "
            f"({s.documents_chunked} documents re-chunked), {s.embedded} embedded, {s.reused} reused, "
            f"{s.seconds}s; active: {s.active_version}"
        )
        if s.recut_chunks:
            print(f"    {s.recut_chunks} chunk(s) were over the embedding model's window and were cut again")
        for f in s.failed_documents:
            print(f"    failed: {f['path']}: {f['error']}")
        for c in s.checks_failed:
            print(f"    check {c['check']} ({c['severity']}) on {c['asset']} {c['partition']}: {c['message']}")
        if s.error:
            print(f"    error: {s.error}")


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

    summaries = backfill_strategy(layout, chosen, strategy)
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
