"""Memory benchmark: what an open searcher holds as its KB grows, this code against an earlier commit.

    .venv/bin/python -m benchmarks.memory                       # 5,000 / 20,000 / 50,000 documents
    .venv/bin/python benchmarks/memory/run.py --docs 2000 --searches 20 --write
    .venv/bin/python -m benchmarks.memory --baseline 6e1a620 --work /tmp/memory-kbs --keep

``Searcher`` used to read every parent block of a version (and every image text) into Python
objects when it opened, so an open KB (``corpus serve`` keeps one per KB) grew with its
number of parents; now it reads the parents a search needs, by document, through a bounded
cache (``retrieval.lookup``). This measures it, for each size:

1. ``build.py`` writes, in a CORPUS_HOME of its own, a published version of one KB of N
   documents (~5 parents of ~1,500 characters and ~15 children of 400 a document, English
   and Chinese; random unit vectors of 384 dimensions) with the product's own writers:
   the Parquet partitions, the search table (full-text, scalar and, from 100,000 children,
   ANN indexes), ``publish``. Built once per size (``--work`` keeps and reuses it) and read
   by both code trees: the on-disk format is the same.
2. For each code tree, this working tree and ``--baseline`` (a ``git worktree`` of that
   commit, first on ``PYTHONPATH``; the venv is shared), a fresh process (``probe.py``)
   opens a ``Searcher`` over the version and records its RSS before opening, once open,
   after the first search and after ``--searches`` searches (varied queries: English,
   Chinese, mixed, a parent's mark), then after ``--filtered`` searches with a ``format``
   filter; its peak RSS, the open time and the median search latency. Arrow's pool is set
   up as ``corpus serve`` sets it (jemalloc, malloc arenas capped). "Trimmed" figures are
   taken once ``store.memory.give_back`` returned the allocators' free pages: what is held.
3. With ``--breakdown``, one more process per tree runs the stages of a search one at a
   time over the same queries (vector channel, keyword channel, elevation to parents,
   image texts, passages, whole searches) with the RSS after each, and sizes the Parquet
   manifests' document lists it holds: where what is left comes from.

Prints the figures as JSON and as Markdown tables (``--write``: into ``RESULTS.md``, newest
first). The growth columns are RSS minus the RSS before opening (everything imported).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if __package__ in (None, ""):  # (run as a script: benchmarks/memory/run.py)
    sys.path.insert(0, str(REPO))

from benchmarks.memory.build import BuiltKB, build, load  # noqa: E402

HERE = Path(__file__).resolve().parent
PROBE = HERE / "probe.py"
RESULTS = HERE / "RESULTS.md"
BASELINE = "6e1a620"
NOW = "now"


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()


@contextlib.contextmanager
def code_trees(baseline: str | None, where: Path) -> Iterator[dict[str, Path]]:
    """{label: checkout}: ``baseline`` (a git worktree of that commit at ``where``, added and
    removed here unless it is there already) and this working tree."""
    if not baseline:
        yield {NOW: REPO}
        return
    ref = _git("rev-parse", "--short", baseline)
    added = False
    if not (where / "corpus_pipeline").is_dir():
        subprocess.run(["git", "worktree", "add", "--detach", str(where), ref], cwd=REPO, check=True, stdout=sys.stderr)
        added = True
    try:
        yield {f"baseline {ref}": where, NOW: REPO}
    finally:
        if added:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(where)], cwd=REPO, check=False, stdout=sys.stderr
            )


def probe(tree: Path, home: Path, searches: int, filtered: int, *, stages: bool = False) -> dict[str, Any]:
    """``probe.py`` over ``home`` in a fresh process with the code of ``tree``."""
    env = {**os.environ, "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [os.environ.get("PYTHONPATH")])])
    env.pop("ARROW_DEFAULT_MEMORY_POOL", None)
    env.pop("MALLOC_ARENA_MAX", None)  # (the probe sets both as corpus serve does)
    cmd = [sys.executable, str(PROBE), str(home), "--searches", str(searches), "--filtered", str(filtered)]
    r = subprocess.run(
        cmd + (["--breakdown"] if stages else []), cwd=tree, env=env, capture_output=True, text=True, check=False
    )
    if r.returncode != 0:
        raise SystemExit(f"probe failed with {tree}:\n{r.stderr[-3000:]}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    if Path(out["code"]) != tree.resolve():
        raise SystemExit(f"the probe imported corpus_pipeline from {out['code']}, not {tree}")
    return out


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each number the median of the runs' (the rest from the first run)."""
    out = dict(runs[0])
    for k, v in runs[0].items():
        if isinstance(v, int | float) and not isinstance(v, bool):
            out[k] = round(statistics.median(r[k] for r in runs), 3)
    out["runs"] = len(runs)
    return out


