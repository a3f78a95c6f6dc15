"""``corpus search``: hybrid search over a KB's active strategy version, with parent elevation.

    corpus search "how long are monthly snapshots kept" --kb product-manual-en [--top-k 5] [--json]
        [--path 'guides/**/*.md'] [--format pdf ...] [--section 'Guide > Install'] [--type TEXT ...]
        [--min-score 0.4]

Results are parent blocks (the evidence to give an LLM), each with the child chunks that
matched (``hits``: chunk id for ``corpus lineage``, relevance 0 to 1, what found it: the
vector channel's cosine and rank, the keyword channel's BM25 and rank; first chars).
The filters restrict both channels before their top k (``retrieval.filters``);
``--min-score`` drops hits whose relevance (``retrieval.relevance``) is lower.
Settings come from the KB's ``search:`` section in ``kb.yaml``.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from corpus_pipeline.errors import StoreError
from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.versions import active_version

if TYPE_CHECKING:
    from corpus_pipeline.retrieval.elevation import ChildHit
    from corpus_pipeline.retrieval.filters import SearchFilters


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("search", help="search a knowledge base (vector + keyword, fused, elevated to parent blocks)")
    p.add_argument("query", help="the question, in any language the KB's model reads")
    p.add_argument("--kb", required=True, help="knowledge base name (folder under $CORPUS_HOME/kbs)")
    p.add_argument("--top-k", type=int, default=None, help="parent blocks to return (default: search.final_top_k, 5)")
    p.add_argument("--version", help="strategy version to search (default: the KB's active one)")
    p.add_argument("--json", action="store_true", help="print JSON")
    f = p.add_argument_group("filters (applied inside both channels, before their top k)")
    f.add_argument("--path", metavar="GLOB", help="document path glob, as kb.yaml's include: 'guides/**/*.md', '*.pdf'")
    f.add_argument(
        "--format",
        metavar="F",
        action="append",
        help="document format: markdown (md), text (txt), html, docx, pdf; repeat for several",
    )
    f.add_argument("--section", metavar="PREFIX", help="section-path prefix, whole segments: 'Guide > Install'")
    f.add_argument(
        "--type",
        metavar="T",
        action="append",
        dest="chunk_type",
        help="chunk type: TEXT, PROPOSITION, SEMANTIC_SEGMENT, IMAGE, TABLE_IMAGE; repeat for several",
    )
    f.add_argument(
        "--min-score",
        metavar="X",
        type=float,
        help="drop hits whose relevance (0 to 1) is below X; 0.4 to 0.5 drops what is unrelated",
    )
    p.set_defaults(func=run)


def filters_from_args(args: argparse.Namespace) -> SearchFilters | None:
    """The ``SearchFilters`` of the command line (None without any filter flag)."""
    from corpus_pipeline.retrieval.filters import SearchFilters

    values = {
        "path": args.path,
        "format": args.format,
        "section": args.section,
        "chunk_type": args.chunk_type,
        "score_threshold": args.min_score,
    }
    values = {k: v for k, v in values.items() if v is not None}
    return SearchFilters(**values) if values else None


def _found_by(h: ChildHit) -> str:
    """``vector #1 cos 0.871 + keyword #3 bm25 14.2``: what found a hit, in its channels' terms."""
    from corpus_pipeline.retrieval.fusion import KEYWORD, VECTOR

    parts = []
    if VECTOR in h.channels:
        parts.append(f"vector #{h.channels[VECTOR].rank} cos {h.channels[VECTOR].score:.3f}")
    if KEYWORD in h.channels:
        parts.append(f"keyword #{h.channels[KEYWORD].rank} bm25 {h.channels[KEYWORD].score:.1f}")
    return " + ".join(parts)


def run(args: argparse.Namespace) -> int:
    from corpus_pipeline.cli import print_json
    from corpus_pipeline.retrieval import Searcher, SearchSettings

    layout = Layout.from_env()
    kb = resolve_kb(layout.kb_dir(args.kb))
    version = args.version or active_version(layout, kb.name)
    if version is None:
        raise StoreError(f"knowledge base {kb.name!r} has no active version yet; run `corpus index --kb {kb.name}`")
    settings = SearchSettings.from_mapping(kb.config.search).with_(final_top_k=args.top_k)
    filters = filters_from_args(args)  # refused before the model and the tables are loaded
    searcher = Searcher.open(layout, kb, version, settings=settings)
    try:
        result = searcher.search(args.query, filters=filters)
    finally:
        searcher.close()
    if args.json:
        print_json(result.to_dict(settings))
        return 0
    print(f"{kb.name} @ {version}: {len(result.results)} results for {args.query!r}")
    if filters is not None:
        print("  filters: " + ", ".join(f"{k}={v}" for k, v in filters.to_dict().items()))
    for w in result.warnings:
        print(f"  warning: {w}")
    for i, r in enumerate(result.results, 1):
        where = r.doc_path + (f" — {r.section_path}" if r.section_path else "")
        cut = ", cut to budget" if r.truncated else ""
        rerank = f", rerank {r.rerank_score:.3f}" if r.rerank_score is not None else ""
        print(
            f"\n{i}. relevance {r.relevance:.2f} ({'+'.join(r.channels)}{rerank})  {where}  "
            f"[{r.start_offset}:{r.end_offset}{cut}]  ({r.parent_id})"
        )
        snippet = " ".join(r.text.split())
        print(f"   {snippet[:300]}{'…' if len(snippet) > 300 else ''}")
        for h in r.hits:
            preview = " ".join(h.preview(settings.hit_preview_chars).split())
            print(f"   ↳ {h.relevance:.2f}  {_found_by(h)}  {h.chunk_id}")
            print(f"     {preview}")
    if result.dropped_by_budget:
        print(
            f"\n({len(result.dropped_by_budget)} more parent(s) left out by the {settings.total_evidence_max_chars}-char evidence budget)"
        )
    return 0
