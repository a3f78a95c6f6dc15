"""``corpus strategies``, ``corpus preview`` and ``corpus recommend``: chunking from the shell.

    corpus strategies [--json]
    corpus preview PATH|- [--kb NAME] [--strategy NAME | --plan SNAPSHOT] [--config JSON] [--json]
    corpus recommend PATH [--format FMT] [--llm-enabled] [--json]

``preview`` shows exactly what the index makes of a file (``corpus_pipeline.preview``: the
same parser, image descriptions, plan resolution, tools and parent/child algorithm), so
the ids, offsets and texts it prints are the ones ``corpus index`` writes. No Dagster and
no torch: token counts come from the embedding model's tokenizer alone; only SEMANTIC
with ``similarity: embedding`` loads the model, on a cache miss. Exit codes: 0 ok, 2
invalid input (config, arguments, unreadable file), 1 a model or document error.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

from corpus_pipeline.errors import ConfigError, CorpusError


def register(subparsers: Any) -> None:
    """Add the three sub-commands to the ``corpus`` parser."""
    p = subparsers.add_parser("strategies", help="list chunking strategies with their defaults and versions")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_strategies)

    p = subparsers.add_parser(
        "preview",
        help="chunk a file (or stdin) exactly as the index would: with a strategy, a plan, or a KB's kb.yaml",
    )
    p.add_argument("path", help="a file, or - for stdin")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--strategy", help="one strategy (name or code), as the plan 'CHILD:<strategy>'")
    how.add_argument(
        "--plan", help="a plan snapshot: 'PARENT:STRUCTURE;CHILD:SEMANTIC,RECURSIVE' or 'PARENT:1;CHILD:3,2'"
    )
    p.add_argument(
        "--config",
        help="JSON settings: for --strategy the strategy's keys; for --plan "
        '{"parent": {"RECURSIVE": {...}}, "child": {...}}',
    )
    p.add_argument(
        "--kb",
        help="chunk as this KB's kb.yaml says (plan, overrides, model); --plan / --strategy replace its plan. "
        "Ids equal the index's for a file inside the KB's folder",
    )
    p.add_argument(
        "--model",
        default=None,
        help="embedding model whose tokenizer counts tokens (default: the KB's, multilingual-e5-small)",
    )
    p.add_argument(
        "--format",
        default=None,
        help="document format when it cannot be told from the file (markdown, text, html, docx, pdf)",
    )
    p.add_argument("--no-images", action="store_true", help="do not describe images (no IMAGE chunks; faster)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_preview)

    p = subparsers.add_parser("recommend", help="recommend a parent/child plan for a file, with reasons")
    p.add_argument("path", help="a file, or - for stdin")
    p.add_argument("--format", default=None, help="document format when it cannot be told from the name")
    p.add_argument("--model", default=None, help="embedding model whose tokenizer sizes the chunks")
    p.add_argument("--llm-enabled", action="store_true", help="an LLM is available for LLM splitting")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_recommend)


def _print_json(data: Any) -> None:
    json.dump(data, sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")


def _fail(command: str, exc: Exception, code: int) -> int:
    label = "invalid configuration" if isinstance(exc, ConfigError) else "error"
    print(f"corpus {command}: {label}: {exc}", file=sys.stderr)
    return code


# ---------------------------------------------------------------- strategies


def cmd_strategies(args: argparse.Namespace) -> int:
    from corpus_pipeline.chunking import registry

    items = [registry.describe(cls) for cls in registry.all_strategies()]
    if args.json:
        _print_json(items)
        return 0
    for it in items:
        code = f" ({it['code']})" if it["code"] is not None else ""
        print(f"{it['name']}{code}  {it['version']}")
        print(f"    {it['description']}")
        for prm in it["parameters"]:
            rng = ""
            if prm["choices"]:
                rng = " one of " + "|".join(str(c) for c in prm["choices"])
            elif prm["min"] is not None or prm["max"] is not None:
                rng = f" {prm['min']}..{prm['max']}"
            print(f"    {prm['key']} = {json.dumps(prm['default'])}{rng}: {prm['doc']}")
        print()
    return 0


# ---------------------------------------------------------------- preview


def _load_json(value: str | None) -> dict[str, Any]:
    if not value:
        return {}
    try:
        data = json.loads(value)
    except ValueError as exc:
        raise ConfigError(f"--config is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"--config must be a JSON object, got {type(data).__name__}: {value}")
    return data


def _plan_args(args: argparse.Namespace) -> dict[str, Any]:
    """--strategy / --plan / --config as preview_file's plan and settings."""
    settings = _load_json(args.config)
    if args.strategy:
        from corpus_pipeline.chunking import registry

        name = registry.get(args.strategy).name
        return {"plan": f"CHILD:{name}", "parent_settings": {}, "child_settings": {name: settings}}
    if args.plan:
        unknown = [k for k in settings if k not in ("parent", "child")]
        if unknown:
            raise ConfigError(f"--config: unknown key {unknown[0]!r}; with --plan use 'parent' and 'child'.")
        return {
            "plan": args.plan,
            "parent_settings": settings.get("parent", {}),
            "child_settings": settings.get("child", {}),
        }
    if settings:
        raise ConfigError("--config needs --strategy or --plan (with --kb alone, the KB's kb.yaml settings apply).")
    if not args.kb:
        raise ConfigError("say how to chunk: --strategy NAME, --plan SNAPSHOT, or --kb NAME (the KB's kb.yaml).")
    return {}


