"""``corpus search``: hybrid search over a KB's active strategy version."""

from __future__ import annotations

import argparse

from corpus_pipeline.errors import StoreError
from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.paths import Layout
from corpus_pipeline.versioning import active_version


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("search", help="search a knowledge base (vector + keyword, fused)")
    p.add_argument("query")
    p.add_argument("--kb", required=True, help="knowledge base name (folder under $CORPUS_HOME/kbs)")
    p.add_argument("--top-k", type=int, default=5)
    p.add_argument("--version", help="strategy version to search (default: the KB's active one)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from corpus_pipeline.cli import print_json
    from corpus_pipeline.retrieval import search

    layout = Layout.from_env()
    kb = resolve_kb(layout.kb_dir(args.kb))
    version = args.version or active_version(layout.versions, kb.name)
    if version is None:
        raise StoreError(f"knowledge base {kb.name!r} has no active version yet; run `corpus index --kb {kb.name}`")
    hits = search(layout.lancedb, kb.name, version, args.query, model=kb.config.embedding.model, top_k=args.top_k)
    if args.json:
        print_json({"kb": kb.name, "strategy_version": version, "query": args.query, "results": [h.to_dict() for h in hits]})
        return 0
    print(f"{kb.name} @ {version}: {len(hits)} results for {args.query!r}")
    for i, h in enumerate(hits, 1):
        where = f"{h.doc_path}" + (f" — {h.section_path}" if h.section_path else "")
        snippet = " ".join(h.text.split())
        print(f"\n{i}. [{h.score:.4f} {'+'.join(h.channels)}] {where}  ({h.chunk_id})")
        print(f"   {snippet[:300]}{'…' if len(snippet) > 300 else ''}")
    return 0
