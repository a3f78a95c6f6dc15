"""Opening a KB's embedder: its provider's row says which class, imported only now."""

from __future__ import annotations

import functools
import importlib

from corpus_pipeline.embedding.base import Embedder
from corpus_pipeline.embedding.providers import ProviderSpec, provider_spec
from corpus_pipeline.embedding.settings import EmbeddingConfig, embedding_config


def _construct(spec: ProviderSpec, config: EmbeddingConfig) -> Embedder:
    module, _, cls = spec.embedder.partition(":")
    factory = getattr(importlib.import_module(module), cls)
    embedder: Embedder = factory(config)
    return embedder


@functools.lru_cache(maxsize=4)
def _local(config: EmbeddingConfig) -> Embedder:
    return _construct(provider_spec(config.provider), config)


def open_embedder(config: EmbeddingConfig | str | None = None) -> Embedder:
    """The embedder of kb.yaml's ``embedding:`` section (or a bare local model name).

    Local models are loaded once per process and shared; a remote endpoint gets a fresh
    client (its key is read from the environment now), which the caller may ``close()``.
    """
    cfg = embedding_config(config)
    spec = provider_spec(cfg.provider)
    return _construct(spec, cfg) if spec.remote else _local(cfg)
