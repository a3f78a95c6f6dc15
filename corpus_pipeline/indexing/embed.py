"""Stage 5, embed: one vector per child chunk (the ``chunk_embeddings`` asset); text this
model embedded before (any KB, any version, any run) comes from the vector cache."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from corpus_pipeline.embedding import EmbeddingCache, EmbeddingConfig, embed_with_cache, open_embedder
from corpus_pipeline.embedding.cache import Embedder, text_hash
from corpus_pipeline.indexing.stats import EmbedStats, StageResult
from corpus_pipeline.progress import ProgressFn
from corpus_pipeline.store import schemas

PROGRESS_STEPS = 20  # at most this many progress reports (and model calls) per embed


class _Reporting:
    """An ``Embedder`` that embeds passages in at most ``PROGRESS_STEPS`` slices, telling
    ``progress`` after each; a slice is a whole number of the model's batches (times its
    concurrent requests, for an endpoint), so no batch is sent short but the last."""

    def __init__(self, inner: Embedder, config: EmbeddingConfig, progress: ProgressFn) -> None:
        self.inner, self.progress = inner, progress
        self.batch = config.batch_size * (config.max_concurrency if config.remote else 1)

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        n = len(texts)
        step = self.batch * max(1, math.ceil(n / PROGRESS_STEPS / self.batch))
        if n <= step:
            out = self.inner.embed(texts)
            self.progress("embed", n, n, "chunks")
            return out
        parts = []
        for i in range(0, n, step):
            parts.append(self.inner.embed(texts[i : i + step]))
            self.progress("embed", min(i + step, n), n, "chunks")
        return np.concatenate(parts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.embed_queries(texts)

    def close(self) -> None:
        closer = getattr(self.inner, "close", None)
        if callable(closer):
            closer()


def texts_to_embed(children: pa.Table, config: EmbeddingConfig, cache: EmbeddingCache | None) -> list[str]:
    """The distinct texts of ``children`` this model has no cached vector for (first-seen
    order): the work of a run's embed, which the ``chunk_embeddings`` asset splits into
    batches (``embed_batch``)."""
    texts = [str(t) for t in children.column("text").to_pylist()]
    hashes = [str(h) for h in children.column("text_hash").to_pylist()]
    found = cache.get_many(config.vector_key, hashes) if cache else {}
    first = dict(zip(hashes, texts, strict=True))
    return [first[h] for h in first if h not in found]


def embed_batch(
    texts: Sequence[str], config: EmbeddingConfig, *, progress: ProgressFn | None = None
) -> dict[str, np.ndarray]:
    """Passage vectors of one batch of ``texts_to_embed``, by text hash (the model is
    opened here, and closed)."""
    if not texts:
        return {}
    embedder = open_embedder(config)
    try:
        model: Embedder = embedder if progress is None else _Reporting(embedder, config, progress)
        vecs = model.embed(list(texts))
    finally:
        closer = getattr(embedder, "close", None)
        if callable(closer):
            closer()
    return {text_hash(t): v for t, v in zip(texts, vecs, strict=True)}


def embed_chunks(
    children: pa.Table,
    config: EmbeddingConfig,
    *,
    cache: EmbeddingCache | None,
    progress: ProgressFn | None = None,
    fresh: Mapping[str, np.ndarray] | None = None,
) -> StageResult:
    """One passage vector per child; ``model`` is the name the vectors are cached under.
    ``fresh``: the vectors the run's batches computed (``embed_batch``), by text hash;
    whatever is in neither ``fresh`` nor the cache is embedded here, ``progress`` told
    as it goes (``embed``, done, total, ``chunks``)."""
    texts = [str(t) for t in children.column("text").to_pylist()]
    model = config.vector_key

    def opener() -> Embedder:
        embedder = open_embedder(config)
        return embedder if progress is None else _Reporting(embedder, config, progress)

    vecs, embedded, reused = embed_with_cache(texts, opener, cache, model_name=model, known=fresh)
    dim = int(vecs.shape[1])
    flat = pa.array(vecs.reshape(-1), type=pa.float32())
    table = pa.table(
        {
            "chunk_id": children.column("chunk_id").combine_chunks(),
            "model": pa.array([model] * len(texts), pa.string()),
            "text_hash": children.column("text_hash").combine_chunks(),
            "vector": pa.FixedSizeListArray.from_arrays(flat, dim),
        },
        schema=schemas.embeddings_schema(dim),
    )
    return StageResult(table, EmbedStats(model=model, embedded=embedded, reused=reused, dimension=dim))


def vectors_of(embeddings: pa.Table) -> np.ndarray:
    """The vectors of an embeddings table as a float32 matrix, in row order."""
    col: Any = embeddings.column("vector").combine_chunks()
    dim = col.type.list_size
    return np.asarray(col.flatten().to_numpy(zero_copy_only=False), dtype=np.float32).reshape(-1, dim)
