"""Hybrid search over one (kb, strategy_version): child retrieval, parent completion.

    question ── sub-questions (with an LLM; else the question itself) ── for each:
       ├─ vector channel  (cosine over the child vectors, top vector_top_k)   ─ gate ─┐
       └─ keyword channel (full-text index on CJK bigrams + words, top keyword_top_k) ─ gate ─┤
                                                                                          v
            weighted RRF (k = rrf_k) -> candidate_top_k children -> elevate to parents
            -> rerank (with ``rerank:``) -> final_top_k parents
    parents of all sub-questions, de-duplicated -> evidence (images in place, snippets,
    budgets: ``retrieval.evidence``) -> SearchResult

Parent blocks come from the version's ``parent_blocks`` Parquet partition, image texts from
its ``child_chunks`` (the IMAGE / TABLE_IMAGE chunks), both read as a search needs them
(``retrieval.lookup``: the hits' documents only, a bounded cache); a child whose parent is
missing is returned as its own evidence. ``Searcher.open`` builds everything from the KB's
configuration (the version's embedding model, ``search:``, ``rerank:``, ``llm:``) once, for
many queries (``corpus eval``, ``corpus serve``); ``search_kb`` is one query.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from upath import UPath

from corpus_pipeline.embedding import Embedder, EmbeddingConfig, embedding_config, open_embedder
from corpus_pipeline.embedding.batching import query_batcher
from corpus_pipeline.embedding.opening import query_embedding
from corpus_pipeline.embedding.tokens import token_counter_for
from corpus_pipeline.errors import ModelError, StoreError
from corpus_pipeline.keywords import keyword_text
from corpus_pipeline.retrieval.elevation import ChildHit, ParentResult, elevate
from corpus_pipeline.retrieval.evidence import apply_budgets, fit
from corpus_pipeline.retrieval.filters import SearchFilters, format_of_path
from corpus_pipeline.retrieval.fusion import (
    KEYWORD,
    VECTOR,
    ChannelHit,
    FusedHit,
    gate_keyword,
    gate_vector,
    rrf_fuse,
)
from corpus_pipeline.retrieval.lookup import Lookup
from corpus_pipeline.retrieval.passages import parents_where, with_passages
from corpus_pipeline.retrieval.relevance import relevance
from corpus_pipeline.retrieval.rerank import Reranker, RerankOutcome, rerank_order
from corpus_pipeline.retrieval.settings import SearchSettings
from corpus_pipeline.retrieval.subquestions import SubQuestions, split_question
from corpus_pipeline.store.lance import KEYWORD_COLUMN, has_vector_index, vector_mean
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.reader import SnapshotReader
from corpus_pipeline.store.snapshots import Snapshot, resolve

if TYPE_CHECKING:
    from corpus_pipeline.kbconfig import KnowledgeBase
    from corpus_pipeline.llm import LLMClient

_CHILD_COLUMNS = [
    "chunk_id",
    "parent_id",
    "text",
    "doc_path",
    "section_path",
    "start_offset",
    "end_offset",
    "chunk_type",
    "doc_id",
]

log = logging.getLogger(__name__)


def found_by(h: ChildHit) -> dict[str, dict[str, float | int]]:
    """What found a hit: ``{"vector": {"cosine", "rank"}, "keyword": {"bm25", "rank"}}``
    (a channel that did not find it is absent)."""
    out: dict[str, dict[str, float | int]] = {}
    if VECTOR in h.channels:
        out[VECTOR] = {"cosine": round(h.channels[VECTOR].score, 4), "rank": h.channels[VECTOR].rank}
    if KEYWORD in h.channels:
        out[KEYWORD] = {"bm25": round(h.channels[KEYWORD].score, 4), "rank": h.channels[KEYWORD].rank}
    return out


def _hit_dict(h: ChildHit, preview: int) -> dict[str, Any]:
    return {
        "chunk_id": h.chunk_id,
        "score": round(h.score, 6),
        "relevance": round(h.relevance, 4),
        "found_by": found_by(h),
        "channels": {c: {"rank": s.rank, "score": round(s.score, 6)} for c, s in h.channels.items()},
        "chunk_type": h.chunk_type,
        "text": h.preview(preview),
        "start_offset": h.start_offset,
        "end_offset": h.end_offset,
    }


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
    sub_questions: SubQuestions | None = None
    rerank: list[RerankOutcome] = field(default_factory=list)  # one per sub-question reranked
    warnings: list[str] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    filters: SearchFilters | None = None
    #: What was searched: the published snapshot (read the hits' parents and lineage from it)
    #: and the settings the search ran with.
    snapshot: Snapshot | None = field(default=None, repr=False, compare=False)
    settings: SearchSettings | None = field(default=None, repr=False, compare=False)

    def to_dict(self, settings: SearchSettings | None = None) -> dict[str, Any]:
        preview = (settings or self.settings or SearchSettings()).hit_preview_chars
        subs = self.sub_questions
        return {
            "kb": self.kb,
            "strategy_version": self.strategy_version,
            "query": self.query,
            "filters": self.filters.to_dict() if self.filters is not None else None,
            "sub_questions": {
                "questions": list(subs.questions) if subs else [self.query],
                "source": subs.source if subs else "whole",
                **({"error": subs.error} if subs and subs.error else {}),
            },
            "results": [
                {
                    "parent_id": r.parent_id,
                    "score": round(r.score, 6),
                    "relevance": round(r.relevance, 4),
                    "rerank_score": None if r.rerank_score is None else round(r.rerank_score, 6),
                    "text": r.text,
                    "evidence": r.evidence or r.text,
                    "doc_path": r.doc_path,
                    "doc_title": r.doc_title or r.doc_path,
                    "section_path": r.section_path,
                    "start_offset": r.start_offset,
                    "end_offset": r.end_offset,
                    "spans": [list(span) for span in r.returned_spans],
                    "truncated": r.truncated,
                    "images": r.images,
                    "sub_question": r.sub_question,
                    "channels": r.channels,
                    "best_child_score": round(r.best_child_score, 6),
                    "boost": round(r.boost, 6),
                    "hits": [_hit_dict(h, preview) for h in r.hits],
                }
                for r in self.results
            ],
            "evidence_chars": self.evidence_chars,
            "dropped_by_budget": self.dropped_by_budget,
            "channel_hits_before_gates": self.raw_hits,
            "rerank": [o.to_dict() for o in self.rerank] or None,
            "warnings": self.warnings,
            "timings_ms": {k: round(v, 1) for k, v in self.timings_ms.items()},
        }


def gate_and_fuse(
    vrows: Sequence[Mapping[str, Any]],
    krows: Sequence[Mapping[str, Any]],
    baseline: float | None,
    s: SearchSettings,
) -> tuple[list[ChannelHit], list[ChannelHit], list[FusedHit]]:
    """The channels' rows (best first) through the gates and the weighted RRF: (vector hits
    kept, keyword hits kept, fused candidates). What ``Searcher.candidates`` runs, and the
    benchmark funnel with it."""
    vhits = gate_vector(
        [ChannelHit(r["chunk_id"], 1.0 - float(r["_distance"])) for r in vrows],
        s.min_vector_similarity,
        s.vector_relative_floor,
        baseline,
    )
    khits = gate_keyword([ChannelHit(r["chunk_id"], float(r["_score"])) for r in krows], s.keyword_relative_score_floor)
    weights = {VECTOR: s.vector_weight, KEYWORD: s.keyword_weight}
    fused = rrf_fuse({VECTOR: vhits, KEYWORD: khits}, k=s.rrf_k, limit=s.candidate_top_k, weights=weights)
    return vhits, khits, fused


class Searcher:
    """Hybrid search over one (kb, strategy_version) table; reuse it for many queries."""

    def __init__(
        self,
        layout: Layout,
        kb: str,
        version: str,
        *,
        embedding: EmbeddingConfig | str | None = None,
        settings: SearchSettings | None = None,
        parents_file: UPath | Path | None = None,
        embedder: Embedder | None = None,
        reranker: Reranker | None = None,
        llm: LLMClient | None = None,
        snapshot: Snapshot | None = None,
    ) -> None:
        """``embedding`` is the embedding section that embedded the version. Everything is
        read from one published snapshot of the version (``snapshot``, else the one
        published now: ``store.snapshots``): the table at its version, the parents, the
        image texts, the documents' formats. ``parents_file`` (a Parquet file) replaces the
        parents (benchmarks). ``reranker`` and ``llm`` (sub-questions) are optional stages."""
        self.layout, self.kb, self.version = layout, kb, version
        self.snapshot = snapshot if snapshot is not None else resolve(layout, kb, version)
        self._format_exceptions: dict[str, str] | None = None
        self._titles: dict[str, str] | None = None
        self.settings = settings or SearchSettings()
        self.table = self.snapshot.open_table()
        self.rows = self.table.count_rows()
        # Tables written before the analysed column have an ICU index on the raw text.
        self.analysed = KEYWORD_COLUMN in self.table.schema.names
        self.vector_mean = vector_mean(self.table)
        # An ANN index (tables of search.ann_min_rows children and more): probes and refine.
        self.ann = bool(self.rows) and has_vector_index(self.table)
        self.embedding = embedding_config(embedding)
        self.model = self.embedding.model
        self._embedder = embedder
        self._query_embedding: EmbeddingConfig | None = None  # (what ``embedder`` opened; None: given or not yet)
        self.reranker = reranker
        self.llm = llm
        #: parents and image texts, read as searches need them (``retrieval.lookup``)
        self.lookup = Lookup(self.snapshot if parents_file is None else None, parents_file).open()

    @classmethod
    def open(
        cls,
        layout: Layout,
        kb: KnowledgeBase,
        version: str,
        *,
        settings: SearchSettings | None = None,
        snapshot: Snapshot | None = None,
    ) -> Searcher:
        """A searcher over ``version`` of ``kb`` as configured: the model that embedded the
        version, kb.yaml's ``search:`` (or ``settings``), its reranker and, for
        sub-questions, its LLM; over ``snapshot`` (default: the one published now)."""
        from corpus_pipeline.retrieval.rerank import open_reranker
        from corpus_pipeline.store.versions import version_embedding

        s = settings or kb.config.search
        llm = None
        if s.max_sub_questions >= 2:
            from corpus_pipeline.llm import open_llm

            llm = open_llm(kb.config.llm, cache_dir=layout.cache)
        return cls(
            layout,
            kb.name,
            version,
            embedding=version_embedding(layout, kb.name, version, kb.config.embedding),
            settings=s,
            reranker=open_reranker(kb.config.rerank),
            llm=llm,
            snapshot=snapshot,
        )

    @classmethod
    def for_kb(
        cls,
        layout: Layout,
        kb: str,
        version: str,
        *,
        embedding: EmbeddingConfig | str | None = None,
        settings: SearchSettings | None = None,
    ) -> Searcher:
        return cls(layout, kb, version, embedding=embedding, settings=settings)

    def close(self) -> None:
        """Close the clients of remote stages (embedding endpoint, reranker, LLM)."""
        for part in (self._embedder, self.reranker, self.llm):
            closer = getattr(part, "close", None)
            if callable(closer):
                closer()

    @property
    def embedder(self) -> Embedder:
        """What embeds the queries: the version's model, in the runtime ``query_backend``
        picks (``embedding.opening.query_embedding``; torch when ONNX Runtime cannot load
        it and the choice was "auto")."""
        if self._embedder is None:
            wanted = query_embedding(self.embedding, self.settings.query_backend)
            self._query_embedding = wanted
            try:
                self._embedder = open_embedder(wanted)
            except ModelError as exc:
                if wanted == self.embedding or self.settings.query_backend != "auto":
                    raise
                log.warning("queries of %s are embedded in torch: ONNX Runtime could not run it: %s", self.kb, exc)
                self._embedder = open_embedder(self.embedding)
        return self._embedder

    def refresh_query_runtime(self) -> None:
        """Reopen the query embedder on the next search if ``query_backend`` now picks
        another runtime (its export appeared: ``embedding.opening.prepare_query_runtime``).
        Searches in flight keep the embedder they hold."""
        if self._query_embedding is not None and self._query_embedding != query_embedding(
            self.embedding, self.settings.query_backend
        ):
            self._embedder = None

    # ------------------------------------------------------------------ channels

    def _unknown_share(self, query: str) -> float:
        """Share of the query's tokens the model does not know; 0 without its tokenizer."""
        try:
            return token_counter_for(self.embedding).unknown_share(query)
        except ModelError:
            return 0.0

    def format_exceptions(self) -> dict[str, str]:
        """Documents whose format (the documents table's, decided by content) is not the one
        their extension gives: what ``SearchFilters.where`` needs for ``format`` (read once;
        {} when the KB's documents partition is missing)."""
        if self._format_exceptions is None:
            table = SnapshotReader(self.snapshot).column("documents", ["path", "format"])
            odd: dict[str, str] = {}
            if table is not None:
                rows = table.to_pylist()
                odd = {r["path"]: r["format"] for r in rows if r["format"] and r["format"] != format_of_path(r["path"])}
            self._format_exceptions = odd
        return self._format_exceptions

    def titles(self) -> dict[str, str]:
        """Each document's title by path (the ``texts`` table's: front matter, first heading
        or file name; read once; {} for a snapshot parsed before documents had titles)."""
        if self._titles is None:
            try:
                table = SnapshotReader(self.snapshot).column("texts", ["path", "title"])
            except StoreError:  # (no title column yet: results keep their paths)
                table = None
            rows = table.to_pylist() if table is not None else []
            self._titles = {r["path"]: r["title"] for r in rows if r["title"]}
        return self._titles

    def where(self, filters: SearchFilters | None) -> str | None:
        """The LanceDB predicate both channels pre-filter with (None: no row filter)."""
        if filters is None or not filters.restricts_rows:
            return None
        return filters.where(self.format_exceptions() if filters.format else None)

    def _vector(
        self,
        query: str,
        k: int,
        warnings: list[str],
        where: str | None = None,
        keep: list[np.ndarray] | None = None,
    ) -> tuple[list[dict[str, Any]], float | None]:
        """The vector channel's rows (among those ``where`` selects, before the top k) and
        the query's baseline similarity (to the mean vector); the query's vector is appended
        to ``keep`` when given."""
        if k <= 0 or not self.rows or not query.strip():
            return [], None
        unknown = self._unknown_share(query)
        if unknown > self.settings.max_unknown_token_share:
            warnings.append(
                f"vector channel skipped: {unknown:.0%} of the query's tokens are unknown to {self.model} "
                f"(above search.max_unknown_token_share = {self.settings.max_unknown_token_share})"
            )
            return [], None
        vec = query_batcher(self.embedder).embed(query)  # (batched with concurrent searches' queries)
        if keep is not None:
            keep.append(vec)
        if self.vector_mean is not None and self.vector_mean.shape == vec.shape:
            baseline: float | None = float(vec @ self.vector_mean)
        else:
            baseline = None
        q = self.vector_query(vec, k, where)
        rows = cast(list[dict[str, Any]], q.select([*_CHILD_COLUMNS, "_distance"]).to_list())
        return rows, baseline

    def vector_query(self, vec: np.ndarray, k: int, where: str | None = None) -> Any:
        """The LanceDB query of the vector channel: the ``k`` children nearest ``vec`` by cosine
        among those ``where`` selects (pre-filtered). On a table with an ANN index (IVF_PQ):
        ``ann_nprobes`` partitions (with a filter at least that many, more when it leaves fewer
        than ``k`` rows in them), and the ``k × ann_refine_factor`` best by PQ re-ranked by
        their exact cosine, so the distances the gates read are exact; ``ann_nprobes`` 0
        searches exactly. Without a filter the probes are bounded too: LanceDB's unbounded
        maximum searched every partition (p50 ~105 ms instead of ~30 ms at 1M children)."""
        s = self.settings
        q = self.table.search(vec.tolist(), vector_column_name="vector").distance_type("cosine")
        if self.ann:
            if s.ann_nprobes == 0:
                q = q.bypass_vector_index()
            else:
                q = q.minimum_nprobes(s.ann_nprobes).maximum_nprobes(0 if where else s.ann_nprobes)
                q = q.refine_factor(s.ann_refine_factor)
        if where:
            q = q.where(where, prefilter=True)
        return q.limit(k)

    def _keyword(self, query: str, k: int, warnings: list[str], where: str | None = None) -> list[dict[str, Any]]:
        """The keyword channel's rows (among those ``where`` selects, before the top k)."""
        terms = keyword_text(query) if self.analysed else query.strip()
        if k <= 0 or not self.rows or not terms:
            return []
        try:
            q = self.table.search(terms, query_type="fts", fts_columns=KEYWORD_COLUMN if self.analysed else "text")
            if where:
                q = q.where(where, prefilter=True)
            return cast(list[dict[str, Any]], q.select([*_CHILD_COLUMNS, "_score"]).limit(k).to_list())
        except Exception as exc:  # noqa: BLE001 - lance raises bare errors: no FTS index, a rejected query
            warnings.append(f"keyword channel failed: {exc}")
            return []

    def candidates(
        self,
        query: str,
        *,
        filters: SearchFilters | None = None,
        _out: SearchResult | None = None,
        _vector: list[np.ndarray] | None = None,
    ) -> list[ChildHit]:
        """The fused, gated child candidates of ``query`` (best first, ``candidate_top_k``),
        each with its ``relevance``; ``filters`` restrict both channels before their top k,
        and its ``score_threshold`` drops candidates of lower relevance."""
        s = self.settings
        warnings: list[str] = [] if _out is None else _out.warnings
        where = self.where(filters)
        t0 = time.perf_counter()
        vrows, baseline = self._vector(query, s.vector_top_k, warnings, where, _vector)
        t1 = time.perf_counter()
        krows = self._keyword(query, s.keyword_top_k, warnings, where)
        t2 = time.perf_counter()
        rows = {r["chunk_id"]: r for r in (*vrows, *krows)}
        _, _, fused = gate_and_fuse(vrows, krows, baseline, s)
        threshold = filters.score_threshold if filters is not None else None
        out = []
        for f in fused:
            r = rows[f.chunk_id]
            rel = relevance(
                f.channels, baseline, vector_span=s.vector_relevance_span, keyword_half=s.keyword_relevance_half
            )
            if threshold is not None and rel < threshold:
                continue
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
                    rel,
                    r.get("doc_id") or "",
                )
            )
        if _out is not None:
            for name, n in ((VECTOR, len(vrows)), (KEYWORD, len(krows))):
                _out.raw_hits[name] = _out.raw_hits.get(name, 0) + n
            _out.timings_ms[VECTOR] = _out.timings_ms.get(VECTOR, 0.0) + (t1 - t0) * 1e3
            _out.timings_ms[KEYWORD] = _out.timings_ms.get(KEYWORD, 0.0) + (t2 - t1) * 1e3
        return out

    def _rerank(self, question: str, parents: list[ParentResult], out: SearchResult) -> list[ParentResult]:
        """``parents`` re-ordered by the reranker (the fused order when it fails)."""
        if self.reranker is None or len(parents) < 2:
            return parents
        limit = getattr(getattr(self.reranker, "config", None), "max_chars", 2000)
        images = self.lookup.images_of(parents)
        docs = [fit(p, images.get(p.doc_path, ()), limit, self.settings).text for p in parents]
        order, scores, outcome = rerank_order(self.reranker, question, docs)
        out.rerank.append(outcome)
        if scores is None:
            out.warnings.append(f"rerank failed, the fused order is kept: {outcome.error}")
            return parents
        return [replace(parents[i], rerank_score=scores[i]) for i in order]

    def _with_passages(
        self, question: str, vec: np.ndarray | None, parents: list[ParentResult], where: str | None
    ) -> list[ParentResult]:
        """``parents`` with their passages (``retrieval.passages``): their children ranked by
        the query vector and by the keyword channel among them (within ``where``)."""
        s = self.settings
        if s.parent_passages == 0 or not parents:
            return parents
        ids = [p.parent_id for p in parents]
        kw = self._keyword(question, 100_000, [], parents_where(ids, where)) if s.keyword_top_k else []
        ranks = {r["chunk_id"]: i for i, r in enumerate(kw)}
        return with_passages(self.table, vec, parents, s.parent_passages, ranks, where=where)

    def _parents_for(
        self, question: str, index: int, out: SearchResult, top_k: int, filters: SearchFilters | None = None
    ) -> list[ParentResult]:
        """The best ``top_k`` parents of one (sub-)question, reranked when configured."""
        s = self.settings
        vec: list[np.ndarray] = []
        children = self.candidates(question, filters=filters, _out=out, _vector=vec)
        out.candidates.extend(c for c in children if c.chunk_id not in {x.chunk_id for x in out.candidates})
        pool = max(top_k, s.rerank_candidates) if self.reranker is not None else top_k
        elevated = elevate(children, self.lookup.parents_of(children), s.with_(final_top_k=pool))
        t = time.perf_counter()
        ranked = self._rerank(question, elevated, out)[:top_k]
        out.timings_ms["rerank"] = out.timings_ms.get("rerank", 0.0) + (time.perf_counter() - t) * 1e3
        t = time.perf_counter()
        ranked = self._with_passages(question, vec[0] if vec else None, ranked, self.where(filters))
        out.timings_ms["passages"] = out.timings_ms.get("passages", 0.0) + (time.perf_counter() - t) * 1e3
        return [replace(p, sub_question=index) for p in ranked]

    def search(self, query: str, *, top_k: int | None = None, filters: SearchFilters | None = None) -> SearchResult:
        """Parent-level results of ``query``: sub-questions, channels, fusion, elevation,
        rerank, then evidence within the budgets. ``filters`` (``retrieval.filters``)
        restrict what both channels search, before their top k."""
        top = self.settings.final_top_k if top_k is None else top_k
        result = SearchResult(
            self.kb, self.version, query, [], [], filters=filters, snapshot=self.snapshot, settings=self.settings
        )
        t0 = time.perf_counter()
        subs = split_question(query, self.llm, self.settings.max_sub_questions)
        result.sub_questions = subs
        result.timings_ms["sub_questions"] = (time.perf_counter() - t0) * 1e3
        if subs.error:
            result.warnings.append(f"the question was kept whole: {subs.error}")
        per_question = [self._parents_for(q, i, result, top, filters) for i, q in enumerate(subs.questions)]
        merged: list[ParentResult] = []
        seen: set[str] = set()
        for rank in range(max((len(p) for p in per_question), default=0)):
            for ranked in per_question:  # round robin: each sub-question's best parents first
                if rank < len(ranked) and ranked[rank].parent_id not in seen:
                    seen.add(ranked[rank].parent_id)  # the seed's prompt key: "PARENT:" + parent_id
                    merged.append(ranked[rank])
        if result.candidates and not self.lookup.has_parents():
            result.warnings.append(
                f"no parent blocks in {self.kb}@{self.version}: children are returned as their own evidence"
            )
        s = self.settings if top_k is None else self.settings.with_(final_top_k=top_k)
        evidence = apply_budgets(merged, s, self.lookup.images_of(merged))
        titles = self.titles() if evidence.results else {}
        result.results = [replace(r, doc_title=titles.get(r.doc_path, "")) for r in evidence.results]
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
    embedding: EmbeddingConfig | str | None = None,
    settings: SearchSettings | None = None,
    top_k: int | None = None,
    filters: SearchFilters | None = None,
) -> SearchResult:
    """One query against (kb, version) under ``layout`` with the given embedding section
    (no reranker, no sub-questions: ``Searcher.open`` builds a KB's full configuration).
    Without ``embedding``, the model that embedded ``version``."""
    if embedding is None:
        from corpus_pipeline.store.versions import version_embedding

        embedding = version_embedding(layout, kb, version)
    searcher = Searcher.for_kb(layout, kb, version, embedding=embedding, settings=settings)
    try:
        return searcher.search(query, top_k=top_k, filters=filters)
    finally:
        searcher.close()


def search_children(
    layout: Layout,
    kb: str,
    version: str,
    query: str,
    *,
    embedding: EmbeddingConfig | str | None = None,
    top_k: int = 5,
    channel_k: int = 8,
) -> list[ChildHit]:
    """Child-level hybrid search (gated, fused; no elevation): the best ``top_k`` chunks."""
    settings = SearchSettings(vector_top_k=channel_k, keyword_top_k=channel_k, candidate_top_k=max(top_k, 1))
    return Searcher(layout, kb, version, embedding=embedding, settings=settings).candidates(query)


__all__ = [
    "SearchFilters",
    "SearchResult",
    "Searcher",
    "found_by",
    "search_kb",
]
