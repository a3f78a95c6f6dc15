"""A local sentence-transformers CrossEncoder folder as the reranker (loaded once per process)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence

from corpus_pipeline.errors import ModelError
from corpus_pipeline.retrieval.rerank import RerankConfig


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
        self._lock = threading.Lock()

    def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        pairs = [(query, d[: self.config.max_chars]) for d in documents]
        with self._lock:  # (one forward pass at a time: its tokenizer must not run in two threads)
            values = self._model.predict(pairs, show_progress_bar=False, convert_to_numpy=True)
        return [float(v) for v in values.reshape(len(documents), -1)[:, -1]]

    def close(self) -> None:
        pass


@functools.lru_cache(maxsize=2)
def cross_encoder(config: RerankConfig) -> CrossEncoderReranker:
    """The CrossEncoder of ``config``, shared by every KB that names the same folder."""
    return CrossEncoderReranker(config)
