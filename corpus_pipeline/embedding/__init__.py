"""Embeddings: models behind one interface, their tokenizers, and the vector cache.

tokens    token counting with the model's own tokenizer (chunk sizes, token_count)
local     sentence-transformers models on this machine (the packaged defaults, a folder)
cache     vectors by (model, text hash), shared by every KB, version and run
"""

from corpus_pipeline.embedding.cache import CachedEmbedder, Embedder, EmbeddingCache, embed_with_cache, text_hash
from corpus_pipeline.embedding.local import SentenceTransformerEmbedder, load_embedder

__all__ = [
    "CachedEmbedder",
    "Embedder",
    "EmbeddingCache",
    "SentenceTransformerEmbedder",
    "embed_with_cache",
    "load_embedder",
    "text_hash",
]
