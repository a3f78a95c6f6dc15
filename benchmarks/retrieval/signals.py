"""How far the product's two ranking signals can carry an answer: child-level recall@k.

    python -m benchmarks.retrieval.signals --home CORPUS_HOME --kb NAME [--split N] [--limit Q]

Over one indexed KB (e.g. a ``benchmarks.retrieval --keep`` home), every question of its
``questions.jsonl`` is run through the ``Searcher``'s own channels, 50 deep and without gates:
the vector channel (exact cosine over the table's vectors, the query embedded by the
version's model) and the keyword channel (the full-text index on ``keyword_text``), then
both fused by reciprocal rank (k 10 and 60, depth 20 and 50). For each it prints the share
of questions with a child overlapping a reference among the first 1, 5, 10, 15 and 20, and
the MRR of the first such child. The evidence budget (5,200 characters, snippet lines and
context included) holds the best ~10-15 children of ~330 characters: recall@10-15 of the
best signal is about the most any evidence selection over these signals can return.

``--split N`` reports the questions of the first N documents (sorted) and of the rest
apart (tuned on / held out). Not a timing benchmark.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.retrieval.evaluation import Question, anchor_references, load_canonical_texts, load_questions
from corpus_pipeline.retrieval.search import Searcher
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.versions import active_version

DEPTH = 50
KS = (1, 5, 10, 15, 20)


def first_relevant(ids: Sequence[str], rows: dict[str, tuple[str, int, int]], q: Question) -> int | None:
    """0-based rank of the first child of ``ids`` overlapping a reference of ``q``."""
    for i, cid in enumerate(ids):
        doc, a, b = rows[cid]
        if any(r.doc_path == doc and a < r.end and r.start < b for r in q.references):
            return i
    return None


def rrf(orders: Sequence[Sequence[str]], k: int, depth: int) -> list[str]:
    scores: dict[str, float] = {}
    for order in orders:
        for rank, cid in enumerate(order[:depth], 1):
            scores[cid] = scores.get(cid, 0.0) + 1.0 / (k + rank)
    return sorted(scores, key=lambda c: -scores[c])


def line(name: str, ranks: Sequence[int | None]) -> str:
    r = np.array([10**6 if x is None else x for x in ranks])
    cells = " ".join(f"@{k} {np.mean(r < k):.3f}" for k in KS)
    return f"| {name} | {len(r)} | {cells} | {np.mean(1.0 / (r + 1)):.3f} |"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.retrieval.signals", description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", type=Path, required=True, help="the CORPUS_HOME of an indexed KB")
    ap.add_argument("--kb", required=True)
    ap.add_argument("--split", type=int, default=0, help="questions of the first N documents apart from the rest")
    ap.add_argument("--limit", type=int, help="the first N questions")
    args = ap.parse_args(argv)
    layout = Layout(args.home)
    kb = resolve_kb(layout.kb_dir(args.kb))
    version = active_version(layout, args.kb)
    if version is None:
        raise SystemExit(f"{args.kb} has no active version under {args.home}")
    questions, _ = anchor_references(load_questions(kb.path / "questions.jsonl"), load_canonical_texts(layout, kb.name))
    questions = questions[: args.limit] if args.limit else questions
    searcher = Searcher.open(layout, kb, version)
    orders: dict[str, list[list[str]]] = {"vector": [], "keyword": []}
    rows: dict[str, tuple[str, int, int]] = {}
    for q in questions:
        warnings: list[str] = []
        vrows, _ = searcher._vector(q.question, DEPTH, warnings)
        krows = searcher._keyword(q.question, DEPTH, warnings)
        for r in (*vrows, *krows):
            rows[r["chunk_id"]] = (r["doc_path"], int(r["start_offset"]), int(r["end_offset"]))
        orders["vector"].append([r["chunk_id"] for r in vrows])
        orders["keyword"].append([r["chunk_id"] for r in krows])
    searcher.close()
    for k, depth in ((10, 20), (10, 50), (60, 20), (60, 50)):
        orders[f"rrf k{k} depth {depth}"] = [
            rrf((v, w), k, depth) for v, w in zip(orders["vector"], orders["keyword"], strict=True)
        ]
    docs = sorted({r.doc_path for q in questions for r in q.references})
    first = set(docs[: args.split])
    groups = {"all": list(range(len(questions)))}
    if args.split:
        groups = {
            f"docs 1-{args.split}": [
                i for i, q in enumerate(questions) if all(r.doc_path in first for r in q.references)
            ],
            f"docs {args.split + 1}-": [
                i for i, q in enumerate(questions) if not any(r.doc_path in first for r in q.references)
            ],
        }
    print(f"{args.kb} {version}: {len(questions)} questions, children overlapping a reference among the first k")
    print("| signal | questions | " + " ".join(f"@{k}" for k in KS) + " | MRR |")
    print("|---|---:|---|---:|")
    for group, idx in groups.items():
        for name, per_q in orders.items():
            ranks = [first_relevant(per_q[i], rows, questions[i]) for i in idx]
            print(line(f"{name} ({group})", ranks))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
