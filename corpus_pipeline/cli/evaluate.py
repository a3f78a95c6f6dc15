"""``corpus eval``: score retrieval on a questions file with exact reference spans.

    corpus eval --kb NAME [--questions FILE] [--version V] [--json] [--details]
    corpus eval --kb NAME --compare V1 V2

Character-level recall, precision and IoU (Chroma's chunking evaluation) of the child
spans and the parent spans search returns; hit rate and MRR of the parents. The
questions default to ``<kb folder>/questions.jsonl``; the version to the active one.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from corpus_pipeline.errors import ConfigError, StoreError
from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.versions import active_version

_COLUMNS = [
    ("child_recall", "child R"),
    ("child_precision", "child P"),
    ("child_iou", "child IoU"),
    ("parent_recall", "parent R"),
    ("parent_precision", "parent P"),
    ("parent_iou", "parent IoU"),
    ("hit_rate", "hit"),
    ("mrr", "MRR"),
]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("eval", help="evaluate retrieval on questions with reference spans (recall, precision, IoU)")
    p.add_argument("--kb", required=True, help="knowledge base name")
    p.add_argument(
        "--questions",
        type=Path,
        help="JSONL of {question, references:[{doc_path,start,end}]} (default: <kb>/questions.jsonl)",
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument("--version", help="strategy version to evaluate (default: the active one)")
    g.add_argument("--compare", nargs=2, metavar=("V1", "V2"), help="evaluate two versions and show V2 - V1")
    p.add_argument(
        "--top-k", type=int, default=None, help="parent blocks returned per question (default: search.final_top_k)"
    )
    p.add_argument("--details", action="store_true", help="per-question scores (always in --json)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from corpus_pipeline.cli import print_json
    from corpus_pipeline.retrieval import SearchSettings
    from corpus_pipeline.retrieval.evaluation import (
        compare,
        evaluate_version,
        load_canonical_texts,
    )

    layout = Layout.from_env()
    kb = resolve_kb(layout.kb_dir(args.kb))
    questions = args.questions or kb.path / "questions.jsonl"
    if not questions.exists():
        raise ConfigError(f"no questions file {questions}; pass --questions FILE (JSONL: question, references).")
    chosen = list(args.compare) if args.compare else [args.version or active_version(layout, kb.name)]
    versions = [str(v) for v in chosen if v is not None]
    if not versions:
        raise StoreError(f"knowledge base {kb.name!r} has no active version yet; run `corpus index --kb {kb.name}`")
    settings = SearchSettings.from_mapping(kb.config.search).with_(final_top_k=args.top_k)
    texts = load_canonical_texts(layout, kb.name, active_version(layout, kb.name) or versions[0])
    reports = [evaluate_version(layout, kb, v, questions, settings=settings, texts=texts) for v in versions]
    if args.json:
        out: dict[str, Any] = {
            "kb": kb.name,
            "questions_file": str(questions),
            "versions": [r.to_dict() for r in reports],
        }
        if len(reports) == 2:
            out["delta"] = compare(reports[0], reports[1])
        print_json(out)
        return 0
    for note in reports[0].notes:
        print(f"note: {note}")
    n = reports[0].summary().get("questions", 0)
    print(f"{kb.name}: {n} questions from {questions}")
    head = f"{'version':<24}" + "".join(f"{label:>11}" for _, label in _COLUMNS)
    print(head)
    for r in reports:
        s = r.summary()
        print(f"{r.strategy_version:<24}" + "".join(f"{s.get(k, 0):>11.3f}" for k, _ in _COLUMNS))
    if len(reports) == 2:
        d = compare(reports[0], reports[1])
        print(f"{'delta (V2 - V1)':<24}" + "".join(f"{d.get(k, 0):>+11.3f}" for k, _ in _COLUMNS))
    if args.details:
        for r in reports:
            print(f"\n{r.strategy_version}")
            for q in r.questions:
                rank = q.first_relevant_rank or "-"
                print(
                    f"  {q.id:<8} rank {rank!s:>2}  child R {q.child.recall:.2f} IoU {q.child.iou:.3f}  "
                    f"parent R {q.parent.recall:.2f} IoU {q.parent.iou:.3f}  {q.question}"
                )
    return 0
