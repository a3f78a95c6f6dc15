"""``corpus search``: hybrid search over a KB's active strategy version, with parent elevation.

    corpus search "how long are monthly snapshots kept" --kb product-manual-en [--top-k 5] [--json]

Results are parent blocks (the evidence to give an LLM), each with the child chunks that
matched (``hits``: chunk id for ``corpus lineage``, fused score, channels, first chars).
Settings come from the KB's ``search:`` section in ``kb.yaml``.
"""

from __future__ import annotations

import argparse

from corpus_pipeline.errors import StoreError
from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.versions import active_version


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("search", help="search a knowledge base (vector + keyword, fused, elevated to parent blocks)")
    p.add_argument("query")
    p.add_argument("--kb", required=True, help="knowledge base name (folder under $CORPUS_HOME/kbs)")
    p.add_argument("--top-k", type=int, default=None, help="parent blocks to return (default: search.final_top_k, 5)")
    p.add_argument("--version", help="strategy version to search (default: the KB's active one)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from corpus_pipeline.cli import print_json
    from corpus_pipeline.retrieval import Searcher, SearchSettings

    layout = Layout.from_env()
    kb = resolve_kb(layout.kb_dir(args.kb))
    version = args.version or active_version(layout, kb.name)
    if version is None:
        raise StoreError(f"knowledge base {kb.name!r} has no active version yet; run `corpus index --kb {kb.name}`")
    settings = SearchSettings.from_mapping(kb.config.search).with_(final_top_k=args.top_k)
    searcher = Searcher.open(layout, kb, version, settings=settings)
    try:
        result = searcher.search(args.query)
    finally:
        searcher.close()
    if args.json:
        print_json(result.to_dict(settings))
        return 0
    print(f"{kb.name} @ {version}: {len(result.results)} results for {args.query!r}")
    for w in result.warnings:
        print(f"  warning: {w}")
    for i, r in enumerate(result.results, 1):
        where = r.doc_path + (f" — {r.section_path}" if r.section_path else "")
        cut = ", cut to budget" if r.truncated else ""
        print(
            f"\n{i}. [{r.score:.4f} {'+'.join(r.channels)}] {where}  [{r.start_offset}:{r.end_offset}{cut}]  ({r.parent_id})"
        )
        snippet = " ".join(r.text.split())
        print(f"   {snippet[:300]}{'…' if len(snippet) > 300 else ''}")
        for h in r.hits:
            preview = " ".join(h.preview(settings.hit_preview_chars).split())
            print(f"   ↳ {h.chunk_id}  {h.score:.4f} {'+'.join(h.channels)}  {preview}")
    if result.dropped_by_budget:
        print(
            f"\n({len(result.dropped_by_budget)} more parent(s) left out by the {settings.total_evidence_max_chars}-char evidence budget)"
        )
    return 0
