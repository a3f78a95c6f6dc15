"""Rerank endpoints over HTTP: what every one shares (the client, the key, retries on
connection errors, 429 and 5xx, the checks of what comes back), and one class per API."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from corpus_pipeline.errors import ModelError
from corpus_pipeline.retrieval.rerank import RerankConfig
from corpus_pipeline.secrets import mask_error, secret_from_env


class HTTPReranker:
    """A rerank endpoint over HTTP; a subclass says its request body and where its scores are."""

    #: the key of each scored row's score in the answer
    score_key = "relevance_score"

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
        raise NotImplementedError

    def _rows(self, payload: Any) -> Any:
        """The list of ``{index, <score_key>}`` rows of an answer."""
        raise NotImplementedError

    def _parse(self, payload: Any, n: int) -> list[float]:
        rows = self._rows(payload)
        if not isinstance(rows, list):
            raise ModelError(f"rerank endpoint {self.config.url} answered without a list of scores")
        key = self.score_key
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


class CohereReranker(HTTPReranker):
    """Cohere's API, which Jina, vLLM's /v1/rerank, Infinity and LocalAI share:
    ``{model, query, documents, top_n}`` -> ``{results: [{index, relevance_score}]}``."""

    def _body(self, query: str, documents: Sequence[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"query": query, "documents": list(documents), "top_n": len(documents)}
        if self.config.model:
            body["model"] = self.config.model
        return body

    def _rows(self, payload: Any) -> Any:
        return (payload or {}).get("results") if isinstance(payload, dict) or payload is None else None


class TEIReranker(HTTPReranker):
    """text-embeddings-inference's ``/rerank``: ``{query, texts}`` -> ``[{index, score}]``."""

    score_key = "score"

    def _body(self, query: str, documents: Sequence[str]) -> dict[str, Any]:
        return {"query": query, "texts": list(documents), "truncate": True}

    def _rows(self, payload: Any) -> Any:
        return payload