def growth(p: dict[str, Any]) -> dict[str, float]:
    """RSS minus the RSS before opening, at each point (MiB)."""
    base = p["rss_before_mb"]
    keys = {
        "open": "rss_open_mb",
        "open_trimmed": "rss_open_trimmed_mb",
        "first": "rss_first_search_mb",
        "searched": "rss_searched_mb",
        "searched_trimmed": "rss_searched_trimmed_mb",
        "filtered": "rss_filtered_mb",
        "peak": "rss_peak_mb",
    }
    return {k: round(p[v] - base, 1) for k, v in keys.items() if v in p}


def _heading(kb: BuiltKB) -> str:
    return (
        f"**{kb.docs:,} documents**: {kb.parents:,} parents ({kb.parent_chars / 1e6:.0f} M characters), "
        f"{kb.children:,} children ({kb.images:,} images); built in {kb.seconds['total']:.0f} s "
        f"(partitions {kb.seconds['partitions']:.0f} s, search table {kb.seconds['search_table']:.0f} s, "
        f"publish {kb.seconds['publish']:.1f} s); on disk: parent_blocks {kb.disk_mb['parent_blocks']:.0f} MB, "
        f"search table {kb.disk_mb['search_table']:.0f} MB\n"
    )


def tables(sizes: list[dict[str, Any]], searches: int) -> str:
    """One Markdown table per size (and one of the stages, when they were measured)."""
    out = []
    for s in sizes:
        out.append(_heading(s["kb"]))
        out.append(
            f"| code | + at open | + at open, trimmed | + after {searches} searches | + after {searches}, trimmed "
            "| + peak | open s | 1st search ms | median search ms | parents held |"
        )
        out.append("|---|" + "---:|" * 9)
        for label, p in s["probes"].items():
            g = growth(p)
            out.append(
                f"| {label} | {g['open']:+.0f} | {g['open_trimmed']:+.0f} | {g['searched']:+.0f} "
                f"| {g['searched_trimmed']:+.0f} | {g['peak']:+.0f} | {p['open_s']:.2f} | {p['first_search_ms']:.0f} "
                f"| {p['search_p50_ms']:.1f} | {p.get('held', {}).get('parents', '')} |"
            )
        out.append("")
        if s.get("stages"):
            names = list(next(iter(s["stages"].values()))["stages_mb"])
            out.append(f"Stage by stage ({searches} queries each; MiB added by each stage):\n")
            out.append("| code | " + " | ".join(names) + " | manifests' document lists MiB |")
            out.append("|---|" + "---:|" * (len(names) + 1))
            for label, p in s["stages"].items():
                prev, cells = p["rss_before_mb"], []
                for n in names:
                    cells.append(f"{p['stages_mb'][n] - prev:+.0f}")
                    prev = p["stages_mb"][n]
                out.append(f"| {label} | " + " | ".join(cells) + f" | {p['manifest_lists_mb']:.1f} |")
            out.append("")
    return "\n".join(out)


