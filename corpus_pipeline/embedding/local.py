"""Local sentence-transformers models: a packaged model, a folder, or a cached hub model.

Nothing is downloaded unless the hub is allowed (see ``embedding.models``). The device is
``embedding.device``: ``auto`` takes CUDA when torch sees a GPU, then Apple's MPS, then
the CPU. Passages and queries get the model's prefixes (``models.model_prefixes``).
``embedding.backend: onnx | onnx-int8`` runs the transformer in ONNX Runtime instead of torch
(``embedding.onnx_backend``); everything else is the same sentence-transformers pipeline.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from corpus_pipeline.embedding.devices import resolve_device
from corpus_pipeline.embedding.models import model_prefixes, require_model_folder
from corpus_pipeline.embedding.settings import EmbeddingConfig
from corpus_pipeline.errors import ModelError


def _offline_defaults() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


class SentenceTransformerEmbedder:
    """A local sentence-transformers model; vectors are L2-normalised float32."""

    def __init__(self, config: EmbeddingConfig) -> None:
        folder = require_model_folder(config.model)
        _offline_defaults()
        self.backend = config.backend
        try:
            if config.backend == "torch":
                from sentence_transformers import SentenceTransformer

                self.device = resolve_device(config.device)
                self._model = SentenceTransformer(str(folder), device=self.device)
            else:
                from corpus_pipeline.embedding.onnx_backend import onnx_sentence_transformer, session_providers

                self._model = onnx_sentence_transformer(
                    folder, device=config.device, int8=config.backend == "onnx-int8"
                )
                self.device = ",".join(session_providers(self._model))
        except ModelError:
            raise
        except Exception as exc:
            raise ModelError(f"cannot load embedding model {config.model!r} from {folder}: {exc}") from exc
        self.config = config
        self.query_prefix, self.passage_prefix = model_prefixes(
            config.model, folder, query=config.query_prefix, passage=config.passage_prefix
        )
        self.model_name = config.vector_key
        self.batch_size = config.batch_size
        get_dim = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        dim = get_dim()
        if dim is None:
            raise ModelError(f"embedding model {config.model!r} at {folder} does not say its vector dimension")
        self.dimension = int(dim)

    def _encode(self, texts: Sequence[str], prefix: str) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vecs = self._model.encode(
            [prefix + t for t in texts],
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vecs, dtype=np.float32)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Passage vectors (what the index stores)."""
        return self._encode(texts, self.passage_prefix)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, self.query_prefix)

    def close(self) -> None:
        pass
