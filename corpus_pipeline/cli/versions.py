"""``corpus versions`` and ``corpus activate``: a KB's strategy versions, and rollback.

Search reads a KB's *active* version. ``corpus index`` activates a new version only after
it was built and its blocking checks passed; ``corpus activate`` switches back (or
forward) to any version that is built, with no downtime: nothing is rebuilt.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from corpus_pipeline.errors import ConfigError
from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.store.layout import Layout, check_kb_name
from corpus_pipeline.store.snapshots import Snapshot, SnapshotNotFound, resolve
from corpus_pipeline.store.versions import active_version, set_active, version_info, versions_by_age
from corpus_pipeline.versioning import strategy_version


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("versions", help="list a KB's strategy versions: counts, age, which is active")
    p.add_argument("--kb", required=True, metavar="NAME", help="knowledge base name (folder under $CORPUS_HOME/kbs)")
    p.add_argument("--json", action="store_true", help="print a JSON list of versions")
    p.set_defaults(func=run_versions)
    a = sub.add_parser("activate", help="make a built version the one search reads (rollback)")
    a.add_argument("--kb", required=True, metavar="NAME", help="knowledge base name (folder under $CORPUS_HOME/kbs)")
    a.add_argument("version", help="the strategy version to activate (see `corpus versions --kb NAME`)")
    a.add_argument("--json", action="store_true", help="print the switch as JSON")
    a.set_defaults(func=run_activate)


def _age(ts: str | None) -> str:
    if not ts:
        return "?"
    secs = (datetime.now(UTC) - datetime.fromisoformat(ts)).total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{int(secs // size)}{unit}"
    return f"{int(secs)}s"


def _rows(manifest: dict[str, Any]) -> int | None:
    rows = manifest.get("rows")
    return int(rows["data"]) if isinstance(rows, dict) and "data" in rows else None


def list_versions(layout: Layout, kb: str) -> list[dict[str, Any]]:
    check_kb_name(kb)
    active = active_version(layout, kb)
    try:
        current = strategy_version(resolve_kb(layout.kb_dir(kb)))
    except ConfigError:
        current = None
    out = []
    for v in versions_by_age(layout, kb):
        info = version_info(layout, kb, v)
        try:
            snap: Snapshot | None = resolve(layout, kb, v)
        except SnapshotNotFound:
            snap = None  # (registered, not published: being built, stopped by its checks)
        rows = {asset: _rows(snap.manifest(asset)) if snap else None for asset in ("parent_blocks", "child_chunks")}
        built_at = snap.manifest("child_chunks").get("written_at") if snap else None
        out.append(
            {
                "kb": kb,
                "strategy_version": v,
                "active": v == active,
                "current": v == current,
                "built": snap is not None and layout.search_table_dir(kb, v).is_dir(),
                "plan": ((info.get("inputs") or {}).get("plan") or {}).get("snapshot"),
                "registered_at": info.get("registered_at"),
                "built_at": built_at,
                "age": _age(info.get("registered_at")),
                "parent_blocks": rows["parent_blocks"],
                "child_chunks": rows["child_chunks"],
            }
        )
    return out


def run_versions(args: argparse.Namespace) -> int:
    from corpus_pipeline.cli import print_json

    layout = Layout.from_env()
    from corpus_pipeline.kbconfig import require_known_kb

    require_known_kb(layout.kbs, layout.versions, args.kb)
    rows = list_versions(layout, args.kb)
    if args.json:
        print_json(rows)
        return 0
    if not rows:
        print(f"{args.kb}: no versions yet; run `corpus index --kb {args.kb}`")
        return 0
    print(f"{'':2}{'version':<24}{'plan':<40}{'parents':>8}{'chunks':>8}{'age':>6}  state")
    for r in rows:
        state = ", ".join(
            s for s, on in (("active", r["active"]), ("current config", r["current"]), ("built", r["built"])) if on
        )
        print(
            f"{'*' if r['active'] else ' ':2}{r['strategy_version']:<24}{(r['plan'] or '?'):<40}"
            f"{r['parent_blocks'] if r['parent_blocks'] is not None else '-':>8}"
            f"{r['child_chunks'] if r['child_chunks'] is not None else '-':>8}{r['age']:>6}  {state}"
        )
    return 0


def run_activate(args: argparse.Namespace) -> int:
    from corpus_pipeline.cli import print_json

    layout = Layout.from_env()
    rows = {r["strategy_version"]: r for r in list_versions(layout, args.kb)}
    r = rows.get(args.version)
    if r is None:
        raise ConfigError(
            f"{args.version!r} is not a version of {args.kb!r}; known: {', '.join(rows) or 'none'} (see `corpus versions --kb {args.kb}`)"
        )
    if not r["built"]:
        raise ConfigError(
            f"version {args.version!r} of {args.kb!r} has no search table; build it first with `corpus index`"
        )
    before = active_version(layout, args.kb)
    set_active(layout, args.kb, args.version)
    if args.json:
        print_json({"kb": args.kb, "active": args.version, "previous": before})
    else:
        print(f"{args.kb}: active version {before} -> {args.version}")
    return 0
