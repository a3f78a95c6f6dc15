"""Latency at 1M children: flat scan against the IVF_PQ index, through the ``Searcher``.

The table has the product's columns (``search_schema`` + ``keyword_text``; texts made of
the bundled KBs' sentences, 20 children per document) and synthetic unit vectors of 384
dimensions with the structure of real embeddings: a common direction (every e5 vector is
close to the mean), one of 1,000 topics, the document's own direction, and noise; queries
are drawn the same way around existing documents (so the exact top 10 is mostly one
document's children, as for a real question). Written in batches of 100k with LanceDB
directly (no full-text index: the vector channel does not read it, and building it over 1M
texts would only add minutes), then ``store.lance.ensure_vector_index`` builds the index the
product builds. Exact neighbours for recall: numpy over every vector.
"""

from __future__ import annotations

import json
import random
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from benchmarks.ann.common import GivenVectors, load_average, percentiles, recall_at, vector_rows, vector_searcher
from corpus_pipeline.keywords import keyword_text
from corpus_pipeline.retrieval.filters import SearchFilters
from corpus_pipeline.retrieval.settings import SearchSettings
from corpus_pipeline.store.lance import (
    KEYWORD_COLUMN,
    VECTOR_INDEX_MIN_ROWS,
    VECTOR_MEAN_KEY,
    connect,
    ensure_vector_index,
    open_search_table,
    vector_index_params,
    vector_index_state,
)
from corpus_pipeline.store.layout import Layout, search_table_name
from corpus_pipeline.store.schemas import search_schema

REPO = Path(__file__).resolve().parents[2]
DIM = 384
PER_DOC = 20
TOPICS = 1000
BATCH = 100_000
FLAT_QUERIES = 40
#: A narrow filter: documents whose number starts with 12 (~2 % of the rows).
NARROW = "doc12*.md"


def _unit(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)
    return out


class Generator:
    """Structured synthetic embeddings (deterministic per document)."""

    def __init__(self, seed: int = 7) -> None:
        rng = np.random.default_rng(seed)
        self.mean = _unit(rng.standard_normal(DIM))
        self.topics = _unit(rng.standard_normal((TOPICS, DIM)))
        self.seed = seed

    def doc_dirs(self, docs: np.ndarray) -> np.ndarray:
        """Each document's own direction (the same for every child of a document)."""
        uniq, inverse = np.unique(docs, return_inverse=True)
        dirs = np.stack([np.random.default_rng((self.seed, int(d))).standard_normal(DIM) for d in uniq])
        return _unit(dirs)[inverse]

    def vectors(self, docs: np.ndarray, noise: float, rng: np.random.Generator) -> np.ndarray:
        v = (
            1.0 * self.mean
            + 0.7 * self.topics[docs % TOPICS]
            + 0.5 * self.doc_dirs(docs)
            + noise * rng.standard_normal((len(docs), DIM)) / np.sqrt(DIM) * 3
        )
        return _unit(v)


def _texts(n: int) -> list[str]:
    sents: list[str] = []
    for f in sorted((REPO / "data" / "kbs").glob("*/*")):
        if f.suffix in (".md", ".txt"):
            text = f.read_text(encoding="utf-8")
            sents += [s.strip() for s in re.split(r"(?<=[。！？.!?])\s*|\n+", text) if len(s.strip()) > 20]
    rng = random.Random(7)
    return [" ".join(rng.choice(sents) for _ in range(rng.randint(3, 7)))[:800] for _ in range(n)]


def write_table(layout: Layout, rows: int, gen: Generator) -> tuple[np.ndarray, float]:
    """The 1M-row table (replaced) and its vectors; returns (vectors, seconds)."""
    pool = _texts(5000)
    pool_kw = [keyword_text(t) for t in pool]
    schema = search_schema(DIM).append(pa.field(KEYWORD_COLUMN, pa.string()))
    db = connect(layout)
    name = search_table_name("bench", "v")
    rng = np.random.default_rng(11)
    all_vecs = np.empty((rows, DIM), dtype=np.float32)
    t0 = time.perf_counter()
    tbl = None
    for start in range(0, rows, BATCH):
        idx = np.arange(start, min(rows, start + BATCH))
        docs = idx // PER_DOC
        vecs = gen.vectors(docs, 0.35, rng)
        all_vecs[idx] = vecs
        pick = [int(i) % len(pool) for i in (idx * 2654435761) % 5000]
        texts = [pool[p] for p in pick]
        cols: dict[str, Any] = {
            "chunk_id": [f"c{i}" for i in idx],
            "parent_id": [f"p{i // 3}" for i in idx],
            "chunk_index": idx % PER_DOC,
            "chunk_type": ["TEXT"] * len(idx),
            "kb": ["bench"] * len(idx),
            "strategy_version": ["v"] * len(idx),
            "doc_id": [f"d{d}" for d in docs],
            "doc_path": [f"doc{d}.md" for d in docs],
            "text": texts,
            "start_offset": (idx % PER_DOC) * 900,
            "end_offset": (idx % PER_DOC) * 900 + np.asarray([len(t) for t in texts]),
            "char_count": [len(t) for t in texts],
            "token_count": [len(t) // 4 for t in texts],
            "section_path": [""] * len(idx),
            "page_num": [None] * len(idx),
            "block_index": idx % PER_DOC,
            "strategy": ["RECURSIVE"] * len(idx),
            "metadata": ["{}"] * len(idx),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vecs.reshape(-1), pa.float32()), DIM),
            KEYWORD_COLUMN: [pool_kw[p] for p in pick],
        }
        batch = pa.table(
            {f.name: pa.array(cols[f.name], f.type) if f.name != "vector" else cols["vector"] for f in schema},
            schema=schema,
        )
        if tbl is None:
            mean = all_vecs[: len(idx)].astype(np.float64).mean(axis=0)
            batch = batch.replace_schema_metadata({VECTOR_MEAN_KEY: json.dumps([round(float(x), 7) for x in mean])})
            tbl = db.create_table(name, data=batch, mode="overwrite")
        else:
            tbl.add(batch)
    return all_vecs, time.perf_counter() - t0


