"""Embeddings from an endpoint: what every remote provider shares (``RemoteEmbedder``), and
any OpenAI-compatible ``/v1/embeddings`` endpoint (vLLM, TEI, Ollama, llama.cpp, LocalAI,
OpenAI) through the ``openai`` client (``OpenAIEmbedder``).

Texts go in batches of ``batch_size``, at most ``max_concurrency`` requests in flight; the
client retries (``max_retries``) and times out (``timeout_s``). What comes back is not
trusted: a reply with the wrong number of vectors, vectors of another size than the
others (or than ``dimensions``), or values that are not finite is an error naming the
endpoint, never a row in the index. Vectors are L2-normalised here (not every server
does). Every failure is a ``ModelError`` with keys masked. A provider implements
``_request`` (one batch's texts to its raw vectors, checked by ``_vectors``) and ``where``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from corpus_pipeline.embedding.models import model_folder, model_prefixes
from corpus_pipeline.embedding.settings import EmbeddingConfig
from corpus_pipeline.errors import ModelError
from corpus_pipeline.secrets import ERROR_LIMIT, mask_error, secret_from_env

ENV_BASE_URL = "OPENAI_BASE_URL"


class RemoteEmbedder:
    """What every embedding endpoint shares: prefixes, the key from the environment,
    batches and concurrency, checked and normalised vectors. Subclasses send one batch
    (``_request``) and say where they send it (``where``)."""

    def __init__(self, config: EmbeddingConfig, *, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        self.config = config
        self.base_url = config.base_url or env.get(ENV_BASE_URL) or None
        self.model_name = config.vector_key
        self.batch_size = config.batch_size
        folder = model_folder(config.tokenizer) if config.tokenizer and config.tokenizer != "estimate" else None
        self.query_prefix, self.passage_prefix = model_prefixes(
            config.model, folder, query=config.query_prefix, passage=config.passage_prefix
        )
        self._dimension = config.dimensions
        self._key = secret_from_env(config.api_key_env, env) or ""  # registered: masked in every message

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.config.model!r}, base_url={self.base_url!r})"

    @property
    def where(self) -> str:
        return f"embedding endpoint {self.base_url} (model {self.config.model!r})"

    def _request(self, texts: Sequence[str]) -> np.ndarray:
        raise NotImplementedError

    def close(self) -> None:
        """Close the client's connections."""

    @property
    def dimension(self) -> int:
        """The vector size: ``embedding.dimensions``, else asked of the endpoint once."""
        if self._dimension is None:
            self._dimension = int(self._request(["dimension probe"]).shape[1])
        return self._dimension

    def _mask(self, message: str, limit: int = ERROR_LIMIT) -> str:
        """``message`` without the key (whatever it looks like) or anything key-like, cut."""
        return mask_error(message, limit)

    def _vectors(self, rows: Any, n: int) -> np.ndarray:
        """``rows`` (one list of numbers per text, in order) checked and normalised."""
        if not isinstance(rows, list) or len(rows) != n:
            got = len(rows) if isinstance(rows, list) else type(rows).__name__
            raise ModelError(f"{self.where} returned {got} vectors for {n} texts")
        sizes = {len(r) if isinstance(r, list) else -1 for r in rows}
        if len(sizes) != 1 or -1 in sizes or 0 in sizes:
            raise ModelError(f"{self.where} returned vectors of sizes {sorted(sizes)}: not one list of numbers each")
        size = sizes.pop()
        want = self._dimension
        if want is not None and size != want:
            raise ModelError(
                f"{self.where} returned {size}-dimensional vectors, expected {want} "
                "(embedding.dimensions, or the size of the vectors it returned before)"
            )
        try:
            vecs = np.asarray(rows, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise ModelError(f"{self.where} returned vectors that are not numbers: {exc}") from exc
        norms = np.linalg.norm(vecs, axis=1)
        if not np.all(np.isfinite(vecs)) or not np.all(norms > 0) or not all(math.isfinite(x) for x in norms):
            raise ModelError(f"{self.where} returned vectors with NaN, infinite or all-zero values")
        return np.asarray(vecs / norms[:, None], dtype=np.float32)

    def _encode(self, texts: Sequence[str], prefix: str) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        batches = [[prefix + t for t in texts[i : i + self.batch_size]] for i in range(0, len(texts), self.batch_size)]
        workers = min(self.config.max_concurrency, len(batches))
        if workers <= 1:
            parts = [self._request(b) for b in batches]
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="embed") as pool:
                parts = list(pool.map(self._request, batches))
        sizes = {p.shape[1] for p in parts}
        if len(sizes) != 1:
            raise ModelError(f"{self.where} returned vectors of different sizes across batches: {sorted(sizes)}")
        self._dimension = self._dimension or sizes.pop()
        return np.concatenate(parts)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Passage vectors (what the index stores)."""
        return self._encode(texts, self.passage_prefix)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, self.query_prefix)


class OpenAIEmbedder(RemoteEmbedder):
    """An embedding model behind an OpenAI-compatible HTTP endpoint."""

    def __init__(self, config: EmbeddingConfig, *, env: Mapping[str, str] | None = None) -> None:
        from corpus_pipeline.llm.client import openai_client

        super().__init__(config, env=env)
        self._client = openai_client(self.base_url, self._key, config.timeout_s, config.max_retries)

    @property
    def where(self) -> str:
        return f"embedding endpoint {self.base_url or 'https://api.openai.com/v1'} (model {self.config.model!r})"

    def _request(self, texts: Sequence[str]) -> np.ndarray:
        from corpus_pipeline.llm.client import openai_call

        params: dict[str, Any] = {"encoding_format": "float"}
        if self.config.dimensions is not None:
            params["dimensions"] = self.config.dimensions

        def call() -> Any:
            # The raw response, its JSON read here: the client's typed parse of every float
            # costs ~6x the request itself (1.3 s for 2,048 vectors of 384 on 2 cores).
            raw = self._client.embeddings.with_raw_response.create(
                model=self.config.model, input=[t or " " for t in texts], **params
            )
            return json.loads(raw.http_response.content)

        body = openai_call(self.where, call)
        data = body.get("data") if isinstance(body, dict) else None
        if isinstance(data, list):
            data = _by_index(data, len(texts), self.where)
        return self._vectors(data, len(texts))

    def close(self) -> None:
        self._client.close()


def _by_index(data: list[Any], n: int, where: str) -> list[Any]:
    """The ``embedding`` of each item of an OpenAI reply, put in the order of its ``index``."""
    if len(data) != n:
        raise ModelError(f"{where} returned {len(data)} vectors for {n} texts")
    rows: list[Any] = [None] * n
    for pos, item in enumerate(data):
        item = item if isinstance(item, dict) else {}  # (no vector: refused by its size)
        index = item.get("index", pos)
        if not isinstance(index, int) or not 0 <= index < n or rows[index] is not None:
            raise ModelError(f"{where} returned a vector with a bad or repeated index {index!r}")
        rows[index] = item.get("embedding")
    return rows
