"""ANN benchmark: latency at 1M children (synthetic vectors) and recall@10 against exact
search (real vectors), both through the product's ``Searcher`` vector channel.

    .venv/bin/python -m benchmarks.ann [--rows 1000000] [--queries 200] [--out DIR]
        [--skip-latency] [--skip-recall] [--no-sweep]

1. ``synthetic.bench_latency``: flat scan vs IVF_PQ at ``--rows`` children, index build
   time, the default probes / refine and a sweep, a narrow filter, 5 % appended then
   ``ensure_vector_index`` (optimize, not rebuild).
2. ``real.bench_recall``: COVID-QA + CMRC 2018 children embedded by multilingual-e5-small
   (``corpus index`` into ``OUT/real/home``, cached), every question, ANN vs exact.

Prints JSON and writes it to ``OUT/results.json``; RESULTS.md has the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from benchmarks.ann.common import load_average

REPO = Path(__file__).resolve().parents[2]


def machine() -> dict[str, Any]:
    import lancedb

    from benchmarks.machine import cpu_model, ram_gib

    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=False)
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "ram": ram_gib(),
        "python": platform.python_version(),
        "lancedb": lancedb.__version__,
        "os": platform.platform(),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "commit": rev.stdout.strip(),
        "load": load_average(),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.ann", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000, help="children in the latency table (default 1M)")
    ap.add_argument("--queries", type=int, default=200, help="queries of the latency part (default 200)")
    ap.add_argument("--out", type=Path, default=Path("/tmp/bench-ann"), help="work and cache folder")
    ap.add_argument("--skip-latency", action="store_true")
    ap.add_argument("--skip-recall", action="store_true")
    ap.add_argument("--no-sweep", action="store_true", help="only the default probes / refine")
    ap.add_argument(
        "--reuse-home",
        type=Path,
        action="append",
        help="a CORPUS_HOME whose covid-qa-en / cmrc2018-trial-zh index to reuse (repeatable)",
    )
    ap.add_argument(
        "--ann-min-rows",
        type=int,
        help="the latency table's index threshold (default search.ann_min_rows' default): a lower one "
        "measures the index on a table under it",
    )
    ap.add_argument("--timeout", type=float, help="seconds allowed per corpus index (recall part)")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"machine": machine(), "args": {k: str(v) for k, v in vars(args).items()}}
    if not args.skip_recall:
        from benchmarks.ann.real import bench_recall

        result["recall"] = bench_recall(args.out, timeout=args.timeout, sweep=not args.no_sweep, reuse=args.reuse_home)
        print(json.dumps(result["recall"], indent=1), flush=True)
    if not args.skip_latency:
        from benchmarks.ann.synthetic import bench_latency

        work = args.out / "latency"
        shutil.rmtree(work, ignore_errors=True)
        kw = {"min_rows": args.ann_min_rows} if args.ann_min_rows else {}
        result["latency"] = bench_latency(work, args.rows, args.queries, sweep=not args.no_sweep, **kw)
        print(json.dumps(result["latency"], indent=1), flush=True)
        shutil.rmtree(work, ignore_errors=True)
    result["machine"]["load_after"] = load_average()
    name = (
        "results.json"
        if not (args.skip_latency or args.skip_recall)
        else ("results-recall.json" if args.skip_latency else "results-latency.json")
    )
    (args.out / name).write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")
    print(json.dumps(result["machine"]))
    return 0
