"""Peers: plain retrievers over the very chunks (and vectors) the product indexed.

    bm25-words     rank_bm25.BM25Okapi over the child texts; tokens: NFKC, lower-cased,
                   ``[a-z0-9]+`` words and every CJK character on its own
    bm25-bigrams   the same, CJK runs as overlapping character bigrams (a lone character stays)
    vector         exact cosine over the stored child vectors; the query embedded by the
                   product's own embedder for that version (query prefix included)

Each ranks the children, maps them to their parents in rank order (de-duplicated) until
``top_parents`` parents, and returns those parents' full spans. The budgeted variants cut
the same parents to the product's default evidence budgets (each parent at most 2200
characters, 5200 in all, counted in characters of the scored span; a cut parent keeps a
window centred on the child that brought it in first): ``@5200`` fills them greedily in
rank order (the seed's rule: two long parents take 4400, the fifth rarely fits),
``@5200eq`` gives every parent an equal share (water filling, the product's rule since its
evidence module). All are scored with the
product's scorer (``span_scores``) on the questions the product's anchoring keeps.
A BM25 peer ranks only children that share a term with the question (score > 0); the
vector peer ranks every child (it has no gate).
"""

from __future__ import annotations

import re
import time
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

import numpy as np

from corpus_pipeline.retrieval.evaluation import Question, Span, span_scores
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.parquet import dataset, has_partition, read_table

#: The product's default evidence budgets (``search.parent_evidence_max_chars`` and
#: ``search.total_evidence_max_chars``); read from its settings when they are there.
PARENT_BUDGET, TOTAL_BUDGET = 2200, 5200

# Han (with extension A and compatibility ideographs), kana, Hangul syllables.
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
_WORD_OR_CJK_CHAR = re.compile(f"[a-z0-9]+|[{_CJK}]")
_WORD_OR_CJK_RUN = re.compile(f"[a-z0-9]+|[{_CJK}]+")
_IS_CJK = re.compile(f"[{_CJK}]")


