"""What both parts share: a stub embedder (query vectors given), timing through the
product's ``Searcher``, recall against exact search."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from corpus_pipeline.retrieval import Searcher, SearchSettings
from corpus_pipeline.retrieval.filters import SearchFilters
from corpus_pipeline.store.layout import Layout


class GivenVectors:
    """An embedder whose query vectors were computed beforehand (by the real model, or
    synthetic): the benchmark times search, not the model."""

    model_name = "given"

    def __init__(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        self.by_text = {t: vectors[i] for i, t in enumerate(texts)}
        self.dimension = int(vectors.shape[1])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray([self.by_text[t] for t in texts], dtype=np.float32)

    embed_queries = embed


def vector_searcher(layout: Layout, kb: str, version: str, embedder: GivenVectors, **settings: Any) -> Searcher:
    """A ``Searcher`` with only the vector channel on (the one the ANN index serves)."""
    s = SearchSettings(keyword_top_k=0, **settings)
    return Searcher(layout, kb, version, embedding="given", settings=s, embedder=embedder)


def vector_rows(searcher: Searcher, query: str, filters: SearchFilters | None = None) -> tuple[list[str], float]:
    """The vector channel's chunk ids for ``query`` (best first) and its time in ms: the
    span ``Searcher.candidates`` reports as ``timings_ms['vector']`` (the channel's method:
    query embedding, here a look-up, then the LanceDB query with the product's settings)."""
    warnings: list[str] = []
    where = searcher.where(filters)
    t0 = time.perf_counter()
    rows, _ = searcher._vector(query, searcher.settings.vector_top_k, warnings, where)
    ms = (time.perf_counter() - t0) * 1e3
    return [r["chunk_id"] for r in rows], ms


def percentiles(ms: Sequence[float]) -> dict[str, float]:
    a = np.asarray(ms, dtype=np.float64)
    return {"p50_ms": round(float(np.percentile(a, 50)), 1), "p95_ms": round(float(np.percentile(a, 95)), 1)}


def recall_at(got: Sequence[str], exact: Sequence[str], k: int) -> float:
    """Share of the exact top ``k`` in the approximate top ``k`` (1.0 when exact has none)."""
    truth = list(exact)[:k]
    if not truth:
        return 1.0
    return len(set(got[:k]) & set(truth)) / len(truth)


def load_average() -> list[float]:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return []
