"""Search benchmark: latency on 100k child chunks, and retrieval quality across plans.

    .venv/bin/python -m benchmarks.search [--rows 100000] [--queries 200] [--skip-latency] [--skip-eval]

1. Latency. A LanceDB table of ``--rows`` child chunks (texts made of sentences of the
   bundled KBs, English and Chinese, every 3 children one parent block; random unit
   vectors, since embedding 100k texts takes ~8 min and does not change search cost) is
   written with ``store.lance.write_search_table`` (keyword index included). Then
   ``--queries`` real queries (half English, half Chinese; their vectors from the real
   model) go through ``Searcher.search``: p50 / p95 of the whole query (embedding, both
   channels, gates, fusion, elevation, budgets) and of each channel.
2. Quality. The bundled KBs are indexed with ``corpus index`` once per plan (every plan
   whose strategies are registered) in a temporary CORPUS_HOME, then evaluated on their
   ``questions.jsonl``: character recall / precision / IoU of child and parent spans.

Prints a JSON summary; paste the figures into RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from corpus_pipeline.chunking import registry
from corpus_pipeline.kbconfig import KBConfig
from corpus_pipeline.retrieval import Searcher, SearchSettings
from corpus_pipeline.retrieval.evaluation import evaluate_version, load_questions
from corpus_pipeline.store.lance import write_search_table
from corpus_pipeline.store.layout import Layout

REPO = Path(__file__).resolve().parents[2]

KBS = REPO / "data" / "kbs"
MODEL = "all-MiniLM-L6-v2"
PLANS = [
    "PARENT:RECURSIVE;CHILD:RECURSIVE",
    "PARENT:RECURSIVE;CHILD:SLIDING_WINDOW",
    "PARENT:STRUCTURE;CHILD:RECURSIVE",
    "PARENT:STRUCTURE;CHILD:SEMANTIC,RECURSIVE",
    "PARENT:RECURSIVE;CHILD:SEMANTIC,RECURSIVE",
]


def machine() -> dict[str, str]:
    from benchmarks.machine import cpu_model

    cpu = cpu_model()
    import lancedb

    return {
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "python": platform.python_version(),
        "lancedb": lancedb.__version__,
        "os": platform.platform(),
    }


def _sentences() -> list[str]:
    out = []
    for f in sorted(KBS.glob("*/*")):
        if f.suffix in (".md", ".txt"):
            text = f.read_text(encoding="utf-8")
            out += [s.strip() for s in re.split(r"(?<=[。！？.!?])\s*|\n+", text) if len(s.strip()) > 20]
    return out


def _queries(n: int) -> list[str]:
    qs = []
    for kb in ("product-manual-en", "ops-runbook-zh"):
        qs.append([q.question for q in load_questions(KBS / kb / "questions.jsonl")])
    en, zh = qs
    return [(en if i % 2 == 0 else zh)[(i // 2) % len(en if i % 2 == 0 else zh)] for i in range(n)]


def bench_latency(rows: int, n_queries: int, work: Path) -> dict:
    rng = random.Random(7)
    sents = _sentences()
    texts = [" ".join(rng.choice(sents) for _ in range(rng.randint(3, 7)))[:800] for _ in range(rows)]
    n_parents = (rows + 2) // 3
    recs, parents = [], []
    for p in range(n_parents):
        kids = texts[p * 3 : p * 3 + 3]
        start = p * 10_000
        parents.append(
            {
                "parent_id": f"p{p}",
                "text": "\n\n".join(kids),
                "doc_path": f"doc{p // 50}.md",
                "section_path": "",
                "start_offset": start,
                "end_offset": start + len("\n\n".join(kids)),
                "overlap_chars": 0,
            }
        )
        off = start
        for j, t in enumerate(kids):
            i = p * 3 + j
            recs.append(
                {
                    "chunk_id": f"c{i}",
                    "parent_id": f"p{p}",
                    "chunk_index": i,
                    "chunk_type": "TEXT",
                    "kb": "bench",
                    "strategy_version": "v",
                    "doc_id": f"d{p // 50}",
                    "doc_path": f"doc{p // 50}.md",
                    "text": t,
                    "start_offset": off,
                    "end_offset": off + len(t),
                    "char_count": len(t),
                    "token_count": 0,
                    "section_path": "",
                    "page_num": None,
                    "block_index": i,
                    "strategy": "RECURSIVE",
                    "metadata": "{}",
                }
            )
            off += len(t) + 2
    vecs = np.random.default_rng(7).standard_normal((rows, 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    db = Layout(work)
    t0 = time.perf_counter()
    write_search_table(db, "bench", "v", pa.Table.from_pylist(recs), vecs)
    write_s = time.perf_counter() - t0
    pq.write_table(pa.Table.from_pylist(parents), work / "parents.parquet")
    t0 = time.perf_counter()
    searcher = Searcher(
        db, "bench", "v", embedding=MODEL, settings=SearchSettings(), parents_file=work / "parents.parquet"
    )
    open_s = time.perf_counter() - t0
    queries = _queries(n_queries)
    for q in queries[:5]:  # warm-up: model load, index pages
        searcher.search(q)
    total, vec, kw, lang = [], [], [], []
    for q in queries:
        t = time.perf_counter()
        res = searcher.search(q)
        total.append((time.perf_counter() - t) * 1e3)
        vec.append(res.timings_ms.get("vector", 0.0))
        kw.append(res.timings_ms.get("keyword", 0.0))
        lang.append("zh" if re.search(r"[\u4e00-\u9fff]", q) else "en")

    def pct(xs: list[float]) -> dict:
        return {"p50_ms": round(float(np.percentile(xs, 50)), 1), "p95_ms": round(float(np.percentile(xs, 95)), 1)}

    return {
        "rows": rows,
        "parents": n_parents,
        "queries": len(queries),
        "write_s": round(write_s, 1),
        "open_searcher_s": round(open_s, 2),
        "total": pct(total),
        "total_en": pct([x for x, lg in zip(total, lang, strict=True) if lg == "en"]),
        "total_zh": pct([x for x, lg in zip(total, lang, strict=True) if lg == "zh"]),
        "vector_channel": pct([x for x, lg in zip(vec, lang, strict=True) if lg == "en"]),
        "keyword_channel": pct(kw),
    }


def bench_plans(work: Path) -> list[dict]:
    home = work / "corpus"
    (home / "kbs").mkdir(parents=True)
    env = {**os.environ, "CORPUS_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")}
    quality_ok = "quality" in KBConfig.model_fields
    results = []
    names = set(registry.names())
    for kb in ("product-manual-en", "ops-runbook-zh"):
        shutil.copytree(KBS / kb, home / "kbs" / kb)
        for plan in PLANS:
            used = set(re.findall(r"[A-Z_]+", plan)) - {"PARENT", "CHILD"}
            if not used <= names:
                results.append(
                    {"kb": kb, "plan": plan, "skipped": f"not registered: {', '.join(sorted(used - names))}"}
                )
                continue
            yaml = f'chunking:\n  plan: "{plan}"\nvision: {{enabled: false, ocr: false}}\n'
            if quality_ok:  # compare plans on retrieval, not on the quality gate
                yaml += "quality:\n  severity: {child_token_limit: warn, child_quantiles: warn}\n"
            (home / "kbs" / kb / "kb.yaml").write_text(yaml, encoding="utf-8")
            t0 = time.perf_counter()
            r = subprocess.run(
                [str(REPO / ".venv/bin/corpus"), "index", "--kb", kb, "--json"],
                env=env,
                capture_output=True,
                text=True,
                cwd=REPO,
                check=False,
            )
            secs = time.perf_counter() - t0
            try:
                [summary] = json.loads(r.stdout)
            except (ValueError, TypeError):
                results.append({"kb": kb, "plan": plan, "skipped": f"index failed: {r.stderr[-400:]}"})
                continue
            if summary["status"] != "ok":
                results.append({"kb": kb, "plan": plan, "skipped": f"index failed: {summary.get('error')}"})
                continue
            version = summary["strategy_version"]
            report = evaluate_version(Layout(home), kb, version, KBS / kb / "questions.jsonl", model=MODEL)
            results.append(
                {
                    "kb": kb,
                    "plan": plan,
                    "strategy_version": version,
                    "parents": summary["parent_blocks"],
                    "children": summary["child_chunks"],
                    "index_s": round(secs, 1),
                    **report.summary(),
                    "notes": report.notes,
                }
            )
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description="search latency and retrieval quality benchmark")
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--skip-latency", action="store_true")
    ap.add_argument("--skip-eval", action="store_true")
    args = ap.parse_args()
    out: dict = {"machine": machine()}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if not args.skip_latency:
            out["latency"] = bench_latency(args.rows, args.queries, work)
            print(json.dumps(out["latency"], indent=2), file=sys.stderr)
        if not args.skip_eval:
            out["plans"] = bench_plans(work)
    print(json.dumps(out, ensure_ascii=False, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