LEGEND = (
    "RSS growth in MiB over the probe's RSS before opening (Python, pyarrow, lancedb imported); "
    '"trimmed": after `store.memory.give_back` (the allocators\' free pages returned). '
    "Numbers are the medians of the runs; latencies are wall time on a shared machine."
)


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def write(ctx: dict[str, Any], body: str) -> None:
    title = "# Memory benchmark: results\n\n"
    section = (
        f"## {ctx['date']}: `{ctx['command']}`\n\n"
        f"{ctx['machine']} · load {ctx['load_before']} → {ctx['load_after']} · git {ctx['git']}"
        f" (working tree: {ctx['dirty']})\n\n{LEGEND}\n\n{body}\n"
    )
    old = RESULTS.read_text(encoding="utf-8").removeprefix(title) if RESULTS.exists() else ""
    RESULTS.write_text(title + section + ("\n" + old if old else ""), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.memory", description=__doc__.splitlines()[0])
    ap.add_argument("--docs", default="5000,20000,50000", help="KB sizes in documents, comma-separated")
    ap.add_argument("--searches", type=int, default=50)
    ap.add_argument("--filtered", type=int, default=5, help="searches with a format filter after those")
    ap.add_argument("--repeat", type=int, default=1, help="probes per size and code tree (the medians are shown)")
    ap.add_argument("--baseline", default=BASELINE, help="the commit to compare with ('' for none)")
    ap.add_argument("--baseline-dir", type=Path, default=Path("/tmp/memory-baseline"), help="its git worktree")
    ap.add_argument("--work", type=Path, default=None, help="where the KBs are built (default: a temporary folder)")
    ap.add_argument("--keep", action="store_true", help="keep the built KBs under --work (a later run reuses them)")
    ap.add_argument("--breakdown", action="store_true", help="also the RSS after each stage of a search")
    ap.add_argument("--write", action="store_true", help="write the tables into RESULTS.md")
    args = ap.parse_args(argv)
    import lancedb
    import pyarrow as pa

    from benchmarks.machine import cpu_model, ram_gib

    work = args.work or Path(tempfile.mkdtemp(prefix="corpus-memory-"))
    work.mkdir(parents=True, exist_ok=True)
    dirty = _git("status", "--porcelain", "--", "corpus_pipeline")
    ctx = {
        "command": "python -m benchmarks.memory " + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": (
            f"{cpu_model()}, {os.cpu_count()} cores, {ram_gib()} RAM, Python {platform.python_version()}, "
            f"pyarrow {pa.__version__}, lancedb {lancedb.__version__}"
        ),
        "load_before": _load(),
        "git": _git("rev-parse", "--short", "HEAD"),
        "dirty": f"{len(dirty.splitlines())} files of corpus_pipeline changed" if dirty else "clean",
    }
    sizes: list[dict[str, Any]] = []
    try:
        with code_trees(args.baseline, args.baseline_dir) as trees:
            for n in (int(x) for x in args.docs.split(",") if x.strip()):
                home = work / f"kb-{n}"
                kb = load(home, n)
                if kb is None:
                    shutil.rmtree(home, ignore_errors=True)
                    print(f"{n} documents: building ...", file=sys.stderr, flush=True)
                    kb = build(home, n, log=lambda m: print(m, file=sys.stderr, flush=True))
                print(f"{n} documents: built in {kb.seconds['total']} s; probing ...", file=sys.stderr, flush=True)
                probes: dict[str, Any] = {}
                for label, tree in trees.items():
                    runs = [probe(tree, home, args.searches, args.filtered) for _ in range(args.repeat)]
                    probes[label] = _median(runs)
                    print(f"  {label}: {json.dumps(probes[label])}", file=sys.stderr, flush=True)
                stages = {}
                if args.breakdown:
                    for label, tree in trees.items():
                        stages[label] = probe(tree, home, args.searches, 0, stages=True)
                        print(f"  {label}, by stage: {json.dumps(stages[label])}", file=sys.stderr, flush=True)
                sizes.append({"kb": kb, "probes": probes, "stages": stages})
                if not args.keep:
                    shutil.rmtree(home, ignore_errors=True)
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    ctx["load_after"] = _load()
    body = tables(sizes, args.searches)
    summary = [
        {
            "docs": s["kb"].docs,
            "parents": s["kb"].parents,
            "children": s["kb"].children,
            "build_s": s["kb"].seconds,
            "probes": {label: {**p, "growth_mb": growth(p)} for label, p in s["probes"].items()},
            "stages": s["stages"],
        }
        for s in sizes
    ]
    print(json.dumps({**ctx, "sizes": summary}, ensure_ascii=False, indent=1))
    print(body)
    if args.write:
        write(ctx, body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
