"""One open searcher's memory, in a process of its own: run as a script, never imported by
the code it measures (``run.py`` starts it with a code tree first on ``PYTHONPATH``).

    python benchmarks/memory/probe.py HOME [--searches 50] [--filtered 5]

HOME is a CORPUS_HOME written by ``build.py`` (its ``bench.json`` names the KB, the version
and the queries). The process sets up Arrow's pool as ``corpus serve`` does
(``store.memory.use_returning_pool``, first thing), imports what a search imports, then
records its resident set size (RSS: psutil, else ``VmRSS`` of ``/proc/self/status``):

1. before: everything imported, nothing opened;
2. open: after ``Searcher(layout, kb, version, embedding=..., embedder=RandomEmbedder())``,
   and how long that took;
3. after the first search, and after ``--searches`` searches (the queries of ``bench.json``
   in turn), with each search's latency;
4. after ``--filtered`` more searches with a ``format`` filter (the documents' format
   exceptions are read for those);

and the peak (``VmHWM``); "trimmed" figures are taken after ``store.memory.give_back`` (Arrow's
unused pages and glibc's free heap returned): what is held, without the allocators' slack.

``--breakdown`` runs the stages of a search one at a time instead, over the same queries,
with the RSS after each: the vector channel, the keyword channel (LanceDB's indexes), the
elevation to parents (their reads, now), the image texts, the passages (LanceDB again),
then whole searches; and the size of the Parquet manifests' document lists held in Python
(``store.parquet``'s caches). Prints one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from corpus_pipeline.store.memory import use_returning_pool

POOL = use_returning_pool()  # (before pyarrow is imported, as the CLI's main does)

import numpy as np  # noqa: E402

DIM = 384


def _status(key: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def rss_mb() -> float:
    """The resident set size now, in MiB."""
    try:
        import psutil
    except ImportError:
        return _status("VmRSS")
    return float(psutil.Process().memory_info().rss) / 2**20


class RandomEmbedder:
    """Random unit vectors of ``DIM`` dimensions, the same for the same text (seeded by its
    hash): what ``Searcher`` asks of an embedder (``embed_queries``), without a model."""

    model_name = "bench-random"
    dimension = DIM

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(t.encode("utf-8"), digest_size=8).digest(), "big")
            v = np.random.default_rng(seed).standard_normal(DIM)
            out[i] = v / np.linalg.norm(v)
        return out

    embed_queries = embed
    embed_documents = embed


def held_by_manifests() -> float:
    """MiB of Python objects in ``store.parquet``'s caches of pinned manifests and of each
    file's documents (what a snapshot's reads keep of the partitions' document lists)."""
    from corpus_pipeline.store import parquet

    seen: set[int] = set()
    total = 0
    stack: list[Any] = [getattr(parquet, "_PINNED_CACHE", {}), getattr(parquet, "_FILE_DOCS", {})]
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, list | tuple | set | frozenset):
            stack.extend(o)
    return total / 2**20


def _settled() -> float:
    from corpus_pipeline.store.memory import give_back

    gc.collect()
    give_back()
    return round(rss_mb(), 1)


def measure(searcher: Any, queries: list[str], searches: int, filtered: int) -> dict[str, Any]:
    """RSS after open, after the first and after ``searches`` searches, after ``filtered``
    format-filtered ones; latencies."""
    from corpus_pipeline.retrieval.filters import SearchFilters

    out: dict[str, Any] = {"rss_open_mb": round(rss_mb(), 1)}
    out["rss_open_trimmed_mb"] = _settled()
    latencies, results, warnings = [], 0, set()
    for i in range(searches):
        t = time.perf_counter()
        r = searcher.search(queries[i % len(queries)])
        latencies.append((time.perf_counter() - t) * 1e3)
        results += len(r.results)
        warnings.update(r.warnings)
        if i == 0:
            out["rss_first_search_mb"] = round(rss_mb(), 1)
    gc.collect()
    out["rss_searched_mb"] = round(rss_mb(), 1)
    out["rss_searched_trimmed_mb"] = _settled()
    out["first_search_ms"] = round(latencies[0], 1)
    out["search_p50_ms"] = round(statistics.median(latencies), 1)
    out["search_max_ms"] = round(max(latencies), 1)
    out["results_per_search"] = round(results / max(len(latencies), 1), 2)
    out["warnings"] = sorted(warnings)
    if filtered:
        pdf = SearchFilters(format=["pdf"])
        for q in queries[:filtered]:
            searcher.search(q, filters=pdf)
        gc.collect()
        out["rss_filtered_mb"] = round(rss_mb(), 1)
    return out


