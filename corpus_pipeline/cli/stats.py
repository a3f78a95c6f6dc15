"""``corpus stats``: chunk-size distributions of a KB version, from its Parquet partitions.

    corpus stats --kb NAME                          the active version (else the newest)
    corpus stats --kb NAME --version V [--json]
    corpus stats --kb NAME --version V1 --version V2   side by side, with the difference
    corpus stats --kb NAME --compare                the active version and the one before

Computed with DuckDB over ``<warehouse>/{child_chunks,parent_blocks}/kb=NAME/
strategy_version=V/*.parquet``; no Dagster. ``--json`` prints, for one version, an
object with ``kb``, ``strategy_version``, ``active`` and for ``child_chunks`` and
``parent_blocks`` a ``count`` and ``char_count`` / ``token_count`` objects with ``min``,
``p5``, ``p50``, ``p95``, ``max`` (and ``mean``); child_chunks adds ``by_chunk_type``,
``over_token_limit`` and a token ``histogram``. For several versions: ``{"kb",
"strategy_versions", "versions": [one object per version], "delta"}``.
"""

from __future__ import annotations

import argparse
from typing import Any

from corpus_pipeline.errors import StoreError
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.versions import active_version


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("stats", help="chunk-size distributions of a KB version (or two, side by side)")
    p.add_argument("--kb", required=True, help="knowledge base name (folder under $CORPUS_HOME/kbs)")
    p.add_argument(
        "--version",
        action="append",
        default=[],
        metavar="V",
        help="strategy version (repeat to compare; default: the active one)",
    )
    p.add_argument("--compare", action="store_true", help="the active version beside the previous one with data")
    p.add_argument("--bins", type=int, default=10, help="histogram bins (default 10)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def choose_versions(layout: Layout, kb: str, requested: list[str], compare: bool) -> list[str]:
    from corpus_pipeline.quality.stats import versions_with_data

    have = versions_with_data(layout, kb)
    active = active_version(layout, kb)
    if requested:
        versions = list(dict.fromkeys(requested))
        if compare and len(versions) == 1:
            others = [v for v in have if v != versions[0]]
            if not others:
                raise StoreError(f"{kb!r} has no other version with data to compare {versions[0]!r} with.")
            versions = [others[-1], versions[0]]
        return versions
    if not have:
        raise StoreError(
            f"knowledge base {kb!r} has no chunks under {layout.warehouse}; run `corpus index --kb {kb}` first."
        )
    current = active if active in have else have[-1]
    if not compare:
        return [current]
    others = [v for v in have if v != current]
    if not others:
        raise StoreError(f"{kb!r} has only one version with data ({current}); nothing to compare.")
    return [others[-1], current]


def run(args: argparse.Namespace) -> int:
    from corpus_pipeline.cli import print_json
    from corpus_pipeline.quality.stats import compare, partition_stats

    if not 1 <= args.bins <= 100:
        raise StoreError(f"--bins {args.bins} is out of range: allowed 1..100.")
    from corpus_pipeline.kbconfig import require_known_kb

    layout = Layout.from_env()
    kb = require_known_kb(layout.kbs, layout.versions, args.kb)
    versions = choose_versions(layout, kb, args.version, args.compare)
    stats = [partition_stats(layout, kb, v, bins=args.bins) for v in versions]
    if args.json:
        if len(stats) == 1:
            print_json(stats[0])
        else:
            print_json({"kb": kb, "strategy_versions": versions, "versions": stats, "delta": compare(stats)})
        return 0
    print(render(kb, stats))
    return 0


def _fmt(v: Any) -> str:
    return "-" if v is None else str(v)


def render(kb: str, stats: list[dict[str, Any]]) -> str:
    """A table with one column per version, then the token histogram of each version."""
    heads = [s["strategy_version"] + (" (active)" if s.get("active") else "") for s in stats]
    rows: list[tuple[str, list[str]]] = [
        ("plan", [_fmt(s.get("plan")) for s in stats]),
        ("written", [_fmt(s.get("written_at")) for s in stats]),
    ]
    for asset in ("child_chunks", "parent_blocks"):
        rows.append((asset, [""] * len(stats)))
        rows.append(("  count", [_fmt((s.get(asset) or {}).get("count")) for s in stats]))
        rows.append(("  documents", [_fmt((s.get(asset) or {}).get("documents")) for s in stats]))
        for col in ("char_count", "token_count"):
            for q in ("min", "p5", "p50", "p95", "max"):
                rows.append((f"  {col} {q}", [_fmt(((s.get(asset) or {}).get(col) or {}).get(q)) for s in stats]))
        if asset == "child_chunks":
            types = sorted({t for s in stats for t in ((s.get(asset) or {}).get("by_chunk_type") or {})})
            for t in types:
                rows.append(
                    (f"  type {t}", [_fmt(((s.get(asset) or {}).get("by_chunk_type") or {}).get(t, 0)) for s in stats])
                )
            limit = next((s[asset].get("token_limit") for s in stats if (s.get(asset) or {}).get("token_limit")), None)
            if limit is not None:
                rows.append(
                    (f"  over {limit} tokens", [_fmt((s.get(asset) or {}).get("over_token_limit")) for s in stats])
                )
    w0 = max(len(r[0]) for r in rows)
    widths = [max(len(h), *(len(r[1][i]) for r in rows)) for i, h in enumerate(heads)]
    lines = [
        f"knowledge base {kb}",
        " " * w0 + "  " + "  ".join(h.ljust(w) for h, w in zip(heads, widths, strict=True)),
    ]
    for label, vals in rows:
        lines.append(label.ljust(w0) + "  " + "  ".join(v.ljust(w) for v, w in zip(vals, widths, strict=True)))
    for s, head in zip(stats, heads, strict=True):
        h = (s.get("child_chunks") or {}).get("histogram")
        if not h or not h.get("bins"):
            continue
        peak = max(b["count"] for b in h["bins"]) or 1
        limit = (s.get("child_chunks") or {}).get("token_limit")
        lines.append(f"\ntoken_count of child chunks, {head}" + (f" (model limit {limit})" if limit else ""))
        for b in h["bins"]:
            bar = "█" * max(1 if b["count"] else 0, round(40 * b["count"] / peak))
            over = "  ⚠ over limit" if limit is not None and b["hi"] - 1 > limit and b["count"] else ""
            lines.append(f"  {b['lo']:>6}–{b['hi'] - 1:<6} {b['count']:>6}  {bar}{over}")
    return "\n".join(lines)
