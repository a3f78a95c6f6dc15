"""Hybrid search over one (kb, strategy_version): child retrieval, parent completion.

    query ─┬─ vector channel  (cosine over the child vectors, top vector_top_k)  ─ gate ─┐
           └─ keyword channel (full-text index on CJK bigrams + words, top keyword_top_k) ─ gate ─┤
                                                                                         v
                     RRF (k = rrf_k) -> candidate_top_k children -> elevate to parents
                     -> final_top_k parents -> evidence budgets -> SearchResult

The keyword channel is what finds Chinese: the default embedding model is English-only,
while the keyword index holds Chinese as overlapping character bigrams (and other text as
stemmed words), and the query is analysed the same way (``retrieval.analysis``). Parent blocks are read from the version's ``parent_blocks``
Parquet partition; a child whose parent is missing is returned as its own evidence.

``Searcher`` opens the table, the parents and the embedding model once, for many queries
(``corpus eval``, benchmarks); ``search_kb`` is one query against a KB's active version.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow.parquet as pq

from corpus_pipeline.embedding import Embedder, load_embedder
from corpus_pipeline.errors import StoreError
from corpus_pipeline.retrieval.analysis import keyword_text, unknown_token_share
from corpus_pipeline.retrieval.elevation import (
    ChildHit,
    Parent,
    ParentResult,
    apply_budgets,
    elevate,
)
from corpus_pipeline.retrieval.fusion import (
    KEYWORD,
    VECTOR,
    ChannelHit,
    gate_keyword,
    gate_vector,
    rrf_fuse,
)
from corpus_pipeline.retrieval.settings import SearchSettings
from corpus_pipeline.store.lance import KEYWORD_COLUMN, open_search_table
from corpus_pipeline.store.layout import Layout

_CHILD_COLUMNS = [
    "chunk_id",
    "parent_id",
    "text",
    "doc_path",
    "section_path",
    "start_offset",
    "end_offset",
    "chunk_type",
]
_PARENT_COLUMNS = ["parent_id", "text", "doc_path", "section_path", "start_offset", "end_offset", "overlap_chars"]


def parents_path(layout: Layout, kb: str, version: str) -> Path:
    """The parent blocks partition of (kb, version)."""
    return layout.partition_dir("parent_blocks", kb, version) / "data.parquet"


def load_parents(path: Path | None) -> dict[str, Parent]:
    """Every parent block of one partition by id ({} when the file does not exist)."""
    if path is None or not path.exists():
        return {}
    try:
        table = pq.read_table(path, columns=_PARENT_COLUMNS)
    except Exception as exc:  # a partial or foreign file: say which
        raise StoreError(f"cannot read parent blocks {path}: {exc}") from exc
    out = {}
    for r in table.to_pylist():
        out[r["parent_id"]] = Parent(
            r["parent_id"],
            r["text"] or "",
            r["doc_path"] or "",
            r["section_path"] or "",
            int(r["start_offset"]),
            int(r["end_offset"]),
            int(r["overlap_chars"] or 0),
        )
    return out


@dataclass
class SearchResult:
    """Parent-level results of one query, plus the fused child candidates behind them."""

    kb: str
    strategy_version: str
    query: str
    results: list[ParentResult]
    candidates: list[ChildHit]
    evidence_chars: int = 0
    dropped_by_budget: list[str] = field(default_factory=list)
    raw_hits: dict[str, int] = field(default_factory=dict)  # per channel, before the gates
    warnings: list[str] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)

    def to_dict(self, settings: SearchSettings | None = None) -> dict[str, Any]:
        preview = (settings or SearchSettings()).hit_preview_chars
        return {
            "kb": self.kb,
            "strategy_version": self.strategy_version,
            "query": self.query,
            "results": [
                {
                    "parent_id": r.parent_id,
                    "score": round(r.score, 6),
                    "text": r.text,
                    "doc_path": r.doc_path,
                    "section_path": r.section_path,
                    "start_offset": r.start_offset,
                    "end_offset": r.end_offset,
                    "truncated": r.truncated,
                    "channels": r.channels,
                    "best_child_score": round(r.best_child_score, 6),
                    "boost": round(r.boost, 6),
                    "hits": [
                        {
                            "chunk_id": h.chunk_id,
                            "score": round(h.score, 6),
                            "channels": {
                                c: {"rank": s.rank, "score": round(s.score, 6)} for c, s in h.channels.items()
                            },
                            "text": h.preview(preview),
                            "start_offset": h.start_offset,
                            "end_offset": h.end_offset,
                        }
                        for h in r.hits
                    ],
                }
                for r in self.results
            ],
            "evidence_chars": self.evidence_chars,
            "dropped_by_budget": self.dropped_by_budget,
            "channel_hits_before_gates": self.raw_hits,
            "warnings": self.warnings,
        }


class Searcher:
    """Hybrid search over one (kb, strategy_version) table; reuse it for many queries."""

    def __init__(
        self,
        layout: Layout,
        kb: str,
        version: str,
        *,
        model: str,
        settings: SearchSettings | None = None,
        parents_file: Path | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        """``parents_file`` defaults to the version's parent_blocks partition."""
        self.kb, self.version = kb, version
        self.settings = settings or SearchSettings()
        self.table = open_search_table(layout, kb, version)
        self.rows = self.table.count_rows()
        # Tables written before the analysed column have an ICU index on the raw text.
        self.analysed = KEYWORD_COLUMN in self.table.schema.names
        self.model = model
        self._embedder = embedder
        self.parents_file = parents_file if parents_file is not None else parents_path(layout, kb, version)
        self.parents = load_parents(self.parents_file)

    @classmethod
    def for_kb(
        cls, layout: Layout, kb: str, version: str, *, model: str, settings: SearchSettings | None = None
    ) -> Searcher:
        return cls(layout, kb, version, model=model, settings=settings)

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = load_embedder(self.model)
        return self._embedder

    # ------------------------------------------------------------------ channels

    def _vector(self, query: str, k: int, warnings: list[str]) -> list[dict[str, Any]]:
        if k <= 0 or not self.rows or not query.strip():
            return []
        unknown = unknown_token_share(self.model, query)
        if unknown > self.settings.max_unknown_token_share:
            warnings.append(
                f"vector channel skipped: {unknown:.0%} of the query's tokens are unknown to {self.model} "
                f"(above search.max_unknown_token_share = {self.settings.max_unknown_token_share})"
            )
            return []
        vec = np.asarray(self.embedder.embed([query])[0], dtype=np.float32)
        return cast(
            list[dict[str, Any]],
            self.table.search(vec.tolist(), vector_column_name="vector")
            .distance_type("cosine")
            .select([*_CHILD_COLUMNS, "_distance"])
            .limit(k)
            .to_list(),
        )

    def _keyword(self, query: str, k: int, warnings: list[str]) -> list[dict[str, Any]]:
        terms = keyword_text(query) if self.analysed else query.strip()
        if k <= 0 or not self.rows or not terms:
            return []
        try:
            return cast(
                list[dict[str, Any]],
                self.table.search(terms, query_type="fts", fts_columns=KEYWORD_COLUMN if self.analysed else "text")
                .select([*_CHILD_COLUMNS, "_score"])
                .limit(k)
                .to_list(),
            )
        except Exception as exc:  # noqa: BLE001 - lance raises bare errors: no FTS index, a rejected query
            warnings.append(f"keyword channel failed: {exc}")
            return []

    def candidates(self, query: str, *, _out: SearchResult | None = None) -> list[ChildHit]:
        """The fused, gated child candidates of ``query`` (best first, ``candidate_top_k``)."""
        s = self.settings
        warnings: list[str] = [] if _out is None else _out.warnings
        t0 = time.perf_counter()
        vrows = self._vector(query, s.vector_top_k, warnings)
        t1 = time.perf_counter()
        krows = self._keyword(query, s.keyword_top_k, warnings)
        t2 = time.perf_counter()
        rows = {r["chunk_id"]: r for r in (*vrows, *krows)}
        vhits = gate_vector(
            [ChannelHit(r["chunk_id"], 1.0 - float(r["_distance"])) for r in vrows], s.min_vector_similarity
        )
        khits = gate_keyword(
            [ChannelHit(r["chunk_id"], float(r["_score"])) for r in krows], s.keyword_relative_score_floor
        )
        fused = rrf_fuse({VECTOR: vhits, KEYWORD: khits}, k=s.rrf_k, limit=s.candidate_top_k)
        out = []
        for f in fused:
            r = rows[f.chunk_id]
            out.append(
                ChildHit(
                    f.chunk_id,
                    r["parent_id"],
                    f.score,
                    f.channels,
                    r["text"] or "",
                    r["doc_path"] or "",
                    r["section_path"] or "",
                    int(r["start_offset"]),
                    int(r["end_offset"]),
                    r.get("chunk_type") or "TEXT",
                )
            )
        if _out is not None:
            _out.raw_hits = {VECTOR: len(vrows), KEYWORD: len(krows)}
            _out.timings_ms.update(vector=(t1 - t0) * 1e3, keyword=(t2 - t1) * 1e3)
        return out

    def search(self, query: str, *, top_k: int | None = None) -> SearchResult:
        """Parent-level results of ``query``: elevated, boosted, cut to the budgets."""
        s = self.settings if top_k is None else self.settings.with_(final_top_k=top_k)
        result = SearchResult(self.kb, self.version, query, [], [])
        t0 = time.perf_counter()
        result.candidates = self.candidates(query, _out=result)
        if result.candidates and not self.parents:
            result.warnings.append(
                f"no parent blocks at {self.parents_file}: children are returned as their own evidence"
            )
        evidence = apply_budgets(elevate(result.candidates, self.parents, s), s)
        result.results = list(evidence.results)
        result.evidence_chars = evidence.chars
        result.dropped_by_budget = list(evidence.dropped_by_budget)
        result.timings_ms["total"] = (time.perf_counter() - t0) * 1e3
        return result


def search_kb(
    layout: Layout,
    kb: str,
    version: str,
    query: str,
    *,
    model: str,
    settings: SearchSettings | None = None,
    top_k: int | None = None,
) -> SearchResult:
    """One query against (kb, version) under ``layout``: what ``corpus search`` runs."""
    return Searcher.for_kb(layout, kb, version, model=model, settings=settings).search(query, top_k=top_k)


def search(
    layout: Layout, kb: str, version: str, query: str, *, model: str, top_k: int = 5, channel_k: int = 8
) -> list[ChildHit]:
    """Child-level hybrid search (gated, fused; no elevation): the best ``top_k`` chunks."""
    settings = SearchSettings(vector_top_k=channel_k, keyword_top_k=channel_k, candidate_top_k=max(top_k, 1))
    return Searcher(layout, kb, version, model=model, settings=settings).candidates(query)
