"""``corpus lineage CHUNK_ID``: where a chunk came from, which plan cut it, which run wrote it.

    corpus lineage 9b3015b4a4b76a572ed18485 [--json] [--context 200]

Chunk ids are printed by ``corpus search`` (and in ``--json`` as ``hits[].chunk_id``); a
unique prefix of 8+ characters also works. Reads only the Parquet partitions and their
``_manifest.json`` (no Dagster): the chunk, its parent block, the parsed blocks it spans,
the document with the source excerpt highlighted, the plan and strategy version, the
fallbacks taken and the run that wrote it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from corpus_pipeline.errors import StoreError
from corpus_pipeline.store.layout import Layout


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("lineage", help="trace a chunk to its document, parent block, plan and run")
    p.add_argument("chunk_id", help="the chunk's id (from `corpus search`), or a unique prefix of 8+ characters")
    p.add_argument("--context", type=int, default=200, help="characters of source shown around the chunk (default 200)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from corpus_pipeline.cli import print_json
    from corpus_pipeline.lineage import trace_chunk

    if not 0 <= args.context <= 100_000:
        raise StoreError(f"--context {args.context} is out of range: allowed 0..100000 characters.")
    info = trace_chunk(Layout.from_env(), args.chunk_id, context_chars=args.context)
    if args.json:
        print_json(info)
    else:
        print(render(info, color=sys.stdout.isatty()))
    return 0


def _cfg(config: dict[str, Any] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in (config or {}).items())


def _one_line(text: str | None, n: int = 70) -> str:
    t = " ".join((text or "").split())
    return t if len(t) <= n else t[: n - 1] + "…"


def render(info: dict[str, Any], *, color: bool = False) -> str:
    c, doc, parent, plan = info["chunk"], info["document"], info.get("parent"), info["plan"]
    active = " (active)" if info.get("active") else ""
    lines = [
        f"chunk     {info['chunk_id']}  {c.get('chunk_type')}  #{c.get('chunk_index')} of its document",
        f"          {info['kb']} @ {info['strategy_version']}{active}",
        f"          {c.get('char_count')} chars, {c.get('token_count')} tokens, overlap {c.get('overlap_chars') or 0} chars"
        + (", derived text" if c.get("derived") else ""),
        f"          cut by {c.get('strategy')} {c.get('strategy_code_version') or ''}".rstrip(),
        f"document  {doc.get('path')}" + (f" ({doc['format']})" if doc.get("format") else ""),
    ]
    if doc.get("absolute_path"):
        lines.append(f"          {doc['absolute_path']}")
    pages = doc.get("pages") or ([doc["page_num"]] if doc.get("page_num") is not None else [])
    lines.append(
        f"          offsets [{doc['start_offset']}:{doc['end_offset']}]"
        + (f", page {', '.join(map(str, pages))}" if pages else "")
        + (f", section {doc['section_path']!r}" if doc.get("section_path") else "")
        + ("" if doc.get("offsets_verified", True) else "  (offsets do not match the current parse)")
    )
    if parent:
        lines.append(
            f"parent    {parent['parent_id']}  #{parent.get('parent_index')} [{parent.get('start_offset')}:{parent.get('end_offset')}] "
            f"{parent.get('char_count')} chars, {parent.get('token_count')} tokens, by {parent.get('strategy')}"
        )
    else:
        lines.append(f"parent    {c.get('parent_id')} (not found)")
    for i, b in enumerate(info.get("blocks") or []):
        head = "blocks    " if i == 0 else "          "
        page = f" p{b['page_num']}" if b.get("page_num") is not None else ""
        lines.append(
            f"{head}#{b['block_index']} {b['block_type']}{page} [{b['start_offset']}:{b['end_offset']}] {_one_line(b.get('text_start'), 60)}"
        )
    lines.append(
        f"plan      {plan.get('snapshot')}"
        + (f"  (override {plan['override']!r})" if plan.get("override") else "  (the KB's plan)")
    )
    for role in ("parent", "child"):
        for step in plan.get(role) or []:
            lines.append(f"            {role:<6} {step.get('strategy')} {step.get('role')}: {_cfg(step.get('config'))}")
    fb = info.get("fallbacks") or []
    if not fb:
        lines.append("fallbacks none")
    for i, f in enumerate(fb):
        head = "fallbacks " if i == 0 else "          "
        body = ", ".join(f"{k}={v}" for k, v in f.items() if k != "level" and v not in (None, ""))
        lines.append(f"{head}{f['level']}: {body}")
    runs = info.get("runs") or {}
    first = True
    for asset, r in runs.items():
        if not r:
            continue
        lines.append(
            f"{'run       ' if first else '          '}{asset:<16} run {r.get('run_id')} at {r.get('written_at')}"
        )
        first = False
    if first:
        lines.append("run       unknown (no _manifest.json)")
    ex = doc.get("excerpt")
    if ex:
        on, off = ("\033[7m", "\033[0m") if color else ("«", "»")
        text = ("…" if ex["context_start"] > 0 else "") + ex["before"] + on + ex["span"] + off + ex["after"]
        lines.append("source    (the chunk's span " + ("highlighted" if color else "between « and »") + ")")
        lines.extend("  " + ln for ln in text.splitlines())
    for n in info.get("notes") or []:
        lines.append(f"note      {n}")
    return "\n".join(lines)
