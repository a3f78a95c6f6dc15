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

A reranker's answer is untrusted: it must score every document it was sent exactly once,
with finite numbers, or it is a failure. Any failure (HTTP error, timeout, bad body) keeps
the fused order and is recorded in the result (``SearchResult.rerank``), never raised: a
search never fails because its reranker did.
"""

from __future__ import annotations

import functools
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import ConfigDict, Field, field_validator, model_validator

from corpus_pipeline.endpoints import KEY_ENV_PATTERN, EndpointKeys, check_url
from corpus_pipeline.errors import ModelError
from corpus_pipeline.secrets import mask_error, secret_from_env


class RerankConfig(EndpointKeys):
    """kb.yaml's ``rerank:`` section (see the module docstring). Not in the strategy version."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    url: str | None = Field(None, min_length=1, max_length=2000)
    api: Literal["cohere", "tei"] = "cohere"
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


class HTTPReranker:
    """A rerank endpoint over HTTP (TEI's API or Cohere's, which Jina and vLLM share)."""

    def __init__(self, config: RerankConfig, *, env: Mapping[str, str] | None = None) -> None:
        import httpx

        assert config.url is not None
        env = os.environ if env is None else env
        self.config = config
        self.name = config.model or config.url
        self._key = secret_from_env(config.api_key_env, env) or ""  # registered: masked in every message
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        self._client = httpx.Client(timeout=config.timeout_s, headers=headers)

    def close(self) -> None:
        self._client.close()

    def _mask(self, message: str) -> str:
        return mask_error(message, 300)

    def _body(self, query: str, documents: Sequence[str]) -> dict[str, Any]:
        if self.config.api == "tei":
            return {"query": query, "texts": list(documents), "truncate": True}
        body: dict[str, Any] = {"query": query, "documents": list(documents), "top_n": len(documents)}
        if self.config.model:
            body["model"] = self.config.model
        return body

    def _parse(self, payload: Any, n: int) -> list[float]:
        rows = payload if self.config.api == "tei" else (payload or {}).get("results")
        if not isinstance(rows, list):
            raise ModelError(f"rerank endpoint {self.config.url} answered without a list of scores")
        key = "score" if self.config.api == "tei" else "relevance_score"
        scores: list[float | None] = [None] * n
        for row in rows:
            index = row.get("index") if isinstance(row, dict) else None
            value = row.get(key) if isinstance(row, dict) else None
            if not isinstance(index, int) or not 0 <= index < n or scores[index] is not None:
                raise ModelError(f"rerank endpoint {self.config.url} answered a bad or repeated index {index!r}")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ModelError(f"rerank endpoint {self.config.url} answered a score that is not a number: {value!r}")
            scores[index] = float(value)
        if any(s is None for s in scores):
            raise ModelError(f"rerank endpoint {self.config.url} scored {sum(s is not None for s in scores)} of {n}")
        return [float(s) for s in scores if s is not None]

    def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        import httpx

        body = self._body(query, [d[: self.config.max_chars] for d in documents])
        error = ""
        for attempt in range(self.config.max_retries + 1):
            if attempt:
                time.sleep(min(2.0, 0.25 * 2**attempt))
            try:
                response = self._client.post(str(self.config.url), json=body)
            except httpx.HTTPError as exc:  # timeouts, refused connections
                error = f"{type(exc).__name__}: {self._mask(str(exc))}"
                continue
            if response.status_code >= 500 or response.status_code == 429:
                error = f"HTTP {response.status_code}: {self._mask(response.text)}"
                continue
            if response.status_code >= 400:
                raise ModelError(f"rerank endpoint {self.config.url} refused: HTTP {response.status_code}: "
                                 f"{self._mask(response.text)}")  # fmt: skip
            try:
                payload = response.json()
            except ValueError as exc:
                raise ModelError(f"rerank endpoint {self.config.url} answered something that is not JSON") from exc
            return self._parse(payload, len(documents))
        raise ModelError(f"rerank endpoint {self.config.url} failed: {error}")


class CrossEncoderReranker:
    """A local sentence-transformers CrossEncoder folder."""

    def __init__(self, config: RerankConfig) -> None:
        from pathlib import Path

        from corpus_pipeline.embedding.devices import resolve_device

        assert config.model is not None
        folder = Path(config.model).expanduser()
        if not folder.is_dir():
            raise ModelError(f"rerank.model = {config.model!r}: not a local CrossEncoder folder (or set rerank.url)")
        try:
            from sentence_transformers import CrossEncoder

            self._model = CrossEncoder(str(folder), device=resolve_device(config.device))
        except Exception as exc:
            raise ModelError(f"cannot load the CrossEncoder at {folder}: {exc}") from exc
        self.config = config
        self.name = config.model

    def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        pairs = [(query, d[: self.config.max_chars]) for d in documents]
        values = self._model.predict(pairs, show_progress_bar=False, convert_to_numpy=True)
        return [float(v) for v in values.reshape(len(documents), -1)[:, -1]]

    def close(self) -> None:
        pass


@functools.lru_cache(maxsize=2)
def _cross_encoder(config: RerankConfig) -> CrossEncoderReranker:
    return CrossEncoderReranker(config)


def open_reranker(config: RerankConfig | None) -> Reranker | None:
    """The reranker of kb.yaml's ``rerank:`` section; None when there is none."""
    if config is None or not config.configured:
        return None
    if config.url is not None:
        return HTTPReranker(config)
    return _cross_encoder(config)


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
