"""The embedding providers: one row each here, one module each for its embedder.

    provider               remote  module                            what it talks to
    sentence-transformers  no      embedding.local                   a model on this machine
    openai                 yes     embedding.remote.OpenAIEmbedder   any OpenAI-compatible /v1/embeddings
    tei                    yes     embedding.tei.TEIEmbedder         Hugging Face text-embeddings-inference's /embed

A remote provider's vectors are cached under ``<provider>:<model>`` (``EmbeddingConfig.
vector_key``) and its name enters the strategy version (``version_input``): two providers
serving a model of the same name never share vectors. The row is all the rest of the
product reads (validation, ``remote``, the cache key); the module is imported only when a
KB's embedder is opened, so ``corpus preview`` loads none of them.

Adding a provider: one module with a class taking an ``EmbeddingConfig`` (the remote ones
subclass ``embedding.remote.RemoteEmbedder`` and implement ``_request``: batching,
concurrency, validation of what comes back and normalisation are shared), one row here,
and its test against a local HTTP server (``tests/embedding/test_tei.py`` is the model).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProviderSpec:
    """One embedding provider: its name in kb.yaml, whether it is an endpoint, and its class
    (``module:Class``, imported when a KB's embedder is opened: ``embedding.opening``)."""

    name: str
    remote: bool
    embedder: str
    #: Whether it needs ``embedding.base_url`` (no public default endpoint).
    needs_base_url: bool = False
    #: Whether the endpoint takes ``embedding.dimensions`` (shortened vectors).
    takes_dimensions: bool = False


PROVIDERS: dict[str, ProviderSpec] = {
    p.name: p
    for p in (
        ProviderSpec("sentence-transformers", False, "corpus_pipeline.embedding.local:SentenceTransformerEmbedder"),
        ProviderSpec("openai", True, "corpus_pipeline.embedding.remote:OpenAIEmbedder", takes_dimensions=True),
        ProviderSpec("tei", True, "corpus_pipeline.embedding.tei:TEIEmbedder", needs_base_url=True),
    )
}


def provider_spec(name: str) -> ProviderSpec:
    """The provider called ``name`` (a ``ValueError`` naming the known ones otherwise)."""
    spec = PROVIDERS.get(name)
    if spec is None:
        raise ValueError(f"embedding.provider = {name!r} is not a provider; use one of: {', '.join(PROVIDERS)}")
    return spec
