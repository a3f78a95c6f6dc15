"""Stage 5, embed: one vector per child chunk (the ``chunk_embeddings`` asset); text this
model embedded before (any KB, any version, any run) comes from the vector cache."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from corpus_pipeline.embedding import EmbeddingCache, EmbeddingConfig, embed_with_cache, open_embedder
from corpus_pipeline.embedding.cache import Embedder, text_hash
from corpus_pipeline.errors import StoreError
from corpus_pipeline.indexing import rows
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


def previous_vectors(previous: pa.Table | None, model: str) -> pa.Table | None:
    """The ``text_hash`` and ``vector`` of this partition's previous embeddings made by
    ``model`` (its ``vector_key``), or None: what a re-run takes its unchanged chunks'
    vectors from, as Arrow, before it asks the cache."""
    if previous is None or previous.num_rows == 0 or "model" not in previous.column_names:
        return None
    prev = rows.where_equal(previous, "model", model).select(["text_hash", "vector"])
    return prev if prev.num_rows else None


def _not_in(children: pa.Table, prev: pa.Table | None) -> pa.Table:
    """The rows of ``children`` whose text has no vector in ``prev``."""
    if prev is None:
        return children
    found: Any = pc.is_in(children.column("text_hash"), value_set=prev.column("text_hash").combine_chunks())
    return children.filter(pc.invert(found))


def texts_to_embed(
    children: pa.Table, config: EmbeddingConfig, cache: EmbeddingCache | None, previous: pa.Table | None = None
) -> list[str]:
    """The distinct texts of ``children`` this model has no vector for, neither in this
    partition's ``previous`` embeddings nor in the cache (first-seen order): the work of a
    run's embed, which the ``chunk_embeddings`` asset splits into batches (``embed_batch``)."""
    need = _not_in(children, previous_vectors(previous, config.vector_key))
    texts = rows.strings(need, "text")
    hashes = rows.strings(need, "text_hash")
    found = cache.has_many(config.vector_key, hashes) if cache else set()
    first = dict(zip(hashes, texts, strict=True))
    return [first[h] for h in first if h not in found]


def embed_batch(texts: Sequence[str], config: EmbeddingConfig, *, progress: ProgressFn | None = None) -> pa.Table:
    """Passage vectors of one batch of ``texts_to_embed``: a table of ``text_hash`` and
    ``vector`` (Arrow, what the batch step hands to the merge; the model is opened here,
    and closed)."""
    if not texts:
        return batch_vectors([], np.zeros((0, 0), dtype=np.float32))
    embedder = open_embedder(config)
    try:
        model: Embedder = embedder if progress is None else _Reporting(embedder, config, progress)
        vecs = model.embed(list(texts))
    finally:
        closer = getattr(embedder, "close", None)
        if callable(closer):
            closer()
    return batch_vectors([text_hash(t) for t in texts], vecs)


def batch_vectors(hashes: Sequence[str], vecs: np.ndarray) -> pa.Table:
    """``embed_batch``'s table: ``text_hash`` and ``vector`` (fixed-size float32 lists)."""
    vecs = np.ascontiguousarray(vecs, dtype=np.float32)
    dim = int(vecs.shape[1]) if vecs.ndim == 2 and vecs.shape[1] else 1  # (an empty batch: any size)
    vector = pa.FixedSizeListArray.from_arrays(pa.array(vecs.reshape(-1), type=pa.float32()), dim)
    return pa.table({"text_hash": pa.array(list(hashes), pa.string()), "vector": vector})


