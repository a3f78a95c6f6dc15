"""``corpus strategies``, ``corpus preview`` and ``corpus recommend``: chunking from the shell.

    corpus strategies [--json]
    corpus preview PATH|- (--strategy NAME [--config JSON] | --plan SNAPSHOT [--config JSON]) [--json]
    corpus recommend PATH [--format FMT] [--llm-enabled] [--json]

No Dagster and no torch: token counts come from the embedding model's tokenizer alone
(``tokens``). Only SEMANTIC with ``similarity: embedding`` loads the embedding model, when
it runs. Markdown and text files are chunked as they are; DOCX, HTML and PDF go through
the project's parser first (lazily imported). Exit codes: 0 ok, 2 invalid input (config,
arguments, unreadable file), 1 a model or document error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from corpus_pipeline.errors import ConfigError, CorpusError

_TEXT_SUFFIXES = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".mdx": "markdown",
    ".txt": "text",
    ".text": "text",
    "": "text",
}
_PARSED_SUFFIXES = {".docx": "docx", ".html": "html", ".htm": "html", ".pdf": "pdf"}


def register(subparsers: Any) -> None:
    """Add the three sub-commands to the ``corpus`` parser."""
    p = subparsers.add_parser("strategies", help="list chunking strategies with their defaults and versions")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_strategies)

    p = subparsers.add_parser("preview", help="chunk a file (or stdin) with a strategy or a plan")
    p.add_argument("path", help="a file, or - for stdin")
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--strategy", help="a strategy name or code (see corpus strategies)")
    how.add_argument(
        "--plan", help="a plan snapshot: 'PARENT:STRUCTURE;CHILD:SEMANTIC,RECURSIVE' or 'PARENT:1;CHILD:3,2'"
    )
    p.add_argument(
        "--config",
        help="JSON settings: for --strategy the strategy's keys; for --plan "
        '{"parent": {"RECURSIVE": {...}}, "child": {...}}',
    )
    p.add_argument(
        "--model", default=None, help="embedding model whose tokenizer counts tokens (default all-MiniLM-L6-v2)"
    )
    p.add_argument(
        "--format",
        default=None,
        help="document format when it cannot be told from the name (markdown, text, html, docx, pdf)",
    )
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


# ---------------------------------------------------------------- reading input


def _read_input(path: str, fmt: str | None) -> tuple[str, str, tuple]:
    """The document's text, format and parsed blocks (blocks only for parsed formats)."""
    if path == "-":
        raw = sys.stdin.buffer.read()
        return _decode(raw), (fmt or "text"), ()
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{path}: no such file")
    suffix = p.suffix.lower()
    fmt = fmt or _TEXT_SUFFIXES.get(suffix) or _PARSED_SUFFIXES.get(suffix) or "text"
    if fmt in ("markdown", "text"):
        return _decode(p.read_bytes()), fmt, ()
    return _parse(p, fmt)


def _decode(raw: bytes) -> str:
    try:
        from corpus_pipeline.parsing.textdecode import decode_text
    except ImportError:  # pragma: no cover - the parser package is part of the project
        return raw.decode("utf-8")
    return decode_text(raw)


def _parse(p: Path, fmt: str) -> tuple[str, str, tuple]:
    from corpus_pipeline.models import DocStatus, Document
    from corpus_pipeline.parsing.parse import parse_document

    doc = Document(
        kb="preview", doc_id="preview", path=p.name, format=fmt, size_bytes=p.stat().st_size, content_hash="", plan=""
    )
    parsed = parse_document(doc, p.parent.resolve())
    if parsed.status != DocStatus.OK.value:
        raise ConfigError(f"{p}: cannot be parsed as {fmt}: {parsed.error}")
    return parsed.text, fmt, tuple(parsed.blocks)


# ---------------------------------------------------------------- preview


def _chunk_json(c: Any) -> dict[str, Any]:
    return {
        "index": c.index,
        "text": c.text,
        "char_count": c.char_count,
        "token_count": c.token_count,
        "start_offset": c.start_offset,
        "end_offset": c.end_offset,
        "overlap_chars": c.overlap_chars,
        "chunk_type": c.chunk_type,
        "section_path": c.section_path,
        "strategy": c.strategy,
        "strategy_version": c.strategy_version,
        "derived": c.derived,
        "metadata": dict(c.metadata),
    }


def _needs_embedder(steps: Any) -> bool:
    return any(getattr(s.config, "similarity", None) == "embedding" for s in steps)


def _preview_llm(steps: Any) -> Any:
    """The LLM client from the environment (OPENAI_BASE_URL, OPENAI_API_KEY,
    CORPUS_LLM_MODEL), caching under $CORPUS_HOME, when a step calls an LLM; else None."""
    from corpus_pipeline.chunking.plan import Plan
    from corpus_pipeline.llm import open_llm, plans_call_llm
    from corpus_pipeline.paths import Layout

    if not plans_call_llm([Plan(parent=(), child=tuple(steps))]):
        return None
    return open_llm(None, cache_dir=Layout.from_env().cache)


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


