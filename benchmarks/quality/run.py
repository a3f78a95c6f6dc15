"""What the data-quality checks cost: great-expectations at import and per run, the pandas
checks per partition, and which CLI paths import GX at all.

    .venv/bin/python -m benchmarks.quality [--corpus DIR] [--chunks 20000] [--repeat 5] [--write]

1. Import: ``import great_expectations`` (with the expectations module the checks use) in
   a fresh interpreter, best of ``--repeat``; beside it pandas alone, for scale.
2. Per partition: a child_chunks partition of ``--chunks`` real chunks (RECURSIVE over the
   shared markdown corpus, sizes in the default model's tokens; parents RECURSIVE 2200),
   every check of the three assets through ``quality.run.run_checks``, each timed; the
   quantile checks (GX) apart from the pandas ones. Best of ``--repeat`` after one warm-up
   (the first GX validation builds its context).
3. CLI paths: whether ``corpus strategies``, ``corpus preview`` and a search import
   great_expectations (they must not: only the Dagster assets run checks).

``--write`` records the figures with the machine in ``benchmarks/quality/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CORPUS = REPO.parent / "shared" / "corpora" / "markdown-5mb"


def import_seconds(module: str, repeat: int) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    runs = []
    for _ in range(repeat):
        r = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, check=True)
        runs.append(float(r.stdout.strip().splitlines()[-1]))
    return min(runs)


def partition(n_chunks: int, corpus: Path) -> dict[str, Any]:
    """Parents and children of real documents, as the chunk stage writes them."""
    import pyarrow as pa

    from corpus_pipeline.chunking.context import ContextFactory
    from corpus_pipeline.chunking.document import SourceDocument, chunk_document
    from corpus_pipeline.chunking.plan import build_plan
    from corpus_pipeline.embedding.tokens import token_counter_for
    from corpus_pipeline.models import Chunk, ParentBlock
    from corpus_pipeline.store import schemas

    plan = build_plan("PARENT:RECURSIVE;CHILD:RECURSIVE")
    tools = ContextFactory(token_counter_for())
    parents: list[ParentBlock] = []
    children: list[Chunk] = []
    texts = []
    for i, f in enumerate(sorted(corpus.rglob("*.md"))):
        text = f.read_text(encoding="utf-8", errors="replace")
        if not text.strip():
            continue
        doc = SourceDocument("bench", "v", f"d{i}", f.name, "markdown", "h", text)
        out = chunk_document(doc, plan, tools.context(text))
        parents += out.parents
        children += out.children
        texts.append({"doc_id": f"d{i}", "path": f.name, "status": "OK", "text": text})
        if len(children) >= n_chunks:
            break
    kids = schemas.to_table(children, Chunk)
    # vectors: random unit vectors of the model's size (the checks read shapes and norms)
    import numpy as np

    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(len(children), 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    emb = pa.table(
        {
            "chunk_id": kids.column("chunk_id"),
            "model": pa.array(["m"] * len(children)),
            "text_hash": kids.column("text_hash"),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vecs.reshape(-1)), 384),
        }
    )
    return {
        "parents": schemas.to_table(parents, ParentBlock),
        "children": kids,
        "texts": pa.Table.from_pylist(texts),
        "embeddings": emb,
    }


def time_checks(tables: dict[str, Any], repeat: int) -> dict[str, Any]:
    from corpus_pipeline.kbconfig import KBConfig, kb_from_config
    from corpus_pipeline.quality import checks
    from corpus_pipeline.quality.bounds import resolve_thresholds
    from corpus_pipeline.quality.partition import Partition
    from corpus_pipeline.quality.run import run_checks

    kb = kb_from_config(REPO / "bench", KBConfig())
    th = resolve_thresholds(kb)
    args = {
        "parent_blocks": {"parents": tables["parents"], "texts": tables["texts"]},
        "child_chunks": {"children": tables["children"], "parents": tables["parents"], "texts": tables["texts"]},
        "chunk_embeddings": {"embeddings": tables["embeddings"], "children": tables["children"]},
    }
    t0 = time.perf_counter()
    for asset, a in args.items():  # the first run in a process: GX's context is built (warm-up)
        run_checks(asset, th, "bench|v", **a)
    cold = time.perf_counter() - t0
    per_check: dict[str, float] = {}
    per_asset: dict[str, float] = {}
    frames: dict[str, float] = {}
    for asset, a in args.items():
        runs = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            run_checks(asset, th, "bench|v", **a)
            runs.append(time.perf_counter() - t0)
        per_asset[asset] = min(runs)
        for c in checks.checks_for(asset):
            one = []
            for _ in range(repeat):
                p = Partition("bench|v", th, **a)
                _ = p.parents if asset == "parent_blocks" else p.children if asset == "child_chunks" else p.embeddings
                t0 = time.perf_counter()
                c.validate(p, th)
                one.append(time.perf_counter() - t0)
            per_check[c.name] = min(one)
        # preparing the frames (source spans, limits, parents): paid once per asset
        prep = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            p = Partition("bench|v", th, **a)
            _ = p.parents if asset == "parent_blocks" else p.children if asset == "child_chunks" else p.embeddings
            prep.append(time.perf_counter() - t0)
        frames[asset] = min(prep)
    gx = {n: s for n, s in per_check.items() if checks.declaration(n).engine == "great_expectations"}
    pd_only = {n: s for n, s in per_check.items() if n not in gx}
    return {
        "rows": {"parents": tables["parents"].num_rows, "children": tables["children"].num_rows},
        "first_run_all_assets_s": cold,
        "per_asset_s": per_asset,
        "frames_s": frames,
        "gx_checks_s": gx,
        "pandas_checks_s_total": sum(pd_only.values()),
        "pandas_checks_s": pd_only,
    }


def cli_imports() -> dict[str, list[str]]:
    """Which heavy modules the CLI paths that run no checks import."""
    code = r"""
