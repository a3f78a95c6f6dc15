"""Retrieval: hybrid search with parent elevation (seed 003 §6-7), and its evaluation.

Searcher / search_kb     sub-questions, vector + keyword channels over child chunks,
                         evidence gates, RRF, elevation to parent blocks, rerank,
                         evidence budgets
search_children          the child-level part only (fused chunks, no elevation)
SearchSettings           every number of the above (``search:`` in kb.yaml)
SearchFilters            path glob, format, section prefix, chunk type, score threshold
                         (pre-filtering inside both channels; ``relevance`` in [0, 1])
evaluate_version         character-level recall / precision / IoU of the returned spans

Names are imported on first use: ``corpus_pipeline.retrieval.settings`` (read by kb.yaml
validation) must not pull in LanceDB.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from corpus_pipeline.retrieval.elevation import ChildHit, Parent, ParentResult
    from corpus_pipeline.retrieval.filters import SearchFilters
    from corpus_pipeline.retrieval.search import Searcher, SearchResult, search_children, search_kb
    from corpus_pipeline.retrieval.settings import SearchSettings

_WHERE = {
    "ChildHit": "elevation",
    "Parent": "elevation",
    "ParentResult": "elevation",
    "Searcher": "search",
    "SearchResult": "search",
    "search_children": "search",
    "search_kb": "search",
    "SearchSettings": "settings",
    "SearchFilters": "filters",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"corpus_pipeline.retrieval.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'corpus_pipeline.retrieval' has no attribute {name!r}")


__all__ = [
    "ChildHit",
    "Parent",
    "ParentResult",
    "SearchFilters",
    "SearchResult",
    "SearchSettings",
    "Searcher",
    "search_children",
    "search_kb",
]