def exact_top(vecs: np.ndarray, queries: np.ndarray, k: int, mask: np.ndarray | None = None) -> list[list[str]]:
    out = []
    for q in queries:
        sims = vecs @ q
        if mask is not None:
            sims = np.where(mask, sims, -np.inf)
        top = np.argpartition(-sims, k)[:k]
        out.append([f"c{i}" for i in top[np.argsort(-sims[top])]])
    return out


def bench_latency(
    work: Path, rows: int, n_queries: int, *, sweep: bool = True, min_rows: int = VECTOR_INDEX_MIN_ROWS
) -> dict[str, Any]:
    layout = Layout(work)
    gen = Generator()
    vecs, write_s = write_table(layout, rows, gen)
    rng = np.random.default_rng(99)
    qdocs = rng.integers(0, rows // PER_DOC, n_queries)
    qvecs = gen.vectors(qdocs, 0.5, rng)
    queries = [f"q{i}" for i in range(n_queries)]
    emb = GivenVectors(queries, qvecs)
    k = SearchSettings().vector_top_k
    exact = exact_top(vecs, qvecs, k)
    paths = np.asarray([f"doc{d}.md" for d in np.arange(rows) // PER_DOC])
    narrow_mask = np.char.startswith(paths, "doc12")
    exact_narrow = exact_top(vecs, qvecs, k, narrow_mask)
    del paths

    def run(
        filters: SearchFilters | None = None, n: int = n_queries, **settings: Any
    ) -> tuple[list[list[str]], list[float]]:
        s = vector_searcher(layout, "bench", "v", emb, **settings)
        vector_rows(s, queries[0], filters)  # warm: open files, caches
        ids, ms = [], []
        for q in queries[:n]:
            got, t = vector_rows(s, q, filters)
            ids.append(got)
            ms.append(t)
        return ids, ms

    def recall(got: list[list[str]], truth: list[list[str]]) -> dict[str, float]:
        truth = truth[: len(got)]
        return {
            "recall@10": round(float(np.mean([recall_at(g, e, 10) for g, e in zip(got, truth, strict=True)])), 4),
            f"recall@{k}": round(float(np.mean([recall_at(g, e, k) for g, e in zip(got, truth, strict=True)])), 4),
        }

    out: dict[str, Any] = {
        "rows": rows,
        "queries": n_queries,
        "write_s": round(write_s, 1),
        "load_before": load_average(),
    }
    # The flat scan takes seconds a query at 1M rows: FLAT_QUERIES of them.
    got, ms = run(n=FLAT_QUERIES)
    out["flat"] = {"queries": len(ms), **percentiles(ms), **recall(got, exact)}
    got, ms = run(SearchFilters(path=NARROW), n=FLAT_QUERIES)
    out["flat, narrow filter"] = {"queries": len(ms), **percentiles(ms), **recall(got, exact_narrow)}
    tbl = open_search_table(layout, "bench", "v")
    t0 = time.perf_counter()
    action = ensure_vector_index(tbl, min_rows)
    out["index"] = {
        "action": action,
        "build_s": round(time.perf_counter() - t0, 1),
        "params": vector_index_params(rows, DIM),
        "load_after_build": load_average(),
    }
    d = SearchSettings()
    configs = [(d.ann_nprobes, d.ann_refine_factor)]
    if sweep:
        configs += [(10, 5), (10, 10), (20, 5), (40, 10), (80, 10)]
    out["ann"] = []
    for nprobes, refine in dict.fromkeys(configs):
        got, ms = run(ann_nprobes=nprobes, ann_refine_factor=refine)
        out["ann"].append(
            {"ann_nprobes": nprobes, "ann_refine_factor": refine, **percentiles(ms), **recall(got, exact)}
        )
    got, ms = run(SearchFilters(path=NARROW))
    hits_outside = sum(not str(int(cid[1:]) // PER_DOC).startswith("12") for g in got for cid in g)
    out["ann, narrow filter"] = {
        **percentiles(ms),
        **recall(got, exact_narrow),
        "hits outside the filter": hits_outside,
    }
    # Incremental: 5 % more rows appended (what merge_insert of new documents leaves), then
    # ensure_vector_index adds them to the index without retraining.
    extra = rows // 20
    idx = np.arange(rows, rows + extra)
    more = gen.vectors(idx // PER_DOC, 0.35, np.random.default_rng(12))
    tbl = open_search_table(layout, "bench", "v")
    sample = tbl.search().limit(extra).to_arrow().drop_columns(["vector"])
    sample = sample.set_column(sample.schema.get_field_index("chunk_id"), "chunk_id", pa.array([f"c{i}" for i in idx]))
    sample = sample.append_column("vector", pa.FixedSizeListArray.from_arrays(pa.array(more.reshape(-1)), DIM))
    tbl.add(sample.select(tbl.schema.names))
    before = vector_index_state(tbl)
    t0 = time.perf_counter()
    action = ensure_vector_index(tbl, min_rows)
    secs = time.perf_counter() - t0
    after = vector_index_state(open_search_table(layout, "bench", "v"))
    got, ms = run()
    out["after appending 5 %"] = {
        "unindexed_before": before.unindexed_rows if before else None,
        "action": action,
        "seconds": round(secs, 1),
        "unindexed_after": after.unindexed_rows if after else None,
        **percentiles(ms),
    }
    out["load_after"] = load_average()
    return out
