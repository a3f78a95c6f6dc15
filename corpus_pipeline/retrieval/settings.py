"""Retrieval settings: kb.yaml's ``search:`` section, one validated, frozen object.

    setting                              default  what it does
    vector_top_k                         20       children the vector channel returns (seed: 8)
    keyword_top_k                        20       children the keyword (full-text) channel returns (seed: 8)
    min_vector_similarity                0.0      vector gate, absolute: cosine below it is dropped
    vector_relative_floor                0.0      vector gate, relative (see below)
    keyword_relative_score_floor         0.35     keyword gate: BM25 below floor × the best score is dropped
    rrf_k                                60       reciprocal rank fusion constant: w / (k + rank)
    vector_weight, keyword_weight        1.0      each channel's weight w in the fusion
    candidate_top_k                      10       fused children kept for elevation
    final_top_k                          5        parent blocks returned (per sub-question)
    extra_hit_boost                      0.0      parent boost per extra child hit (seed: 0.12) ...
    max_extra_hits                       3        ... counting at most this many
    multi_channel_boost                  0.0      parent boost when its hits came through both channels (seed: 0.10)
    parent_evidence_max_chars            4000     evidence of one parent, at most (seed: 2200)
    per_subquestion_evidence_max_chars   2200     evidence of one sub-question's parents (when split)
    total_evidence_max_chars             5200     evidence of all parents together, at most
    hit_preview_chars                    140      characters of each matched child in the snippets
    max_hit_snippets                     1        matched children listed under a parent, at most (seed: 3)
    parent_passages                      50       a returned parent's children (its best hit aside) ranked
                                                  by the query vector and the keyword channel among the
                                                  returned parents' children: where a cut parent's window
                                                  goes (``retrieval.passages``; 0: its hits only)
    evidence_fill                        passages what is left of the budget after each parent's
                                                  least (its best hit): "passages" the best passages first,
                                                  whichever parent holds them; "rank" best-ranked parent
                                                  first; "equal" evenly (with sub-questions: "rank")
    max_unknown_token_share              0.25     vector channel abstains when more of the query's
                                                  tokens are unknown ([UNK]) to the embedding model
    max_sub_questions                    4        a compound question is split into at most this
                                                  many (with an LLM configured; 0 or 1: never)
    rerank_candidates                    20       parents sent to the reranker (with ``rerank:``)
    vector_relevance_span                0.5      the share of the way from an arbitrary chunk's
                                                  cosine to 1 that a vector hit's relevance reads as 1
    keyword_relevance_half               12.0     the BM25 score a keyword hit's relevance reads as 0.5
                                                  (both: ``retrieval.relevance``; what is shown and
                                                  what ``score_threshold`` compares, never the order)
    ann_min_rows                         100000   a search table of at least this many children gets an
                                                  ANN index (IVF_PQ) on its vectors when it is written;
                                                  below it the vector channel is a flat, exact scan
    ann_nprobes                          100      IVF partitions the vector channel probes (with a
                                                  filter at least this many: more when it leaves too
                                                  few rows); 0: exact search even on an indexed table
    ann_refine_factor                    10       the channel re-ranks ``vector_top_k`` × this many
                                                  ANN candidates by their exact cosine (so the
                                                  similarities the gates read are exact, not PQ's)
    query_backend                        auto     what runs the query's embedding when the KB's vectors
                                                  come from a local model in torch: "auto" ONNX Runtime
                                                  (the same model exported once: the same vectors to
                                                  float rounding, ~half the CPU of torch for a query) on
                                                  a CPU when onnxruntime is installed and the export is
                                                  on disk (`corpus serve` makes it at its start, once per
                                                  machine; a search never waits for it), else torch;
                                                  "torch" or "onnx" to choose. An int8 or remote
                                                  model always embeds queries as it embedded the KB.

The seed's vector gate (``min_vector_similarity`` 0.45) was set for one model; cosine
similarities of other models live on other scales (all-MiniLM-L6-v2's answers score 0.3 to
0.6, multilingual-e5's unrelated text 0.75), so a fixed number silences one model's channel
and lets all of another's noise through. The relative gate compares each hit with the
query's own scale: ``baseline`` is the query's similarity to the mean vector of the table
(its expected similarity to an arbitrary chunk) and a hit is kept when

    similarity - baseline >= vector_relative_floor × (best similarity - baseline)

so 0 keeps every hit better than an arbitrary chunk, and 1 only the best. The absolute
floor stays for users who calibrated one for their model (0.0: effectively off).

``max_unknown_token_share`` is ours: an English-only model reads a Chinese query as a row
of [UNK]s, and its vector then "matches" every mostly-[UNK] chunk.

parent score = best child score × (1 + extra_hit_boost × min(extra hits, max_extra_hits)
+ multi_channel_boost × multi-channel weight).

Why these defaults (``benchmarks/retrieval/RESULTS.md``; COVID-QA 25 documents / 187
questions and CMRC 2018 trial 256 / 1,001, multilingual-e5-small, product search through
``corpus eval``): the seed's boosts (0.12 per extra hit, 0.10 for both channels) cost 9
points of MRR on COVID-QA (0.76 → 0.67) and 2 on CMRC: a parent with several middling hits
overtook the one with the best hit. Filling the evidence budget best-ranked parent first
(after every parent got its best child) found the answer for 4 more points of COVID-QA
questions than equal shares (0.877 against 0.834 hit rate): English children are ~900
characters, so an equal 1,040-character share held one child and the answer was often in
the top parent's second. Three snippet lines per parent cost 2 points (their characters
come out of the same budget). With sections as parents, letting the best-ranked parent
take up to 4,000 of the 5,200 characters (the seed capped each at 2,200) found 3 points more
COVID-QA answers (parent recall 0.790 → 0.822, MRR 0.740 → 0.776; 5,200: no further gain):
its answer was often in its third or fourth matched child. 8 hits per channel left the
README demo's CPU runbook found by one channel each (ranked under a document found sixth and eighth by both); 20 give it
both channels and change COVID-QA and CMRC by less than a question. RRF k (10, 20, 60)
and channel weights (2:1 either way) changed nothing beyond a question.

Passages (``parent_passages`` 50, ``evidence_fill: passages``): on COVID-QA (50 documents,
385 questions) the answer was in a returned parent but not in its evidence for 33
questions; the budget now goes to the returned parents' best children, ranked by the query
vector and by the keyword channel among them. Parent recall / hit / MRR 0.822 / 0.831 /
0.776 → 0.858 / 0.878 / 0.798 there (4,305 characters a question); on 40 other COVID-QA
documents (840 questions, not used to choose) 0.812 / 0.820 / 0.742 → 0.811 / 0.836 /
0.743; CMRC unchanged
(``benchmarks/retrieval/RESULTS.md``). The cosine order alone, or a flatter fusion (RRF k
10, 60), recovered a third to a half as much.

These settings do not change a KB's ``strategy_version``: the same index serves any of them.
``ann_min_rows`` applies when a version's table is (re)written (``corpus index``; ``--force``
to apply a new value to a table that is up to date); the ANN defaults and their recall
against exact search (≥ 0.95 recall@10) are measured in ``benchmarks/ann/RESULTS.md``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from corpus_pipeline.errors import ConfigError
from corpus_pipeline.store.defaults import VECTOR_INDEX_MIN_ROWS, VECTOR_INDEX_MIN_ROWS_FLOOR

#: The default of ``ann_min_rows`` and its floor: the store's (``store.defaults``).
ANN_MIN_ROWS = VECTOR_INDEX_MIN_ROWS
ANN_MIN_ROWS_FLOOR = VECTOR_INDEX_MIN_ROWS_FLOOR


class SearchSettings(BaseModel):
    """The knobs of hybrid search with parent elevation (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    vector_top_k: int = Field(20, ge=0, le=1000)
    keyword_top_k: int = Field(20, ge=0, le=1000)
    min_vector_similarity: float = Field(0.0, ge=-1.0, le=1.0)
    vector_relative_floor: float = Field(0.0, ge=0.0, le=1.0)
    keyword_relative_score_floor: float = Field(0.35, ge=0.0, le=1.0)
    evidence_fill: Literal["equal", "rank", "passages"] = "passages"
    rrf_k: int = Field(60, ge=0, le=10_000)
    vector_weight: float = Field(1.0, ge=0.0, le=100.0)
    keyword_weight: float = Field(1.0, ge=0.0, le=100.0)
    candidate_top_k: int = Field(10, ge=1, le=1000)
    final_top_k: int = Field(5, ge=1, le=1000)
    extra_hit_boost: float = Field(0.0, ge=0.0, le=10.0)
    max_extra_hits: int = Field(3, ge=0, le=100)
    multi_channel_boost: float = Field(0.0, ge=0.0, le=10.0)
    parent_evidence_max_chars: int = Field(4000, ge=1, le=10_000_000)
    per_subquestion_evidence_max_chars: int = Field(2200, ge=1, le=10_000_000)
    total_evidence_max_chars: int = Field(5200, ge=1, le=100_000_000)
    hit_preview_chars: int = Field(140, ge=0, le=100_000)
    max_hit_snippets: int = Field(1, ge=0, le=100)
    parent_passages: int = Field(50, ge=0, le=1000)
    max_unknown_token_share: float = Field(0.25, ge=0.0, le=1.0)
    max_sub_questions: int = Field(4, ge=0, le=10)
    rerank_candidates: int = Field(20, ge=1, le=1000)
    vector_relevance_span: float = Field(0.5, gt=0.0, le=1.0)
    keyword_relevance_half: float = Field(12.0, gt=0.0, le=10_000.0)
    ann_min_rows: int = Field(ANN_MIN_ROWS, ge=ANN_MIN_ROWS_FLOOR, le=10**12)
    ann_nprobes: int = Field(100, ge=0, le=100_000)
    ann_refine_factor: int = Field(10, ge=1, le=1000)
    query_backend: Literal["auto", "torch", "onnx"] = "auto"

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise settings_error(exc) from None

    @model_validator(mode="after")
    def _one_channel_at_least(self) -> SearchSettings:
        if self.vector_top_k == 0 and self.keyword_top_k == 0:
            raise ValueError("vector_top_k and keyword_top_k are both 0: at least one channel must return hits")
        return self

    @classmethod
    def from_mapping(cls, values: Any) -> SearchSettings:
        """From a mapping with these keys (or a ``SearchSettings``); None: the defaults."""
        if values is None:
            return cls()
        if isinstance(values, SearchSettings):
            return values
        return cls(**dict(values))

    def with_(self, **changes: Any) -> SearchSettings:
        """A copy with some settings changed (``None`` values are ignored), validated."""
        return SearchSettings(**{**self.model_dump(), **{k: v for k, v in changes.items() if v is not None}})

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump()


def settings_error(exc: ValidationError) -> ConfigError:
    """A ``ConfigError`` naming every bad ``search.`` key, its value and what is allowed."""
    lines = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"])
        where = f"search.{key}" if key else "search"
        if err["type"] == "extra_forbidden":
            allowed = ", ".join(SearchSettings.model_fields)
            lines.append(f"unknown search setting {where}; allowed: {allowed}.")
        elif key:
            lines.append(f"{where} = {err.get('input')!r}: {err['msg']}.")
        else:
            lines.append(f"{where}: {err['msg'].removeprefix('Value error, ')}.")
    return ConfigError("\n".join(lines))
