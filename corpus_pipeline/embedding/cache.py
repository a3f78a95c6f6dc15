"""The vector cache: vectors by (model, text hash) in one SQLite file under the warehouse,
so unchanged text is never embedded twice, across partitions, strategy versions and runs.

    embed_with_cache(texts, embedder_or_factory, cache)   vectors in order, (embedded, reused)
    CachedEmbedder(...)                                    an Embedder that asks the cache first
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np

from corpus_pipeline.embedding.base import Embedder
from corpus_pipeline.embedding.settings import EmbeddingConfig

#: Vectors turned into SQLite rows at a time by ``put_many``.
PUT_ROWS = 4096


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    """Vectors by (model, sha256 of text) in one SQLite file; safe across processes."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._local = threading.local()
        with self._conn() as c:
            c.execute(
                "CREATE TABLE IF NOT EXISTS vectors (model TEXT, text_hash TEXT, dim INTEGER, vec BLOB, "
                "PRIMARY KEY (model, text_hash))"
            )

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=60)
            conn.execute("PRAGMA journal_mode=WAL")
            self._local.conn = conn
        return conn

    def get_many(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        conn = self._conn()
        uniq = list(dict.fromkeys(hashes))
        for i in range(0, len(uniq), 500):
            part = uniq[i : i + 500]
            q = f"SELECT text_hash, vec FROM vectors WHERE model = ? AND text_hash IN ({','.join('?' * len(part))})"
            for h, blob in conn.execute(q, [model, *part]):
                out[h] = np.frombuffer(blob, dtype=np.float32)
        return out

    def has_many(self, model: str, hashes: Sequence[str]) -> set[str]:
        """Which of ``hashes`` have a vector of ``model`` (their vectors are not read)."""
        out: set[str] = set()
        conn = self._conn()
        uniq = list(dict.fromkeys(hashes))
        for i in range(0, len(uniq), 500):
            part = uniq[i : i + 500]
            q = f"SELECT text_hash FROM vectors WHERE model = ? AND text_hash IN ({','.join('?' * len(part))})"
            out.update(h for (h,) in conn.execute(q, [model, *part]))
        return out

    def put_many(self, model: str, items: Mapping[str, np.ndarray]) -> None:
        """Store ``items`` (one transaction), ``PUT_ROWS`` rows' bytes built at a time."""
        conn = self._conn()
        keys = list(items)
        with conn:
            for i in range(0, len(keys), PUT_ROWS):
                conn.executemany(
                    "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?)",
                    [
                        (model, h, int(items[h].shape[0]), np.asarray(items[h], dtype=np.float32).tobytes())
                        for h in keys[i : i + PUT_ROWS]
                    ],
                )


def embed_with_cache(
    texts: Sequence[str],
    embedder: Embedder | Callable[[], Embedder],
    cache: EmbeddingCache | None,
    *,
    model_name: str | None = None,
) -> tuple[np.ndarray, int, int]:
    """Vectors for ``texts`` in order; returns ``(vectors, embedded, reused)``.

    ``embedder`` may be a zero-argument factory (with ``model_name``): the model is then
    loaded only when some text is missing from the cache, so a re-run whose texts were all
    embedded before never pays the model's import and load.
    """
    ready: Embedder | None = None if callable(embedder) and not hasattr(embedder, "embed") else cast(Embedder, embedder)
    name = ready.model_name if ready is not None else model_name
    if name is None:
        raise ValueError("embed_with_cache: a lazy embedder needs model_name")
    hashes = [text_hash(t) for t in texts]
    found = cache.get_many(name, hashes) if cache else {}
    missing = [h for h in dict.fromkeys(hashes) if h not in found]
    dim = next(iter(found.values())).shape[0] if found else 0
    if missing or not hashes:
        model = ready if ready is not None else cast(Callable[[], Embedder], embedder)()
        try:
            if missing:
                first = {h: t for t, h in zip(texts, hashes, strict=True)}
                vectors = model.embed([first[h] for h in missing])
                dim = int(vectors.shape[1])
                fresh = dict(zip(missing, vectors, strict=True))
                if cache:
                    cache.put_many(name, fresh)
                found.update(fresh)
            else:
                dim = model.dimension
        finally:
            closer = getattr(model, "close", None)
            if ready is None and callable(closer):  # opened here (an endpoint's client): closed here
                closer()
    vecs = np.stack([found[h] for h in hashes]) if hashes else np.zeros((0, dim), dtype=np.float32)
    embedded = len(missing)
    return vecs.astype(np.float32, copy=False), embedded, len(texts) - embedded


class CachedEmbedder:
    """An ``Embedder`` that answers from the vector cache first and opens the model only on
    a miss: what SEMANTIC (embedding breakpoints) uses in preview and in the index, so a
    sentence embedded once is never embedded again, like the chunk embeddings."""

    def __init__(self, config: EmbeddingConfig, *, cache: EmbeddingCache | None = None) -> None:
        self.config = config
        self.model_name = config.vector_key
        self.cache = cache
        self.embedded = 0  # texts the model embedded through this object
        self.reused = 0  # texts answered from the cache

    def _load(self) -> Embedder:
        from corpus_pipeline.embedding.opening import open_embedder

        return open_embedder(self.config)

    def _once(self, use: Callable[[Embedder], Any]) -> Any:
        model = self._load()
        try:
            return use(model)
        finally:
            closer = getattr(model, "close", None)
            if callable(closer):
                closer()

    @property
    def dimension(self) -> int:
        return int(self._once(lambda m: m.dimension))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        vecs, embedded, reused = embed_with_cache(texts, self._load, self.cache, model_name=self.model_name)
        self.embedded += embedded
        self.reused += reused
        return vecs

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return cast(np.ndarray, self._once(lambda m: m.embed_queries(texts)))
