"""Recall of the ANN index against exact search on real vectors.

The children of ``covid-qa-en`` (English) and ``cmrc2018-trial-zh`` (Chinese) from
``../shared/benchmarks``, indexed by ``corpus index`` with the product's defaults
(multilingual-e5-small) in a CORPUS_HOME under ``OUT/real/home`` (kept: its vector cache makes
a second run skip the model), and their questions embedded as queries by the same model
(cached in ``OUT/real/queries-*.npy``). Both KBs' children go into one table written by
``store.lance.write_search_table`` with ``ann_min_rows`` at its floor, so the product's
``ensure_vector_index`` builds the IVF_PQ index it would build at scale; every question is then
searched through the ``Searcher``'s vector channel exactly (``ann_nprobes: 0``) and with the
ANN at the defaults and a sweep of probes / refine factors, without and with a filter.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from benchmarks.ann.common import GivenVectors, percentiles, recall_at, vector_rows, vector_searcher
from corpus_pipeline.kbconfig import match_glob
from corpus_pipeline.retrieval.evaluation import load_questions
from corpus_pipeline.retrieval.filters import SearchFilters
from corpus_pipeline.retrieval.settings import ANN_MIN_ROWS_FLOOR, SearchSettings
from corpus_pipeline.store.lance import open_search_table, vector_index_params, vector_index_state, write_search_table
from corpus_pipeline.store.layout import Layout

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "benchmarks"
SOURCES = ["covid-qa-en", "cmrc2018-trial-zh"]
#: Filters: the English KB's documents (3/4 of the rows), and ten of them (~8 %).
FILTERS = {"covid-only": "docs/article-*", "ten-docs": "docs/article-00*"}


def prepare(out: Path, timeout: float | None, reuse: list[Path] | None = None) -> dict[str, Path]:
    """The CORPUS_HOME of each KB, indexed: the first of ``reuse`` where the KB has an active
    version (vectors from an existing index, e.g. ``benchmarks.retrieval --keep``'s homes),
    else ``OUT/real/home`` (``corpus index``, skipped when already built)."""
    from benchmarks.retrieval import kbfolder, product
    from corpus_pipeline.store.versions import active_version

    home = out / "real" / "home"
    homes: dict[str, Path] = {}
    for name in SOURCES:
        found = [h for h in reuse or [] if (h / "kbs" / name).is_dir() and active_version(Layout(h), name)]
        if found:
            homes[name] = found[0]
            continue
        homes[name] = home
        if not (home / "kbs" / name).is_dir():
            sel = kbfolder.select(SHARED / name, name, None, None)
            kbfolder.materialize(sel, home, questions=False)
        if active_version(Layout(home), name) is None:
            t0 = time.perf_counter()
            run = product.index(home, name, timeout=timeout)
            if not run.ok:
                raise RuntimeError(f"corpus index --kb {name} failed: {run.error}\n{run.stderr[-3000:]}")
            print(f"indexed {name} in {time.perf_counter() - t0:.0f} s", flush=True)
    return homes


def load_kb(home: Path, out: Path, name: str) -> tuple[pa.Table, np.ndarray, list[str], np.ndarray]:
    """A KB's table (children, vectors) and its questions with their query vectors."""
    from corpus_pipeline.embedding import open_embedder
    from corpus_pipeline.store.versions import active_version, version_embedding

    layout = Layout(home)
    version = active_version(layout, name)
    assert version is not None
    table = open_search_table(layout, name, version).to_arrow()
    vectors = np.asarray(table.column("vector").to_pylist(), dtype=np.float32)
    questions = [q.question for q in load_questions(SHARED / name / "questions.jsonl")]
    cfg = version_embedding(layout, name, version)
    key = hashlib.sha256(("\n".join(questions) + cfg.model).encode()).hexdigest()[:12]
    cache = out / "real" / f"queries-{name}-{key}.npy"
    if cache.exists():
        qv = np.load(cache)
    else:
        t0 = time.perf_counter()
        qv = np.asarray(open_embedder(cfg).embed_queries(questions), dtype=np.float32)
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.save(cache, qv)
        print(f"embedded {len(questions)} questions of {name} in {time.perf_counter() - t0:.0f} s", flush=True)
    return table, vectors, questions, qv


def bench_recall(
    out: Path, *, timeout: float | None, sweep: bool = True, reuse: list[Path] | None = None
) -> dict[str, Any]:
    homes = prepare(out, timeout, reuse)
    tables, vectors, questions, qvecs, lang = [], [], [], [], []
    for name in SOURCES:
        t, v, q, qv = load_kb(homes[name], out, name)
        tables.append(t.drop_columns(["vector"]))
        vectors.append(v)
        questions += q
        qvecs.append(qv)
        lang += [name] * len(q)
    chunks = pa.concat_tables(tables, promote_options="default")
    vecs = np.concatenate(vectors)
    layout = Layout(out / "real" / "ann")
    t0 = time.perf_counter()
    write_search_table(layout, "real", "v", chunks, vecs, ann_min_rows=ANN_MIN_ROWS_FLOOR)
    write_s = time.perf_counter() - t0
    state = vector_index_state(open_search_table(layout, "real", "v"))
    embedder = GivenVectors(questions, np.concatenate(qvecs))
    defaults = SearchSettings()
    k = defaults.vector_top_k

    def run(filters: SearchFilters | None, **settings: Any) -> tuple[list[list[str]], list[float]]:
        s = vector_searcher(layout, "real", "v", embedder, **settings)
        ids, ms = [], []
        for q in questions:
            got, t = vector_rows(s, q, filters)
            ids.append(got)
            ms.append(t)
        return ids, ms

    def score(got: list[list[str]], exact: list[list[str]]) -> dict[str, Any]:
        r10 = [recall_at(g, e, 10) for g, e in zip(got, exact, strict=True)]
        r20 = [recall_at(g, e, k) for g, e in zip(got, exact, strict=True)]
        by = {
            name: round(float(np.mean([r for r, kb in zip(r10, lang, strict=True) if kb == name])), 4)
            for name in SOURCES
        }
        return {
            "recall@10": round(float(np.mean(r10)), 4),
            f"recall@{k}": round(float(np.mean(r20)), 4),
            "recall@10 by kb": by,
            "queries with recall@10 < 0.8": int(sum(r < 0.8 for r in r10)),
        }

    exact, exact_ms = run(None, ann_nprobes=0)
    rows: list[dict[str, Any]] = []
    configs = [(defaults.ann_nprobes, defaults.ann_refine_factor)]
    if sweep:
        configs += [(p, r) for p in (1, 2, 4) for r in (1, 5, 10)] + [(20, 1)]
    for nprobes, refine in dict.fromkeys(configs):
        got, ms = run(None, ann_nprobes=nprobes, ann_refine_factor=refine)
        rows.append({"ann_nprobes": nprobes, "ann_refine_factor": refine, **score(got, exact), **percentiles(ms)})
    filtered = {}
    path_of: dict[str, str] = {
        str(c): str(d or "")
        for c, d in zip(chunks.column("chunk_id").to_pylist(), chunks.column("doc_path").to_pylist(), strict=True)
    }
    for label, glob in FILTERS.items():
        f = SearchFilters(path=glob)
        ex, _ = run(f, ann_nprobes=0)
        got, ms = run(f)
        outside = sum(not match_glob(path_of[cid], glob) for g in got for cid in g)
        filtered[label] = {
            "path": glob,
            "rows selected": sum(match_glob(p, glob) for p in path_of.values()),
            **score(got, ex),
            **percentiles(ms),
            "hits outside the filter": outside,
        }
    return {
        "homes": {name: str(h) for name, h in homes.items()},
        "rows": len(chunks),
        "dimensions": int(vecs.shape[1]),
        "queries": len(questions),
        "queries by kb": {name: lang.count(name) for name in SOURCES},
        "index": {
            "params (vector_index_params)": vector_index_params(len(chunks), int(vecs.shape[1])),
            "indexed_rows": state.indexed_rows if state else None,
            "write + build s": round(write_s, 1),
        },
        "exact": percentiles(exact_ms),
        "ann": rows,
        "filtered (defaults)": filtered,
    }
