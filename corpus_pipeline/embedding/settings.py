"""``embedding:`` in kb.yaml: which model embeds a KB, where it runs, how it reads text.

    embedding:
      provider: sentence-transformers   # or openai (any OpenAI-compatible /v1/embeddings)
      model: multilingual-e5-small      # a packaged model, a local folder, or a hub name
      device: auto                      # auto (CUDA, then Apple MPS, then CPU) | cpu | cuda | cuda:1 | mps
      batch_size: 32
      backend: torch                    # torch | onnx (ONNX Runtime, exported locally once) | onnx-int8
      # query_prefix / passage_prefix: the model's own when unset (e5: "query: " / "passage: ")
      # max_tokens: the model's input window, special tokens and the passage prefix included
      # tokenizer: what counts tokens for a remote model: a local model folder, a tokenizer.json,
      #            a packaged model's name, or "estimate" (see embedding.tokens.EstimateTokenCounter)

    embedding:                           # a remote model (providers: ``embedding.providers``)
      provider: openai                   # or tei (text-embeddings-inference's /embed)
      base_url: http://gpu-box:8000/v1   # unset: $OPENAI_BASE_URL, then api.openai.com
      api_key_env: EMBEDDING_API_KEY     # the variable that holds the key (never the key itself)
      model: BAAI/bge-m3
      dimensions: 1024                   # sent to endpoints that shorten vectors (text-embedding-3)
      max_concurrency: 4                 # requests in flight
      timeout_s: 60
      max_retries: 2

What shapes the chunks and vectors (provider, model, dimensions, passage prefix, window and
tokenizer) enters the strategy version (``version_input``); batch size, device, endpoint,
concurrency and the query prefix do not: the same index serves any of them.

``backend`` (local models only): ``onnx`` runs the same model in ONNX Runtime (exported from
the local folder once, see ``embedding.onnx_backend``); its vectors are the torch ones to
float rounding (cosine > 0.9999 in ``tests/embedding/test_onnx.py``; 1.00000 for e5-small in
benchmarks/embedders), so it shares their cache key and strategy version. ``onnx-int8`` (weights quantized to 8 bit, per output
channel) changes vectors (cosine ~0.995): it has its own cache key and enters the strategy version.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from corpus_pipeline.embedding.providers import provider_spec
from corpus_pipeline.endpoints import ConcurrentEndpoint

DEFAULT_PROVIDER = "sentence-transformers"
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
ESTIMATE = "estimate"

Backend = Literal["torch", "onnx", "onnx-int8"]
DEFAULT_BACKEND: Backend = "torch"
#: Backends whose vectors differ from torch's beyond float rounding, by the name of their
#: vectors (their own cache key and strategy version): onnx-int8's weights are quantized per
#: output channel ("-pc"; per-tensor int8 of earlier releases gave other vectors, cosine 0.983
#: to torch's against 0.995 on COVID-QA passages).
DISTINCT_VECTORS: dict[str, str] = {"onnx-int8": "onnx-int8-pc"}


class EmbeddingConfig(ConcurrentEndpoint):
    """kb.yaml's ``embedding:`` section, validated (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: str = Field("sentence-transformers", max_length=64)
    model: str = Field("multilingual-e5-small", min_length=1, max_length=500)
    batch_size: int = Field(32, ge=1, le=2048)
    device: str = Field("auto", pattern=r"^(auto|cpu|mps|cuda(:\d{1,2})?)$")
    query_prefix: str | None = Field(None, max_length=500)
    passage_prefix: str | None = Field(None, max_length=500)
    max_tokens: int | None = Field(None, ge=16, le=131_072)
    tokenizer: str | None = Field(None, min_length=1, max_length=1000)
    dimensions: int | None = Field(None, ge=1, le=65_536)
    backend: Backend = DEFAULT_BACKEND

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, value: str) -> str:
        provider_spec(value)
        return value

    @model_validator(mode="after")
    def _fits_the_provider(self) -> EmbeddingConfig:
        spec = provider_spec(self.provider)
        if spec.remote and self.backend != DEFAULT_BACKEND:
            raise ValueError(
                f"embedding.backend = {self.backend!r} runs a local model; with embedding.provider: "
                f"{self.provider} the endpoint embeds (leave backend unset)"
            )
        if spec.needs_base_url and not self.base_url:
            raise ValueError(f"embedding.provider: {self.provider} needs embedding.base_url (the server's address)")
        if self.dimensions is not None and spec.remote and not spec.takes_dimensions:
            raise ValueError(
                f"embedding.dimensions is not taken by embedding.provider: {self.provider} "
                "(its vectors have the model's own size: leave dimensions unset)"
            )
        return self

    @property
    def remote(self) -> bool:
        """Whether an endpoint embeds (the provider's row in ``embedding.providers``)."""
        return provider_spec(self.provider).remote

    @property
    def vector_key(self) -> str:
        """The name this model's vectors are cached under: what makes vectors differ
        (provider, model, dimensions, passage prefix, an int8 backend), so another model never
        reuses one.
        A local model with its own prefixes is its bare name (the key of the vectors cached
        before providers existed)."""
        key = self.model if not self.remote else f"{self.provider}:{self.model}"
        if self.dimensions is not None:
            key += f"@{self.dimensions}"
        if self.passage_prefix is not None:
            key += f"|{self.passage_prefix}"
        if self.backend in DISTINCT_VECTORS:
            key += f"#{DISTINCT_VECTORS[self.backend]}"
        return key

    def version_input(self) -> dict[str, Any]:
        """What of this section shapes chunks (token counts) and vectors, beyond the model's
        name (always in the version as ``embedding_model``); {} for a local model with its
        own prefixes, window and tokenizer, so such versions keep their names."""
        keys = ("passage_prefix", "max_tokens", "tokenizer", "dimensions")
        out: dict[str, Any] = {k: getattr(self, k) for k in keys if getattr(self, k) is not None}
        if self.provider != DEFAULT_PROVIDER:
            out["provider"] = self.provider
        if self.backend in DISTINCT_VECTORS:
            out["backend"] = DISTINCT_VECTORS[self.backend]
        return out


def embedding_config(value: EmbeddingConfig | str | None = None) -> EmbeddingConfig:
    """An ``EmbeddingConfig`` from a config, a bare model name (local), or None (defaults)."""
    if value is None:
        return EmbeddingConfig()
    if isinstance(value, str):
        return EmbeddingConfig(model=value)
    return value
