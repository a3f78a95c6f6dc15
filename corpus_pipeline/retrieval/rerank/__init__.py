"""Rerank (seed 003 §6, the last stage): candidate parents re-scored against the question.

kb.yaml's ``rerank:`` section; unset, there is no rerank stage.

    rerank:                                   # an HTTP rerank endpoint
      url: http://127.0.0.1:8080/rerank       # the endpoint itself
      api: tei                                # tei: {query, texts} -> [{index, score}]
                                              # cohere (default): {model, query, documents, top_n}
                                              #   -> {results: [{index, relevance_score}]}
                                              #   (Cohere, Jina, vLLM /v1/rerank, Infinity, LocalAI)
      model: BAAI/bge-reranker-v2-m3
      api_key_env: RERANK_API_KEY             # the variable holding the key, if any
      timeout_s: 30
      max_retries: 1

    rerank:                                   # a local sentence-transformers CrossEncoder folder
      model: /models/bge-reranker-base

Each provider is one module with one row in ``rerank.providers`` (``cohere`` and ``tei`` over
HTTP: ``rerank.http``; a local ``cross-encoder``: ``rerank.local``).

A reranker's answer is untrusted: it must score every document it was sent exactly once,
with finite numbers, or it is a failure. Any failure (HTTP error, timeout, bad body) keeps
the fused order and is recorded in the result (``SearchResult.rerank``), never raised: a
search never fails because its reranker did.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import ConfigDict, Field, field_validator, model_validator

from corpus_pipeline.endpoints import KEY_ENV_PATTERN, EndpointKeys, check_url
from corpus_pipeline.errors import ModelError
from corpus_pipeline.secrets import mask_error


class RerankConfig(EndpointKeys):
    """kb.yaml's ``rerank:`` section (see the module docstring). Not in the strategy version."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    url: str | None = Field(None, min_length=1, max_length=2000)
    api: str = Field("cohere", max_length=40)  # the HTTP provider: a remote row of ``rerank.providers``
    model: str | None = Field(None, min_length=1, max_length=500)
    api_key_env: str = Field("RERANK_API_KEY", pattern=KEY_ENV_PATTERN)  # (endpoints: other defaults)
    timeout_s: float = Field(30, gt=0, le=600)
    max_retries: int = Field(1, ge=0, le=10)
    max_chars: int = Field(2000, ge=50, le=100_000)  # each document is cut to this before sending
    device: str = Field("auto", pattern=r"^(auto|cpu|mps|cuda(:\d{1,2})?)$")

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return check_url(value, "rerank.url")

    @field_validator("api")
    @classmethod
    def _known_api(cls, value: str) -> str:
        from corpus_pipeline.retrieval.rerank.providers import remote_names

        if value not in remote_names():
            raise ValueError(f"rerank.api = {value!r} is not a rerank API; use one of: {', '.join(remote_names())}")
        return value

    @model_validator(mode="after")
    def _what(self) -> RerankConfig:
        written = [
            f for f, info in type(self).model_fields.items() if f != "enabled" and getattr(self, f) != info.default
        ]
        if self.url is None and self.model is None and self.enabled and written:
            raise ValueError("set url (an HTTP rerank endpoint) or model (a local CrossEncoder folder)")
        return self

    @property
    def configured(self) -> bool:
        return self.enabled and (self.url is not None or self.model is not None)


class Reranker(Protocol):
    name: str

    def scores(self, query: str, documents: Sequence[str]) -> list[float]: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class RerankOutcome:
    """What the rerank stage did: ``reranked`` or ``failed`` (the fused order kept)."""

    model: str
    status: str
    documents: int
    ms: float
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "status": self.status, "documents": self.documents, "ms": round(self.ms, 1)} | (
            {"error": self.error} if self.error else {}
        )


def open_reranker(config: RerankConfig | None) -> Reranker | None:
    """The reranker of kb.yaml's ``rerank:`` section (its provider's class:
    ``rerank.providers``); None when there is none."""
    from corpus_pipeline.retrieval.rerank.providers import LOCAL, PROVIDERS

    if config is None or not config.configured:
        return None
    row = PROVIDERS[config.api if config.url is not None else LOCAL]
    module, _, name = row.opens.partition(":")
    factory: Any = getattr(importlib.import_module(module), name)
    reranker: Reranker = factory(config)
    return reranker


def rerank_order(
    reranker: Reranker, query: str, documents: Sequence[str]
) -> tuple[list[int], list[float] | None, RerankOutcome]:
    """The new order of ``documents`` (indices, best first) and their scores; on any failure
    the given order and None, with the failure in the outcome."""
    t0 = time.perf_counter()
    try:
        scores = reranker.scores(query, documents)
        if len(scores) != len(documents):
            raise ModelError(f"the reranker scored {len(scores)} of {len(documents)} documents")
    except Exception as exc:  # noqa: BLE001 - any failure falls back to the fused order
        ms = (time.perf_counter() - t0) * 1e3
        message = str(exc) if isinstance(exc, ModelError) else f"{type(exc).__name__}: {mask_error(str(exc), 300)}"
        return list(range(len(documents))), None, RerankOutcome(reranker.name, "failed", len(documents), ms, message)
    order = sorted(range(len(documents)), key=lambda i: (-scores[i], i))
    ms = (time.perf_counter() - t0) * 1e3
    return order, scores, RerankOutcome(reranker.name, "reranked", len(documents), ms)