def _record(r: Any, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    out = {f.name: getattr(r, f.name) for f in dataclasses.fields(r) if f.name not in drop}
    out["metadata"] = dict(r.metadata)
    return out


def preview_json(result: Any, ms: float) -> dict[str, Any]:
    """The ``corpus preview --json`` document: the records the index would write."""
    chunked = result.chunked
    children = [_record(c) for c in chunked.children]
    by_parent: dict[str, list[dict[str, Any]]] = {}
    for c in children:
        by_parent.setdefault(c["parent_id"], []).append(c)
    parents = []
    for p in chunked.parents:
        rec = _record(p)
        rec["children"] = by_parent.get(p.parent_id, [])
        rec["child_count"] = len(rec["children"])
        parents.append(rec)
    counter = result.kb.config.embedding.model
    return {
        "kb": result.kb.name,
        "strategy_version": result.strategy_version,
        "plan": result.plan.snapshot(),
        "plan_reasons": list(result.plan_reasons),
        "strategy_versions": result.plan.code_versions(),
        "document": {
            k: getattr(result.document, k) for k in ("doc_id", "path", "format", "content_hash", "size_bytes")
        },
        "total_parents": len(parents),
        "total_chunks": len(children),
        "total_chars": len(result.parsed.text),
        "recut_chunks": chunked.stats.get("recut_chunks", 0),
        "images": result.images,
        "token_model": counter,
        "duration_ms": ms,
        **({"llm": result.llm_usage} if result.llm_usage else {}),
        "parents": parents,
        "chunks": children,
    }


def cmd_preview(args: argparse.Namespace) -> int:
    from corpus_pipeline.preview import preview_file, preview_stdin

    try:
        plan_args = _plan_args(args)
        kwargs = {**plan_args, "kb": args.kb, "model": args.model, "fmt": args.format, "images": not args.no_images}
        t0 = time.perf_counter()
        if args.path == "-":
            result = preview_stdin(sys.stdin.buffer.read(), **kwargs)
        else:
            result = preview_file(Path(args.path), **kwargs)
        ms = round((time.perf_counter() - t0) * 1000, 1)
    except ConfigError as exc:
        return _fail("preview", exc, 2)
    except OSError as exc:
        return _fail("preview", ConfigError(f"{args.path}: cannot be read: {exc}"), 2)
    except CorpusError as exc:
        return _fail("preview", exc, 1)
    out = preview_json(result, ms)
    if args.json:
        _print_json(out)
        return 0
    _print_preview(out)
    return 0


def _one_line(s: str, width: int = 100) -> str:
    s = " ".join(s.split())
    return s if len(s) <= width else s[: width - 1] + "…"


_SHOWN_FLAGS = (
    "fallback_from", "fallback_reason", "hard_cut", "proposition_range", "llm_verbatim", "llm_gap",
    "recut_from_tokens", "recut_part",
)  # fmt: skip


def _print_chunk(c: dict[str, Any], indent: str) -> None:
    path = f"  [{c['section_path']}]" if c["section_path"] else ""
    flags = "".join(f"  {k}={v}" for k, v in c["metadata"].items() if k in _SHOWN_FLAGS)
    print(
        f"{indent}#{c['chunk_index']}  {c['start_offset']}..{c['end_offset']}  {c['char_count']} chars  "
        f"{c['token_count']} tokens  {c['chunk_type']}{path}{flags}"
    )
    print(f"{indent}    {_one_line(c['text'])}")


def _print_preview(out: dict[str, Any]) -> None:
    versions = ", ".join(f"{k} {v}" for k, v in sorted(out["strategy_versions"].items()))
    print(
        f"{out['document']['path']} in {out['kb']} @ {out['strategy_version']}: {out['plan']} ({versions}): "
        f"{out['total_parents']} parents, {out['total_chunks']} chunks from {out['total_chars']} characters "
        f"in {out['duration_ms']} ms"
    )
    for reason in out["plan_reasons"]:
        print(f"  - {reason}")
    if out["recut_chunks"]:
        print(f"  {out['recut_chunks']} chunk(s) were over the embedding model's window and were cut again")
    if out["images"]:
        print("  images: " + ", ".join(f"{k} {v}" for k, v in sorted(out["images"].items())))
    if "llm" in out:
        u = out["llm"]
        print(
            f"LLM {u['model']}: {u['calls']} calls ({u['errors']} failed), {u['cache_hits']} cached answers, "
            f"{u['prompt_tokens']} + {u['completion_tokens']} tokens"
        )
    for p in out["parents"]:
        path = f"  [{p['section_path']}]" if p["section_path"] else ""
        print(
            f"parent {p['parent_index']}  {p['start_offset']}..{p['end_offset']}  {p['char_count']} chars  "
            f"{p['child_count']} children  {p['strategy']}{path}"
        )
        for c in p["children"]:
            _print_chunk(c, "  ")


# ---------------------------------------------------------------- recommend


def cmd_recommend(args: argparse.Namespace) -> int:
    from corpus_pipeline.chunking.recommend import recommend
    from corpus_pipeline.embedding.tokens import DEFAULT_MODEL, token_counter_for
    from corpus_pipeline.preview import parse_file, with_stdin

    try:
        if args.path == "-":
            doc, parsed = with_stdin(sys.stdin.buffer.read(), args.format, lambda f, fm: parse_file(f, fmt=fm))
        else:
            doc, parsed = parse_file(Path(args.path), fmt=args.format)
        counter = token_counter_for(args.model or DEFAULT_MODEL)
        rec = recommend(parsed.text, doc.format, parsed.blocks, token_counter=counter, llm_enabled=args.llm_enabled)
    except ConfigError as exc:
        return _fail("recommend", exc, 2)
    except OSError as exc:
        return _fail("recommend", ConfigError(f"{args.path}: cannot be read: {exc}"), 2)
    except CorpusError as exc:
        return _fail("recommend", exc, 1)
    data = rec.to_dict()
    data["path"] = args.path
    if args.json:
        _print_json(data)
        return 0
    print(f"{args.path}: {data['plan']}   ({data['plan_numeric']})")
    for r in data["reasons"]:
        print(f"  - {r}")
    if data["child_settings"]:
        print(f"  child settings: {json.dumps(data['child_settings'])}")
    return 0
