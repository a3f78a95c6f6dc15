"""Retrieval: hybrid search with parent elevation (seed 003 §6-7), and its evaluation.

Searcher / search_kb     vector + keyword channels over child chunks, evidence gates,
                         RRF, elevation to parent blocks, evidence budgets
search                   the child-level part only (fused chunks, no elevation)
SearchSettings           every number of the above (``search:`` in kb.yaml)
evaluate_version         character-level recall / precision / IoU of the returned spans
"""

from corpus_pipeline.retrieval.elevation import ChildHit, Parent, ParentResult
from corpus_pipeline.retrieval.search import Searcher, SearchResult, search, search_kb
from corpus_pipeline.retrieval.settings import SearchSettings

SearchHit = ChildHit  # the skeleton's name for a child-level hit

__all__ = [
    "ChildHit",
    "Parent",
    "ParentResult",
    "SearchHit",
    "SearchResult",
    "SearchSettings",
    "Searcher",
    "search",
    "search_kb",
]
