"""Where the time goes: light timers around the pipeline's own functions, for the benchmark.

Each probe replaces a module or class attribute with a wrapper that adds its wall time and
call count to a shared table (``TIMES``); the product code is not modified, only wrapped
inside this process. The overhead is a ``perf_counter`` pair per call (sub-microsecond),
so the timed scenarios are not distorted. Probes nest (``write_search_table`` contains
``keyword_text`` and the FTS build), which the report shows by indentation.
"""

from __future__ import annotations

import functools
import importlib
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

TIMES: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])  # label -> [seconds, calls]
# Every call: (label, wall-clock start as time.time(), seconds, nesting depth), so calls can
# be placed inside the Dagster step whose start/end events enclose them.
CALLS: list[tuple[str, float, float, int]] = []
_depth = 0

# (label, [(module, attribute path)], indent, what it is). Several places when a function is
# imported by name into other modules: every binding must be wrapped.
PROBES: list[tuple[str, list[tuple[str, str]], int, str]] = [
    ("dagster run", [("assets.runner", "_run_job")], 0, "one Dagster run, all of it"),
    (
        "discovery (walk + hash files)",
        [("corpus_pipeline.indexing", "discover_documents")],
        1,
        "runner's freshness probe and the documents asset",
    ),
    ("freshness.check", [("corpus_pipeline.freshness", "check")], 1, "fingerprint + LanceDB table list"),
    (
        "parquet read_partition",
        [
            ("corpus_pipeline.store.parquet", "read_partition"),
            ("resources.io_manager", "read_partition"),
        ],
        1,
        "IO manager inputs and previous outputs",
    ),
    (
        "parquet write_partition",
        [
            ("corpus_pipeline.store.parquet", "write_partition"),
            ("resources.io_manager", "write_partition"),
        ],
        1,
        "IO manager outputs (zstd, fsync, rename)",
    ),
    ("parse_documents", [("corpus_pipeline.indexing", "parse_documents")], 1, "parse or carry over"),
    ("describe_kb_images", [("corpus_pipeline.indexing", "describe_kb_images")], 1, "image work"),
    ("build_parent_blocks", [("corpus_pipeline.indexing", "build_parent_blocks")], 1, "chunk or carry over"),
    ("image_pieces_by_doc", [("corpus_pipeline.indexing", "image_pieces_by_doc")], 1, ""),
    ("build_child_chunks", [("corpus_pipeline.indexing", "build_child_chunks")], 1, "chunk or carry over"),
    ("embed_chunks", [("corpus_pipeline.indexing", "embed_chunks")], 1, "cache lookup + model"),
    ("load_embedder", [("corpus_pipeline.indexing.embed", "load_embedder")], 2, "model load (lru-cached in-process)"),
    ("EmbeddingCache.get_many", [("corpus_pipeline.embedding.cache", "EmbeddingCache.get_many")], 2, "SQLite lookups"),
    ("EmbeddingCache.put_many", [("corpus_pipeline.embedding.cache", "EmbeddingCache.put_many")], 2, "SQLite inserts"),
    (
        "model encode",
        [("corpus_pipeline.embedding.local", "SentenceTransformerEmbedder.embed")],
        2,
        "sentence-transformers",
    ),
    ("write_search_table", [("corpus_pipeline.store.lance", "write_search_table")], 1, "LanceDB overwrite + FTS"),
    ("keyword_text (analysis)", [("corpus_pipeline.keywords", "keyword_text")], 2, "per chunk"),
    ("lancedb create_table", [("lancedb.db", "LanceDBConnection.create_table")], 2, "overwrite"),
    ("lancedb create_index (FTS)", [("lancedb.table", "LanceTable.create_index")], 2, "full rebuild"),
    (
        "merges + quality checks",
        [("assets.chunks", "grouped_outcomes")],
        1,
        "streamed: a group's rows merged, written and checked",
    ),
    ("distribution_metadata", [("assets.chunks", "distribution_metadata")], 1, "stats for the UI"),
    ("table_fingerprint", [("corpus_pipeline.indexing", "table_fingerprint")], 1, "data versions"),
]


def _wrap(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    if getattr(fn, "__bench_probe__", None) == label:
        return fn

    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        global _depth
        wall = time.time()
        t = time.perf_counter()
        _depth += 1
        try:
            return fn(*args, **kwargs)
        finally:
            _depth -= 1
            secs = time.perf_counter() - t
            rec = TIMES[label]
            rec[0] += secs
            rec[1] += 1
            CALLS.append((label, wall, secs, _depth))

    timed.__bench_probe__ = label  # type: ignore[attr-defined]
    return timed


def install() -> list[str]:
    """Wrap every probe that exists in this version of the code; returns the missing ones."""
    missing = []
    for label, places, _, _ in PROBES:
        for module, attr in places:
            try:
                owner: Any = importlib.import_module(module)
                *path, name = attr.split(".")
                for p in path:
                    owner = getattr(owner, p)
                fn = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
            except (ImportError, AttributeError, KeyError):
                missing.append(f"{module}.{attr}")
                continue
            setattr(owner, name, _wrap(label, fn))
    return missing


def snapshot() -> dict[str, tuple[float, int]]:
    return {k: (v[0], v[1]) for k, v in TIMES.items()}


def delta(before: dict[str, tuple[float, int]]) -> dict[str, tuple[float, int]]:
    now = snapshot()
    out = {}
    for k, (s, n) in now.items():
        s0, n0 = before.get(k, (0.0, 0))
        if n - n0:
            out[k] = (s - s0, n - n0)
    return out