def cmd_preview(args: argparse.Namespace) -> int:
    from corpus_pipeline.chunking import registry
    from corpus_pipeline.chunking.base import ChunkContext
    from corpus_pipeline.chunking.pipeline import chunk_document, chunk_text
    from corpus_pipeline.chunking.plan import Role, Step, build_plan
    from corpus_pipeline.tokens import DEFAULT_MODEL, token_counter_for

    model = args.model or DEFAULT_MODEL
    try:
        settings = _load_json(args.config)
        if args.strategy:
            cls = registry.get(args.strategy)
            cfg = registry.make_config(cls.name, settings, where=f"--config ({cls.name})")
            steps: tuple[Step, ...] = (Step(cls.name, Role.PRIMARY, cfg),)
            plan = None
        else:
            unknown = [k for k in settings if k not in ("parent", "child")]
            if unknown:
                raise ConfigError(f"--config: unknown key {unknown[0]!r}; with --plan use 'parent' and 'child'.")
            plan = build_plan(args.plan, settings.get("parent"), settings.get("child"), where="--config")
            steps = plan.parent + plan.child
        text, fmt, blocks = _read_input(args.path, args.format)
    except ConfigError as exc:
        return _fail("preview", exc, 2)
    except OSError as exc:
        return _fail("preview", ConfigError(f"{args.path}: cannot be read: {exc}"), 2)

    try:
        counter = token_counter_for(model)
        embedder = None
        if _needs_embedder(steps):
            from corpus_pipeline.embedding import load_embedder

            embedder = load_embedder(model)
        llm = _preview_llm(steps)
        ctx = ChunkContext(text=text, token_counter=counter, blocks=blocks, embedder=embedder, llm=llm)
        t0 = time.perf_counter()
        if plan is None:
            chunks = chunk_text(steps, ctx)
            parents = None
        else:
            doc = chunk_document(plan, ctx)
            chunks, parents = doc.children, doc.parents
        ms = round((time.perf_counter() - t0) * 1000, 1)
    except ConfigError as exc:
        return _fail("preview", exc, 2)
    except CorpusError as exc:
        return _fail("preview", exc, 1)

    versions = {s.strategy: registry.get(s.strategy).version for s in steps}
    if plan is None:
        name = steps[0].strategy
        out: dict[str, Any] = {"strategy": name, "strategy_version": versions[name]}
    else:
        out = {
            "strategy": plan.snapshot(),
            "plan": plan.snapshot(),
            "strategy_version": ",".join(f"{k}:{v}" for k, v in sorted(versions.items())),
            "strategy_versions": versions,
        }
    out.update(
        {
            "format": fmt,
            "total_chunks": len(chunks),
            "total_chars": len(text),
            "duration_ms": ms,
            "token_model": model,
        }
    )
    if llm is not None:  # what the preview cost: calls, cache hits, tokens (never the key)
        out["llm"] = {"model": llm.model, **llm.usage.to_dict()}
    if parents is None:
        out["chunks"] = [_chunk_json(c) for c in chunks]
    else:
        out["total_parents"] = len(parents)
        out["parents"] = [
            {
                "index": p.index,
                "text": p.text,
                "char_count": p.char_count,
                "token_count": p.token_count,
                "start_offset": p.start_offset,
                "end_offset": p.end_offset,
                "overlap_chars": p.overlap_chars,
                "section_path": p.section_path,
                "strategy": p.strategy,
                "start_chunk_no": p.start_chunk_no,
                "end_chunk_no": p.end_chunk_no,
                "child_count": p.child_count,
                "metadata": dict(p.metadata),
                "children": [_chunk_json(c) for c in chunks if c.parent_index == p.index],
            }
            for p in parents
        ]
    if args.json:
        _print_json(out)
        return 0
    _print_preview(out)
    return 0


def _one_line(s: str, width: int = 100) -> str:
    s = " ".join(s.split())
    return s if len(s) <= width else s[: width - 1] + "…"


def _print_chunk(c: dict[str, Any], indent: str) -> None:
    path = f"  [{c['section_path']}]" if c["section_path"] else ""
    shown = ("fallback_from", "fallback_reason", "hard_cut", "proposition_range", "llm_verbatim", "llm_gap")
    flags = "".join(f"  {k}={v}" for k, v in c["metadata"].items() if k in shown)
    print(
        f"{indent}#{c['index']}  {c['start_offset']}..{c['end_offset']}  {c['char_count']} chars  "
        f"{c['token_count']} tokens  {c['chunk_type']}{path}{flags}"
    )
    print(f"{indent}    {_one_line(c['text'])}")


def _print_preview(out: dict[str, Any]) -> None:
    print(
        f"{out['strategy']} ({out['strategy_version']}): {out['total_chunks']} chunks from "
        f"{out['total_chars']} characters in {out['duration_ms']} ms"
    )
    if "llm" in out:
        u = out["llm"]
        print(
            f"LLM {u['model']}: {u['calls']} calls ({u['errors']} failed), {u['cache_hits']} cached answers, "
            f"{u['prompt_tokens']} + {u['completion_tokens']} tokens"
        )
    if "parents" in out:
        for p in out["parents"]:
            path = f"  [{p['section_path']}]" if p["section_path"] else ""
            print(
                f"parent {p['index']}  {p['start_offset']}..{p['end_offset']}  {p['char_count']} chars  "
                f"{p['child_count']} children{path}"
            )
            for c in p["children"]:
                _print_chunk(c, "  ")
    else:
        for c in out["chunks"]:
            _print_chunk(c, "")


# ---------------------------------------------------------------- recommend


def cmd_recommend(args: argparse.Namespace) -> int:
    from corpus_pipeline.chunking.recommend import recommend
    from corpus_pipeline.tokens import DEFAULT_MODEL, token_counter_for

    try:
        text, fmt, blocks = _read_input(args.path, args.format)
        counter = token_counter_for(args.model or DEFAULT_MODEL)
        rec = recommend(text, fmt, blocks, token_counter=counter, llm_enabled=args.llm_enabled)
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
