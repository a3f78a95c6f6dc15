"""Search over a KB's active version: vector and keyword channels, fused."""

from corpus_pipeline.retrieval.search import SearchHit, search

__all__ = ["SearchHit", "search"]
