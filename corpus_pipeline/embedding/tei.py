"""Embeddings from Hugging Face text-embeddings-inference's native API (``provider: tei``).

    embedding:
      provider: tei
      base_url: http://tei:8080          # the server (required; ``/embed`` is appended)
      model: BAAI/bge-m3                 # the model the server runs (names the vectors)
      api_key_env: TEI_API_KEY           # only if the server was started with --api-key

``POST <base_url>/embed`` with ``{"inputs": [...], "truncate": true, "normalize": true}``
answers a JSON list of vectors, one per input, in order. The server truncates what exceeds
its model's window (the chunks are already cut to the window, ``embedding.tokens``). What
comes back is checked as every endpoint's is (``RemoteEmbedder._vectors``), and a reply is
read up to ``MAX_REPLY_BYTES``: a server that sends more is an error, not a full memory.
Retried (``max_retries``, with a growing pause) on connection errors, timeouts, 429 and 5xx;
any other status is an error with the server's message, the key masked.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import numpy as np

from corpus_pipeline.embedding.remote import RemoteEmbedder
from corpus_pipeline.embedding.settings import EmbeddingConfig
from corpus_pipeline.errors import ModelError

#: The most bytes one reply may have: 2,048 vectors of 4,096 floats as JSON text is ~170 MB.
MAX_REPLY_BYTES = 256 * 1024 * 1024
_RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})


class TEIEmbedder(RemoteEmbedder):
    """An embedding model served by text-embeddings-inference (``POST /embed``)."""

    def __init__(self, config: EmbeddingConfig, *, env: Mapping[str, str] | None = None) -> None:
        super().__init__(config, env=env)
        if not self.base_url:
            raise ModelError("embedding.provider: tei needs embedding.base_url (the server's address)")
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        self.url = self.base_url.rstrip("/") + "/embed"
        self._client = httpx.Client(timeout=config.timeout_s, headers=headers, follow_redirects=False)

    @property
    def where(self) -> str:
        return f"embedding endpoint {self.url} (tei, model {self.config.model!r})"

    def _request(self, texts: Sequence[str]) -> np.ndarray:
        body = {"inputs": [t or " " for t in texts], "truncate": True, "normalize": True}
        last = ""
        for attempt in range(self.config.max_retries + 1):
            if attempt:
                time.sleep(min(0.5 * 2 ** (attempt - 1), 8.0))
            try:
                status, raw = self._post(body)
            except httpx.HTTPError as exc:  # connection refused, timeouts, a cut reply
                last = f"{type(exc).__name__}: {self._mask(str(exc))}"
                continue
            if status == 200:
                return self._vectors(self._parse(raw), len(texts))
            last = f"HTTP {status}: {self._mask(_message(raw), 300)}"
            if status not in _RETRY_STATUS:
                break
        raise ModelError(f"{self.where} failed: {last}")

    def _post(self, body: dict[str, Any]) -> tuple[int, bytes]:
        """The status and the reply's bytes, read up to ``MAX_REPLY_BYTES``."""
        with self._client.stream("POST", self.url, json=body) as r:
            declared = r.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > MAX_REPLY_BYTES:
                raise ModelError(f"{self.where} sent a reply of {declared} bytes (more than {MAX_REPLY_BYTES})")
            chunks: list[bytes] = []
            size = 0
            for chunk in r.iter_bytes():
                size += len(chunk)
                if size > MAX_REPLY_BYTES:
                    raise ModelError(f"{self.where} sent a reply of more than {MAX_REPLY_BYTES} bytes")
                chunks.append(chunk)
            return r.status_code, b"".join(chunks)

    def _parse(self, raw: bytes) -> Any:
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise ModelError(f"{self.where} returned a reply that is not JSON: {self._mask(str(exc), 200)}") from None

    def close(self) -> None:
        self._client.close()


def _message(raw: bytes) -> str:
    """The server's error message (``{"error": ..., "error_type": ...}``), else its text."""
    try:
        data = json.loads(raw)
    except ValueError:
        return raw[:300].decode("utf-8", "replace")
    if isinstance(data, dict) and "error" in data:
        return f"{data.get('error_type') or 'error'}: {data['error']}"
    return raw[:300].decode("utf-8", "replace")