import contextlib, io, json, sys, tempfile, pathlib
from corpus_pipeline.cli import main
d = pathlib.Path(tempfile.mkdtemp())
f = d / "note.md"
f.write_text("# Note\n\nA short note about retention: 30 days.\n")
out = {}
for name, argv in (("strategies", ["strategies"]), ("preview", ["preview", str(f), "--plan", "PARENT:1;CHILD:3,2"])):
    with contextlib.redirect_stdout(io.StringIO()):
        main(argv)
    out[name] = sorted(m for m in ("great_expectations", "dagster", "torch") if m in sys.modules)
import corpus_pipeline.cli.search, corpus_pipeline.retrieval.search  # what corpus search loads before the model
out["search"] = sorted(m for m in ("great_expectations", "dagster") if m in sys.modules)
print(json.dumps(out))
"""
    r = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description="cost of the data-quality checks")
    ap.add_argument("--chunks", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--corpus", type=Path, default=CORPUS, help="a folder of Markdown files to chunk")
    args = ap.parse_args()
    out: dict[str, Any] = {
        "import_s": {
            "great_expectations": import_seconds("great_expectations, great_expectations.expectations", args.repeat),
            "pandas": import_seconds("pandas", args.repeat),
        }
    }
    out["checks"] = time_checks(partition(args.chunks, args.corpus), args.repeat)
    out["cli_imports"] = cli_imports()
    print(json.dumps(out, indent=2))
    if args.write:
        write_results(out)
    return 0


def write_results(out: dict[str, Any]) -> None:
    from benchmarks.machine import cpu_model, ram_gib

    c = out["checks"]
    lines = [
        "# Quality checks: what they cost",
        "",
        "Latest run of `.venv/bin/python -m benchmarks.quality --write`.",
        "",
        f"Run {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC on {cpu_model()}, {ram_gib()}, Python "
        f"{platform.python_version()}; a partition of {c['rows']['children']} child chunks and "
        f"{c['rows']['parents']} parents (RECURSIVE over the shared markdown corpus).",
        "",
        "| what | seconds |",
        "|---|---:|",
        f"| import great_expectations (fresh interpreter, best of runs) | {out['import_s']['great_expectations']:.2f} |",
        f"| import pandas (for scale) | {out['import_s']['pandas']:.2f} |",
    ]
    lines.append(
        f"| the first run of all three assets' checks in a process (GX builds its context) | {c['first_run_all_assets_s']:.3f} |"
    )
    for asset, s in c["per_asset_s"].items():
        lines.append(f"| every check of {asset} (frames included) | {s:.3f} |")
    for asset, s in c["frames_s"].items():
        lines.append(f"| preparing {asset}'s frames (spans, limits) | {s:.3f} |")
    for name, s in c["gx_checks_s"].items():
        lines.append(f"| {name} (GX) | {s:.3f} |")
    lines.append(f"| the {len(c['pandas_checks_s'])} pandas checks together | {c['pandas_checks_s_total']:.3f} |")
    lines += ["", "Slowest pandas checks (seconds):", ""]
    for name, s in sorted(c["pandas_checks_s"].items(), key=lambda kv: -kv[1])[:5]:
        lines.append(f"- {name}: {s:.4f}")
    lines += [
        "",
        "Heavy modules imported by CLI paths that run no check: "
        + "; ".join(f"`corpus {k}`: {', '.join(v) or 'none'}" for k, v in out["cli_imports"].items())
        + ".",
        "",
        f"Median of the GX checks: {statistics.median(c['gx_checks_s'].values()):.3f} s.",
        "",
        "Notes: the corpus gives fewer chunks than `--chunks` asks when it runs out. Before",
        "the checks became pandas functions, every rule went through GX: a suite per asset and",
        "partition took 0.1-0.6 s on the sample KBs (measured with the previous design); GX now",
        "serves the two distribution checks, so a run pays its import (~3 s) and the context",
        "build once, in the Dagster process only.",
    ]
    (HERE / "RESULTS.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