def breakdown(searcher: Any, queries: list[str], searches: int) -> dict[str, Any]:
    """RSS after each stage of a search, run stage by stage over the queries."""
    from corpus_pipeline.retrieval.elevation import elevate

    s = searcher
    qs = [queries[i % len(queries)] for i in range(searches)]
    stages: dict[str, float] = {"open": round(rss_mb(), 1)}

    def mark(name: str) -> None:
        gc.collect()
        stages[name] = round(rss_mb(), 1)

    for q in qs:
        s._vector(q, s.settings.vector_top_k, [])
    mark("vector channel")
    for q in qs:
        s._keyword(q, s.settings.keyword_top_k, [])
    mark("keyword channel")
    found = [s.candidates(q) for q in qs]
    lookup = getattr(s, "lookup", None)
    elevated = [elevate(c, lookup.parents_of(c) if lookup else s.parents, s.settings) for c in found]
    mark("parents")
    if lookup is not None:
        for e in elevated:
            lookup.images_of(e)
    mark("image texts")
    for q, e in zip(qs, elevated, strict=True):
        s._with_passages(q, None, e, None)
    mark("passages")
    for q in qs:
        s.search(q)
    mark("whole searches")
    stages["give_back"] = _settled()
    return {"stages_mb": stages, "manifest_lists_mb": round(held_by_manifests(), 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("home", type=Path)
    ap.add_argument("--searches", type=int, default=50)
    ap.add_argument("--filtered", type=int, default=5)
    ap.add_argument("--breakdown", action="store_true", help="the RSS after each stage of a search")
    args = ap.parse_args()
    bench = json.loads((args.home / "bench.json").read_text(encoding="utf-8"))
    # What a search imports (some lazily, on the first search): imported before the
    # first figure, so that what follows is the searcher's, not the modules'.
    import lancedb  # noqa: F401
    import pyarrow.compute
    import pyarrow.dataset
    import pyarrow.parquet  # noqa: F401

    import corpus_pipeline
    import corpus_pipeline.retrieval.filters
    from corpus_pipeline.retrieval.search import Searcher
    from corpus_pipeline.store.layout import Layout

    layout = Layout(args.home)
    queries: list[str] = bench["queries"]
    gc.collect()
    out: dict[str, Any] = {
        "code": str(Path(corpus_pipeline.__file__).resolve().parents[1]),
        "pool": POOL,
        "docs": bench["docs"],
        "rss_before_mb": round(rss_mb(), 1),
    }
    t = time.perf_counter()
    searcher = Searcher(layout, bench["kb"], bench["version"], embedding="bench-random", embedder=RandomEmbedder())
    out["open_s"] = round(time.perf_counter() - t, 3)
    gc.collect()
    if args.breakdown:
        out.update(breakdown(searcher, queries, args.searches))
    else:
        out.update(measure(searcher, queries, args.searches, args.filtered))
    out["rss_peak_mb"] = round(_status("VmHWM"), 1)
    # What the searcher holds in Python: every parent (before), or a bounded cache (now).
    if hasattr(searcher, "parents"):
        out["held"] = {"parents": len(searcher.parents), "image_docs": len(searcher.images)}
    elif hasattr(searcher, "lookup"):
        parents, images = searcher.lookup.cached()
        out["held"] = {"parents": parents, "image_docs": images}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
