"""Where product search loses what the chunks had found: a per-stage funnel over one indexed KB.

    python -m benchmarks.retrieval.funnel --home CORPUS_HOME --kb NAME [--limit N] [--set key=value ...]

For each question (the KB's ``questions.jsonl``, anchored as ``corpus eval`` anchors it), a
child or parent is *relevant* when its span overlaps a reference span. The stages, each the
share of questions that still have something relevant:

    vector@50 / keyword@50   a relevant child among the channel's first 50
    vector@k / keyword@k     ... among the first ``vector_top_k`` / ``keyword_top_k``
    gated                    ... after the gates (either channel)
    candidates               ... among the fused ``candidate_top_k`` children
    parents                  a relevant parent among the ``final_top_k`` elevated parents
    evidence                 the returned evidence overlaps a reference (what ``hit_rate`` counts)
    plain-vector             a plain top-k vector search mapped to its first 5 parents (the peer)

A drop between two stages is what that stage costs. It runs the product's own ``Searcher``
(``--set`` changes search settings, e.g. ``--set vector_top_k=30``).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.retrieval.elevation import elevate
from corpus_pipeline.retrieval.evaluation import Span, anchor_references, load_canonical_texts, load_questions
from corpus_pipeline.retrieval.search import Searcher, gate_and_fuse
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.versions import active_version

STAGES = [
    "vector@50",
    "keyword@50",
    "vector@k",
    "keyword@k",
    "gated",
    "candidates",
    "parents",
    "evidence",
    "plain-vector",
]


def _overlaps(doc: str, start: int, end: int, refs: list[Span]) -> bool:
    return any(r.doc_path == doc and start < r.end and r.start < end for r in refs)


def _relevant(rows: list[dict[str, Any]], refs: list[Span]) -> list[bool]:
    return [_overlaps(r["doc_path"], int(r["start_offset"]), int(r["end_offset"]), refs) for r in rows]


def funnel(home: Path, kb_name: str, limit: int | None, changes: dict[str, Any]) -> dict[str, Any]:
    layout = Layout(home)
    kb = resolve_kb(layout.kb_dir(kb_name))
    version = active_version(layout, kb_name)
    assert version, f"{kb_name} has no active version under {home}"
    settings = kb.config.search.with_(**changes)
    searcher = Searcher.open(layout, kb, version, settings=settings)
    questions, _ = anchor_references(load_questions(kb.path / "questions.jsonl"), load_canonical_texts(layout, kb_name))
    questions = questions[:limit] if limit else questions
    counts: Counter[str] = Counter()
    for q in questions:
        refs = list(q.references)
        warnings: list[str] = []
        vrows, baseline = searcher._vector(q.question, 50, warnings)
        krows = searcher._keyword(q.question, 50, warnings)
        vrel, krel = _relevant(vrows, refs), _relevant(krows, refs)
        hit = {
            "vector@50": any(vrel),
            "keyword@50": any(krel),
            "vector@k": any(vrel[: settings.vector_top_k]),
            "keyword@k": any(krel[: settings.keyword_top_k]),
        }
        vk, kk = vrows[: settings.vector_top_k], krows[: settings.keyword_top_k]
        vh, kh, fused = gate_and_fuse(vk, kk, baseline, settings)
        by_id = {r["chunk_id"]: r for r in (*vk, *kk)}
        hit["gated"] = any(_relevant([by_id[h.chunk_id] for h in (*vh, *kh)], refs))
        hit["candidates"] = any(_relevant([by_id[f.chunk_id] for f in fused], refs))
        children = searcher.candidates(q.question)
        parents = elevate(children, searcher.lookup.parents_of(children), settings)
        hit["parents"] = any(_overlaps(p.doc_path, p.start_offset, p.end_offset, refs) for p in parents)
        result = searcher.search(q.question)
        hit["evidence"] = any(_overlaps(r.doc_path, a, b, refs) for r in result.results for a, b in r.returned_spans)
        seen: list[str] = []
        for r in vrows:
            if r["parent_id"] not in seen:
                seen.append(r["parent_id"])
            if len(seen) == 5:
                break
        known = searcher.lookup.parents(seen)
        plain = [known[p] for p in seen if p in known]
        hit["plain-vector"] = any(_overlaps(p.doc_path, p.start_offset, p.end_offset, refs) for p in plain)
        counts.update(k for k, v in hit.items() if v)
    searcher.close()
    n = len(questions)
    return {
        "kb": kb_name,
        "version": version,
        "questions": n,
        "settings": changes,
        "stages": {s: round(counts[s] / n, 4) for s in STAGES},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.retrieval.funnel", description=__doc__.split("\n")[0])
    ap.add_argument("--home", type=Path, required=True, help="a CORPUS_HOME with the KB indexed")
    ap.add_argument("--kb", required=True)
    ap.add_argument("--limit", type=int)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a search setting to change")
    args = ap.parse_args(argv)
    changes = {k: json.loads(v) for k, v in (s.split("=", 1) for s in args.set)}
    out = funnel(args.home, args.kb, args.limit, changes)
    print(json.dumps(out, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