class VectorsByHash(Mapping[str, np.ndarray]):
    """The batches' vectors (``embed_batch`` tables) by text hash, as rows of one array
    (no vector is copied into an object of its own)."""

    def __init__(self, tables: Sequence[pa.Table]) -> None:
        parts = [t for t in tables if t.num_rows]
        self._at: dict[str, int] = {}
        if not parts:
            self._vecs = np.zeros((0, 0), dtype=np.float32)
            return
        table = pa.concat_tables(parts)
        self._vecs = vectors_of(table)
        self._at = {h: i for i, h in enumerate(rows.strings(table, "text_hash"))}

    def __getitem__(self, h: str) -> np.ndarray:
        row: np.ndarray = self._vecs[self._at[h]]
        return row

    def __contains__(self, h: object) -> bool:
        return h in self._at

    def __iter__(self) -> Any:
        return iter(self._at)

    def __len__(self) -> int:
        return len(self._at)


def embed_chunks(
    children: pa.Table,
    config: EmbeddingConfig,
    *,
    cache: EmbeddingCache | None,
    progress: ProgressFn | None = None,
    fresh: Mapping[str, np.ndarray] | None = None,
    previous: pa.Table | None = None,
) -> StageResult:
    """One passage vector per child, cached under the model's ``vector_key``.

    A chunk whose text has a vector in this partition's ``previous`` embeddings keeps it
    (taken as Arrow, no row turned into Python); the others come from ``fresh`` (the
    vectors the run's batches computed, ``embed_batch``, by text hash), else the cache,
    else are embedded here, ``progress`` told as it goes (``embed``, done, total,
    ``chunks``)."""
    model = config.vector_key
    prev = previous_vectors(previous, model)
    need = _not_in(children, prev)

    def opener() -> Embedder:
        embedder = open_embedder(config)
        return embedder if progress is None else _Reporting(embedder, config, progress)

    texts = rows.strings(need, "text")
    if prev is not None and not texts:
        vecs, embedded = np.zeros((0, prev.column("vector").type.list_size), dtype=np.float32), 0
    else:
        vecs, embedded, _ = embed_with_cache(texts, opener, cache, model_name=model, known=fresh)
    dim = int(vecs.shape[1])
    new = pa.FixedSizeListArray.from_arrays(pa.array(vecs.reshape(-1), type=pa.float32()), dim)
    if prev is None or need.num_rows == children.num_rows:
        vector: Any = new
    elif prev.column("vector").type.list_size != dim:
        raise StoreError(
            f"the previous vectors of model {model!r} have {prev.column('vector').type.list_size} dimensions, "
            f"its new ones {dim}: the model changed under the same name; give it a new name in kb.yaml"
        )
    else:
        # Each row's place in [previous vectors ++ new vectors]: a hit its previous row,
        # a miss the next new vector (new vectors are in ``need``'s order, the table's).
        at: Any = pc.index_in(children.column("text_hash"), value_set=prev.column("text_hash").combine_chunks())
        miss = np.asarray(pc.is_null(at).to_numpy(zero_copy_only=False), dtype=bool)
        place = np.asarray(pc.fill_null(at, 0).to_numpy(zero_copy_only=False), dtype=np.int64)
        place[miss] = prev.num_rows + np.arange(int(miss.sum()), dtype=np.int64)
        both: Any = pa.concat_arrays([prev.column("vector").combine_chunks().cast(new.type), new])
        vector = both.take(pa.array(place))
    table = pa.table(
        {
            "chunk_id": children.column("chunk_id").combine_chunks(),
            "model": pa.array([model] * children.num_rows, pa.string()),
            "text_hash": children.column("text_hash").combine_chunks(),
            "vector": vector,
        },
        schema=schemas.embeddings_schema(dim),
    )
    stats = EmbedStats(model=model, embedded=embedded, reused=children.num_rows - embedded, dimension=dim)
    return StageResult(table, stats)


def vectors_of(embeddings: pa.Table) -> np.ndarray:
    """The vectors of an embeddings table as a float32 matrix, in row order."""
    col: Any = embeddings.column("vector").combine_chunks()
    dim = col.type.list_size
    return np.asarray(col.flatten().to_numpy(zero_copy_only=False), dtype=np.float32).reshape(-1, dim)
