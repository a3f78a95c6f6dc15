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

When a ``corpus serve`` of the same home is running, it answers (``serve.local``: it has
the model and tables loaded, so the answer takes milliseconds instead of seconds); the
JSON is the same either way, and the text is rendered from it (``render_text``).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from corpus_pipeline.errors import StoreError
from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.versions import active_version

if TYPE_CHECKING:
    from corpus_pipeline.retrieval.filters import SearchFilters


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("search", help="search a knowledge base (vector + keyword, fused, elevated to parent blocks)")
    p.add_argument("query", help="the question, in any language the KB's model reads")
    p.add_argument("--kb", required=True, help="knowledge base name (folder under $CORPUS_HOME/kbs)")
    p.add_argument("--top-k", type=int, default=None, help="parent blocks to return (default: search.final_top_k, 5)")
    p.add_argument("--version", help="strategy version to search (default: the KB's active one)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument(
        "--local",
        action="store_true",
        help="search in this process even when a `corpus serve` of this home is running (by default it answers)",
    )
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


def _found_by(found: dict[str, dict[str, float]]) -> str:
    """``vector #1 cos 0.871 + keyword #3 bm25 14.2``: what found a hit, in its channels' terms."""
    parts = []
    if "vector" in found:
        parts.append(f"vector #{found['vector']['rank']} cos {found['vector']['cosine']:.3f}")
    if "keyword" in found:
        parts.append(f"keyword #{found['keyword']['rank']} bm25 {found['keyword']['bm25']:.1f}")
    return " + ".join(parts)


#: Characters of a result's text shown in the text output: around its best hit.
SHOWN_CHARS = 300


def shown_text(result: dict[str, Any]) -> str:
    """The part of a result's text the text output shows: from just before its best hit
    (the matched passage first, not the parent's opening: an answer deep in a long parent
    looked like a miss), ``SHOWN_CHARS`` characters, whitespace folded."""
    text, start = result["text"], int(result["start_offset"])
    hits = result.get("hits") or []
    at = max(0, int(hits[0]["start_offset"]) - start) if hits else 0
    at = at if at < len(text) else 0
    begin = max(0, at - 40)
    begin = text.rfind(" ", 0, begin) + 1 if begin else 0  # (a whole word)
    shown = " ".join(text[begin:].split())
    lead = "…" if begin else ""
    return lead + shown[:SHOWN_CHARS] + ("…" if len(shown) > SHOWN_CHARS else "")


def render_text(answer: dict[str, Any], budget_chars: int) -> list[str]:
    """The text output of one search, from its JSON (``SearchResult.to_dict``: what the
    search computed here, or what ``corpus serve`` answered)."""
    lines = [f"{answer['kb']} @ {answer['strategy_version']}: {len(answer['results'])} results for {answer['query']!r}"]
    if answer.get("filters"):
        lines.append("  filters: " + ", ".join(f"{k}={v}" for k, v in answer["filters"].items()))
    lines += [f"  warning: {w}" for w in answer.get("warnings") or []]
    for i, r in enumerate(answer["results"], 1):
        where = r["doc_path"] + (f" — {r['section_path']}" if r["section_path"] else "")
        cut = ", cut to budget" if r["truncated"] else ""
        rerank = f", rerank {r['rerank_score']:.3f}" if r.get("rerank_score") is not None else ""
        lines.append(
            f"\n{i}. relevance {r['relevance']:.2f} ({'+'.join(r['channels'])}{rerank})  {where}  "
            f"[{r['start_offset']}:{r['end_offset']}{cut}]  ({r['parent_id']})"
        )
        lines.append(f"   {shown_text(r)}")
        for h in r["hits"]:
            lines.append(f"   ↳ {h['relevance']:.2f}  {_found_by(h['found_by'])}  {h['chunk_id']}")
            lines.append(f"     {' '.join(h['text'].split())}")
    dropped = answer.get("dropped_by_budget") or []
    if dropped:
        lines.append(f"\n({len(dropped)} more parent(s) left out by the {budget_chars}-char evidence budget)")
    return lines


def run(args: argparse.Namespace) -> int:
    from corpus_pipeline.cli import print_json
    from corpus_pipeline.retrieval import Searcher, SearchSettings
    from corpus_pipeline.serve.local import ask_server

    layout = Layout.from_env()
    kb = resolve_kb(layout.kb_dir(args.kb))
    version = args.version or active_version(layout, kb.name)
    if version is None:
        raise StoreError(f"knowledge base {kb.name!r} has no active version yet; run `corpus index --kb {kb.name}`")
    settings = SearchSettings.from_mapping(kb.config.search).with_(final_top_k=args.top_k)
    filters = filters_from_args(args)  # refused before the model and the tables are loaded
    answered = None
    if not args.local:  # (a `corpus serve` of this home has the model loaded: it answers in milliseconds)
        payload: dict[str, Any] = {"query": args.query, "kb": kb.name}
        payload |= {"top_k": args.top_k} if args.top_k is not None else {}
        payload |= {"filters": filters.to_dict()} if filters is not None else {}
        payload |= {"version": args.version} if args.version else {}
        answered = ask_server(layout, payload)
    if answered is not None:
        answer, url = answered
        print(f"(answered by corpus serve at {url}; --local searches in this process)", file=sys.stderr)
    else:
        searcher = Searcher.open(layout, kb, version, settings=settings)
        try:
            answer = searcher.search(args.query, filters=filters).to_dict(settings)
        finally:
            searcher.close()
    if args.json:
        print_json(answer)
        return 0
    print("\n".join(render_text(answer, settings.total_evidence_max_chars)))
    return 0