def _norm(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower()


def tokens_words(text: str) -> list[str]:
    """Lower-cased ``[a-z0-9]+`` words, and each CJK character as a token."""
    return _WORD_OR_CJK_CHAR.findall(_norm(text))


def tokens_bigrams(text: str) -> list[str]:
    """Lower-cased ``[a-z0-9]+`` words, and CJK runs as overlapping bigrams."""
    out: list[str] = []
    for tok in _WORD_OR_CJK_RUN.findall(_norm(text)):
        if _IS_CJK.match(tok) and len(tok) > 1:
            out.extend(tok[i : i + 2] for i in range(len(tok) - 1))
        else:
            out.append(tok)
    return out


# --------------------------------------------------------------------------- the chunks


@dataclass
class Chunks:
    """The children and parents of one (kb, version), as the product wrote them."""

    children: list[dict[str, Any]]
    parents: dict[str, dict[str, Any]]
    vectors: np.ndarray | None  # one row per child (L2-normalised), None without embeddings
    has_vector: np.ndarray  # bool per child

    @classmethod
    def load(cls, layout: Layout, kb: str, version: str) -> Chunks:
        cfile = layout.partition_dir("child_chunks", kb, version)
        pfile = layout.partition_dir("parent_blocks", kb, version)
        vfile = layout.partition_dir("chunk_embeddings", kb, version)
        ccols = ["chunk_id", "parent_id", "text", "doc_path", "section_path", "start_offset", "end_offset"]
        have = set(dataset(cfile).schema.names)
        children = read_table(cfile, columns=[c for c in ccols if c in have]).to_pylist()
        pcols = ["parent_id", "text", "doc_path", "section_path", "start_offset", "end_offset", "overlap_chars"]
        have = set(dataset(pfile).schema.names)
        parents = {r["parent_id"]: r for r in read_table(pfile, columns=[c for c in pcols if c in have]).to_pylist()}
        vectors, mask = None, np.zeros(len(children), dtype=bool)
        if has_partition(vfile):
            vt = read_table(vfile, columns=["chunk_id", "vector"]).to_pylist()
            by_id = {r["chunk_id"]: r["vector"] for r in vt}
            dim = len(next(iter(by_id.values()))) if by_id else 0
            vectors = np.zeros((len(children), dim), dtype=np.float32)
            for i, c in enumerate(children):
                v = by_id.get(c["chunk_id"])
                if v is not None:
                    vectors[i] = v
                    mask[i] = True
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors = vectors / np.where(norms > 0, norms, 1.0)
        return cls(children, parents, vectors, mask)


# --------------------------------------------------------------------------- rankers

Ranker = Callable[[str], np.ndarray]  # query -> child indices, best first


@dataclass
class Peer:
    name: str
    rank: Ranker
    build_seconds: float
    about: str


def bm25_peer(name: str, chunks: Chunks, tokenize: Callable[[str], list[str]]) -> Peer:
    from rank_bm25 import BM25Okapi

    t0 = time.perf_counter()
    corpus = [tokenize(c["text"] or "") for c in chunks.children]
    bm25 = BM25Okapi(corpus) if any(corpus) else None
    secs = time.perf_counter() - t0

    def rank(query: str) -> np.ndarray:
        terms = tokenize(query)
        if bm25 is None or not terms:
            return np.zeros(0, dtype=np.int64)
        scores = np.asarray(bm25.get_scores(terms))
        order = np.argsort(-scores, kind="stable")
        return order[scores[order] > 0]

    return Peer(name, rank, secs, f"BM25Okapi (k1=1.5, b=0.75) over {tokenize.__name__}; children with score > 0")


def vector_peer(chunks: Chunks, embed_query: Callable[[str], np.ndarray], model: str) -> Peer:
    t0 = time.perf_counter()
    matrix = chunks.vectors if chunks.vectors is not None else np.zeros((0, 1), dtype=np.float32)
    idx = np.flatnonzero(chunks.has_vector)
    sub = matrix[idx]
    secs = time.perf_counter() - t0

    def rank(query: str) -> np.ndarray:
        if not len(idx):
            return np.zeros(0, dtype=np.int64)
        q = np.asarray(embed_query(query), dtype=np.float32).reshape(-1)
        q = q / (np.linalg.norm(q) or 1.0)
        sims = sub @ q
        return np.asarray(idx[np.argsort(-sims, kind="stable")])

    return Peer("vector", rank, secs, f"exact cosine over the stored child vectors; query embedded by {model}")


# --------------------------------------------------------------------------- parents and scores


def default_budgets() -> tuple[int, int]:
    """(per parent, total) characters: the product's defaults, or 2200 / 5200."""
    try:
        from corpus_pipeline.retrieval.settings import SearchSettings

        d = SearchSettings()
        return int(d.parent_evidence_max_chars), int(d.total_evidence_max_chars)
    except Exception:  # noqa: BLE001 - settings moved or renamed: the documented defaults
        return PARENT_BUDGET, TOTAL_BUDGET


@dataclass(frozen=True)
class Returned:
    """One returned parent: its span, and the span of the child that ranked it first."""

    parent_id: str
    doc_path: str
    start: int
    end: int
    best_child: tuple[int, int]


def top_parents(order: np.ndarray, chunks: Chunks, n: int) -> list[Returned]:
    """Children in rank order -> their parents (full spans), de-duplicated, until ``n``.

    A child whose parent row is missing is its own evidence (as in the product)."""
    out: list[Returned] = []
    seen: set[str] = set()
    for i in order.tolist():
        c = chunks.children[i]
        pid = str(c["parent_id"])
        if pid in seen:
            continue
        seen.add(pid)
        child = (int(c["start_offset"]), int(c["end_offset"]))
        p = chunks.parents.get(pid)
        if p is None:
            out.append(Returned(pid, str(c["doc_path"] or ""), *child, child))
        else:
            out.append(Returned(pid, str(p["doc_path"] or ""), int(p["start_offset"]), int(p["end_offset"]), child))
        if len(out) == n:
            break
    return out


def _window(p: Returned, cap: int) -> Returned:
    """``p`` cut to ``cap`` characters of its span: a window centred on its best-matching
    child (from the child's start when the child alone is longer)."""
    if p.end - p.start <= cap:
        return p
    cs, ce = max(p.start, p.best_child[0]), min(p.end, p.best_child[1])
    start = cs if ce - cs >= cap else cs - (cap - (ce - cs)) // 2
    start = max(p.start, min(start, p.end - cap))
    return Returned(p.parent_id, p.doc_path, start, start + cap, p.best_child)


def budget_greedy(parents: Sequence[Returned], per_parent: int, total: int) -> list[Returned]:
    """In rank order, each parent cut to ``min(per_parent, what is left of total)``; once
    ``total`` is spent the remaining parents are dropped (the seed's rule)."""
    out: list[Returned] = []
    used = 0
    for p in parents:
        cap = min(per_parent, total - used)
        if cap <= 0:
            break
        cut = _window(p, cap)
        out.append(cut)
        used += cut.end - cut.start
    return out


#: Equal shares: a parent whose share would be under this is dropped rather than cut.
MIN_SHARE = 200


def water_fill(demands: Sequence[int], total: int) -> list[int]:
    """Each demand gets ``min(demand, level)``, the level as high as ``total`` allows."""
    out = [0] * len(demands)
    open_ = [i for i, d in enumerate(demands) if d > 0]
    left = total
    while open_ and left > 0:
        level = left // len(open_)
        if level == 0:
            break
        satisfied = [i for i in open_ if demands[i] - out[i] <= level]
        if not satisfied:
            for i in open_:
                out[i] += level
            break
        for i in satisfied:
            left -= demands[i] - out[i]
            out[i] = demands[i]
        open_ = [i for i in open_ if i not in satisfied]
    return out


def budget_equal(parents: Sequence[Returned], per_parent: int, total: int) -> list[Returned]:
    """Every parent an equal share of ``total`` (at most ``per_parent``), a short parent's
    unused share going to the others (water filling); parents whose share would be under
    ``MIN_SHARE`` are dropped, the lowest-ranked first."""
    kept = list(parents)
    while True:
        demands = [min(per_parent, p.end - p.start) for p in kept]
        shares = water_fill(demands, total)
        short = [i for i, sh in enumerate(shares) if sh < min(MIN_SHARE, demands[i])]
        if not short:
            break
        kept.pop(short[-1])
    return [_window(p, sh) for p, sh in zip(kept, shares, strict=True)]


BUDGETS = {"greedy": budget_greedy, "equal": budget_equal}
#: Row-label suffixes of the budgeted variants, after ``@<total>``.
BUDGET_SUFFIX = {"greedy": "", "equal": "eq"}


def _score(results: Sequence[Returned], q: Question) -> dict[str, Any]:
    spans = [Span(r.doc_path, r.start, r.end) for r in results]
    s = span_scores(spans, q.references)
    first = next((rank for rank, sp in enumerate(spans, 1) if span_scores([sp], q.references).overlap_chars), None)
    return {
        "recall": round(s.recall, 4),
        "precision": round(s.precision, 4),
        "iou": round(s.iou, 4),
        "returned_chars": s.returned_chars,
        "first_relevant_rank": first,
        "returned": [[sp.doc_path, sp.start, sp.end] for sp in spans],
    }


def quantile(values: Sequence[float], q: float) -> float:
    """Nearest-rank quantile (the product's ``corpus eval`` formula); 0 when empty."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))] if ordered else 0.0


def summarize(rows: Sequence[dict[str, Any]], ms: Sequence[float]) -> dict[str, float | int]:
    if not rows:
        return {"questions": 0}
    return {
        "questions": len(rows),
        "parent_recall": round(fmean(r["recall"] for r in rows), 4),
        "parent_precision": round(fmean(r["precision"] for r in rows), 4),
        "parent_iou": round(fmean(r["iou"] for r in rows), 4),
        "hit_rate": round(fmean(1.0 if r["first_relevant_rank"] else 0.0 for r in rows), 4),
        "mrr": round(fmean(1.0 / r["first_relevant_rank"] if r["first_relevant_rank"] else 0.0 for r in rows), 4),
        "mean_returned_chars": round(fmean(r["returned_chars"] for r in rows), 1),
        "query_p50_ms": round(quantile(ms, 0.5), 2),
        "query_p95_ms": round(quantile(ms, 0.95), 2),
    }


@dataclass
class PeerReport:
    name: str
    about: str
    build_seconds: float
    budget: tuple[int, int]  # (per parent, total) characters
    variants: dict[str, dict[str, float | int]] = field(default_factory=dict)  # "full", "greedy", "equal"
    questions: list[dict[str, Any]] = field(default_factory=list)


def evaluate_peer(
    peer: Peer, chunks: Chunks, questions: Sequence[Question], budgets: Sequence[str], n_parents: int = 5
) -> PeerReport:
    """Rank, elevate and score every question, in full and under each budget rule in
    ``budgets`` (keys of ``BUDGETS``); the query time is ranking + elevation, warm."""
    budget = default_budgets()
    if questions:
        peer.rank(questions[0].question)  # warm: model loaded, caches filled
    rows: dict[str, list[dict[str, Any]]] = {k: [] for k in ("full", *budgets)}
    ms: list[float] = []
    details = []
    for q in questions:
        t0 = time.perf_counter()
        order = peer.rank(q.question)
        parents = top_parents(order, chunks, n_parents)
        ms.append((time.perf_counter() - t0) * 1e3)
        row: dict[str, Any] = {"id": q.id, "question": q.question, "ms": round(ms[-1], 2)}
        for k in rows:
            scored = _score(parents if k == "full" else BUDGETS[k](parents, *budget), q)
            rows[k].append(scored)
            row[k] = scored
        details.append(row)
    rep = PeerReport(peer.name, peer.about, round(peer.build_seconds, 3), budget)
    rep.variants = {k: summarize(v, ms) for k, v in rows.items()}
    rep.questions = details
    return rep
