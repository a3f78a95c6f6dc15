"""``corpus versions`` and ``corpus activate``: a KB's strategy versions, and rollback.

Search reads a KB's *active* version. ``corpus index`` activates a new version only after
it was built and its blocking checks passed; ``corpus activate`` switches back (or
forward) to any version that is built, with no downtime: nothing is rebuilt.
"""

from __future__ import annotations

import argparse

from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.versions import activate, list_versions


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
    before = activate(layout, args.kb, args.version)
    if args.json:
        print_json({"kb": args.kb, "active": args.version, "previous": before})
    else:
        print(f"{args.kb}: active version {before} -> {args.version}")
    return 0
