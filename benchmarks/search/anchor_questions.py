"""Anchor the reference spans of a KB's ``questions.jsonl`` in the canonical texts.

    .venv/bin/python benchmarks/search/anchor_questions.py --kb ops-runbook-zh [--questions FILE] [--check]

Each reference names ``doc_path`` and the exact answer ``text``; this finds that text in
the document's canonical text (``parsed_blocks/kb=<kb>/texts.parquet`` under
``$CORPUS_HOME``, so run ``corpus index`` first), requires it to occur exactly once, and
writes ``start``/``end``. ``--check`` only verifies ``text[start:end] == text`` and exits 1
on any mismatch. Run after a parser change moves offsets.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from corpus_pipeline.retrieval.evaluation import load_canonical_texts
from corpus_pipeline.store.layout import Layout


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kb", required=True)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--questions", type=Path, help="default: <CORPUS_HOME>/kbs/<kb>/questions.jsonl")
    args = ap.parse_args(argv)
    layout = Layout.from_env()
    path = args.questions or layout.kb_dir(args.kb) / "questions.jsonl"
    texts = load_canonical_texts(layout, args.kb)
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    problems = []
    for row in rows:
        for ref in row["references"]:
            doc = texts.get(ref["doc_path"])
            where = f"{row['id']}: {ref['doc_path']}"
            if doc is None:
                problems.append(f"{where}: not a parsed document")
                continue
            if args.check:
                if doc[ref.get("start", 0) : ref.get("end", 0)] != ref["text"]:
                    problems.append(f"{where}: [{ref.get('start')}:{ref.get('end')}] does not hold the text")
                continue
            at = doc.find(ref["text"])
            if at < 0 or doc.find(ref["text"], at + 1) >= 0:
                problems.append(
                    f"{where}: text {'not found' if at < 0 else 'found more than once'}: {ref['text'][:50]!r}"
                )
                continue
            ref["start"], ref["end"] = at, at + len(ref["text"])
            assert doc[ref["start"] : ref["end"]] == ref["text"]
    for p in problems:
        print(p, file=sys.stderr)
    if not args.check and not problems:
        ordered = [
            {
                "id": r["id"],
                "question": r["question"],
                "references": [
                    {"doc_path": f["doc_path"], "start": f["start"], "end": f["end"], "text": f["text"]}
                    for f in r["references"]
                ],
            }
            for r in rows
        ]
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ordered), encoding="utf-8")
        print(f"{path}: {len(rows)} questions anchored")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
