"""Where a returned parent's evidence goes: its own children, the best matching first.

A parent is found through the children the channels matched (its *hits*). When the budget
cuts a long parent (a section of a paper, a chapter), its window used to be built around
those hits only. But the channels' top k is over the whole KB: the child of a returned parent
that holds the answer often misses that list while a sibling made it, and the window then
showed the sibling and padding. So, once the parents are chosen, every child of each is
ranked twice among them: by cosine similarity to the query vector (the vectors are in the
search table: no model call) and by the keyword channel restricted to those parents (one
more full-text query); the two orders are fused by reciprocal rank with ``PASSAGE_RRF_K``
and each parent's ``search.parent_passages`` best children (its best hit aside) are its
``passages``. ``retrieval.evidence`` then spends the budget on passages, the best first
whichever parent holds them (``evidence_fill: passages``), and cuts each parent's window
to its best hit and the passages its share holds.

The order of the parents is unchanged; only what a cut parent shows is. Measured on COVID-QA
(``benchmarks/retrieval/RESULTS.md``): the answer was in a returned parent but not in its
evidence for 33 of 385 questions before; the keyword order is what found most of the rest
(the cosine order alone recovered 8 of them, both orders 18). ``PASSAGE_RRF_K`` 0, 1 and 2
score alike there; 10 and 60 (flatter fusions) lose 2 to 4 points of recall.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from corpus_pipeline.retrieval.elevation import ParentResult, Passage
from corpus_pipeline.store.sql import sql_string

_COLUMNS = ["chunk_id", "parent_id", "start_offset", "end_offset", "vector"]
#: The ``k`` of the reciprocal-rank fusion of a parent's children's two orders (the module docstring).
PASSAGE_RRF_K = 1


def parents_where(parent_ids: Sequence[str], where: str | None = None) -> str:
    """The LanceDB predicate of the children of ``parent_ids`` (and ``where``, a search filter's)."""
    mine = f"parent_id IN ({', '.join(sql_string(p) for p in parent_ids)})"
    return f"({mine}) AND ({where})" if where else mine


def children_of(table: Any, parent_ids: Sequence[str], where: str | None = None) -> Any:
    """The search table's rows (``_COLUMNS``) of the children of ``parent_ids`` that ``where``
    selects (an Arrow table)."""
    return table.search().where(parents_where(parent_ids, where)).select(_COLUMNS).limit(None).to_arrow()


def with_passages(
    table: Any,
    query_vector: np.ndarray | None,
    parents: list[ParentResult],
    limit: int,
    keyword_ranks: Mapping[str, int] | None = None,
    *,
    rrf_k: int = PASSAGE_RRF_K,
    where: str | None = None,
) -> list[ParentResult]:
    """``parents`` with their ``passages``: at most ``limit`` of each parent's children (its
    best hit aside), best first by reciprocal-rank fusion (``rrf_k``) of two orders over all
    the parents' children: cosine similarity to ``query_vector`` and ``keyword_ranks`` (the
    keyword channel's order among them, by chunk id); ``where``: a search filter's predicate,
    which passages obey like hits. Either order may be missing (a query the vector channel
    skipped; no keyword match); with neither, or ``limit`` 0, unchanged."""
    keyword_ranks = keyword_ranks or {}
    if (query_vector is None and not keyword_ranks) or limit <= 0 or not parents:
        return parents
    rows = children_of(table, [p.parent_id for p in parents], where)
    if rows.num_rows == 0:
        return parents
    ids = rows.column("chunk_id").to_pylist()
    scores = np.zeros(rows.num_rows, np.float64)
    if query_vector is not None:
        flat = rows.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
        vectors = np.asarray(flat, np.float32).reshape(rows.num_rows, -1)
        q = np.asarray(query_vector, np.float32)
        norms = np.linalg.norm(vectors, axis=1) * (float(np.linalg.norm(q)) or 1.0)
        sims = (vectors @ q) / np.where(norms > 0, norms, 1.0)
        ranks = np.empty(rows.num_rows, np.int64)
        ranks[np.argsort(-sims, kind="stable")] = np.arange(rows.num_rows)
        scores += 1.0 / (rrf_k + ranks + 1)
    for i, cid in enumerate(ids):
        r = keyword_ranks.get(cid)
        if r is not None:
            scores[i] += 1.0 / (rrf_k + r + 1)
    by_parent: dict[str, list[tuple[float, str, int, int]]] = {}
    for cid, pid, a, b, score in zip(
        ids,
        rows.column("parent_id").to_pylist(),
        rows.column("start_offset").to_pylist(),
        rows.column("end_offset").to_pylist(),
        scores.tolist(),
        strict=True,
    ):
        by_parent.setdefault(pid, []).append((-score, cid, int(a), int(b)))
    out = []
    for p in parents:
        best = p.hits[0].chunk_id if p.hits else None
        ranked = sorted(c for c in by_parent.get(p.parent_id, ()) if c[1] != best)
        out.append(replace(p, passages=tuple(Passage(a, b, -score) for score, _, a, b in ranked[:limit])))
    return out
