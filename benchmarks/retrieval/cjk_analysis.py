"""Which Chinese keyword analysis the keyword channel uses: bigrams, jieba words, or both.

    python -m benchmarks.retrieval.cjk_analysis [BENCHMARK_DIR ...]

For each question set (default: the shared CMRC 2018 trial and COVID-QA sets), every
document is one unit, analysed by the product's own ``keyword_terms(text, cjk=MODE)`` for
each mode and ranked by BM25 (rank_bm25's Okapi, k1 1.5, b 0.75, as the product's keyword
channel scores); a hit is the document holding the answer. Reports hit@1, hit@5 and MRR@10
per mode, and the analysis time. The product's default is ``keywords.CJK_ANALYSIS``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from rank_bm25 import BM25Okapi

from corpus_pipeline.keywords import CJK_ANALYSIS, keyword_terms

MODES = ("bigrams", "jieba", "both")
DEFAULT_SETS = [Path(__file__).resolve().parents[3] / "shared" / "benchmarks" / "cmrc2018-trial-zh"]


def run(folder: Path) -> dict[str, dict[str, float]]:
    questions = [json.loads(line) for line in (folder / "questions.jsonl").read_text(encoding="utf-8").splitlines()]
    paths = sorted(
        {r["doc_path"] for q in questions for r in q["references"]}
        | {str(p.relative_to(folder)) for p in (folder / "docs").rglob("*") if p.is_file()}
    )
    texts = [(folder / p).read_text(encoding="utf-8") for p in paths]
    index = {p: i for i, p in enumerate(paths)}
    out: dict[str, dict[str, float]] = {}
    for mode in MODES:
        t0 = time.perf_counter()
        bm25 = BM25Okapi([keyword_terms(t, cjk=mode) for t in texts])
        hit1 = hit5 = rr = 0.0
        for q in questions:
            gold = {index[r["doc_path"]] for r in q["references"] if r["doc_path"] in index}
            scores = bm25.get_scores(keyword_terms(q["question"], cjk=mode))
            ranked = sorted(range(len(texts)), key=lambda i: -scores[i])[:10]
            rank = next((n for n, i in enumerate(ranked, 1) if i in gold), None)
            hit1 += rank == 1
            hit5 += rank is not None and rank <= 5
            rr += 1 / rank if rank else 0.0
        n = len(questions)
        out[mode] = {
            "hit@1": round(hit1 / n, 4),
            "hit@5": round(hit5 / n, 4),
            "mrr@10": round(rr / n, 4),
            "seconds": round(time.perf_counter() - t0, 1),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    sets = [Path(a) for a in (argv if argv is not None else sys.argv[1:])] or DEFAULT_SETS
    print(f"default (keywords.CJK_ANALYSIS): {CJK_ANALYSIS}")
    for folder in sets:
        for mode, r in run(folder).items():
            print(f"{folder.name:22} {mode:8} " + " ".join(f"{k}={v}" for k, v in r.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
