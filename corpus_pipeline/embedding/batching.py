"""Query embeddings of concurrent searches, batched: one forward pass for every query waiting.

A server answers searches of one KB in parallel, but one model runs one forward pass at a
time (and a Hugging Face tokenizer must not be called from two threads at once). So the
searches' queries meet here: the thread that gets the model embeds every query waiting at
that moment in one batch (what the others asked for is answered with it); the others wait
for their vector, or for the model if theirs was not taken. No timer: while one batch runs,
the next one gathers by itself, so a lone query pays nothing and sixteen concurrent ones
pay a few forward passes instead of sixteen.

    vec = query_batcher(embedder).embed("how do I roll back?")
"""

from __future__ import annotations

import threading
import weakref
from concurrent.futures import Future
from typing import Any

import numpy as np

from corpus_pipeline.embedding.base import Embedder

#: At most this many queries in one forward pass.
MAX_BATCH = 32


class QueryBatcher:
    """The query embeddings of one embedder, batched across threads (module docstring)."""

    def __init__(self, embedder: Embedder, max_batch: int = MAX_BATCH) -> None:
        self.embedder = embedder
        self.max_batch = max_batch
        self._pending: list[tuple[str, Future[np.ndarray]]] = []
        self._pending_lock = threading.Lock()
        self._model = threading.Lock()
        #: (batches run, queries embedded): how much batching there was
        self.batches = 0
        self.queries = 0

    def embed(self, query: str) -> np.ndarray:
        """``query``'s vector (the embedder's ``embed_queries``), in a batch with whatever
        other threads asked for meanwhile."""
        mine: Future[np.ndarray] = Future()
        with self._pending_lock:
            self._pending.append((query, mine))
        while not mine.done():
            if self._model.acquire(timeout=0.05):
                try:
                    self._run_batch()
                finally:
                    self._model.release()
        return mine.result()

    def _run_batch(self) -> None:
        with self._pending_lock:
            batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch :]
        if not batch:
            return
        try:
            vectors = np.asarray(self.embedder.embed_queries([q for q, _ in batch]), dtype=np.float32)
            if len(vectors) != len(batch):
                raise ValueError(f"the embedder answered {len(vectors)} vectors for {len(batch)} queries")
        except BaseException as exc:  # noqa: BLE001 - each waiting search gets the error
            for _, future in batch:
                future.set_exception(exc)
            return
        self.batches += 1
        self.queries += len(batch)
        for (_, future), vector in zip(batch, vectors, strict=True):
            future.set_result(vector)


_batchers: weakref.WeakKeyDictionary[Any, QueryBatcher] = weakref.WeakKeyDictionary()
_batchers_lock = threading.Lock()


def query_batcher(embedder: Embedder) -> QueryBatcher:
    """The one batcher of ``embedder`` (shared by every searcher that uses it: a local model
    is loaded once per process and shared by the KBs that name it)."""
    with _batchers_lock:
        batcher = _batchers.get(embedder)
        if batcher is None:
            batcher = QueryBatcher(embedder)
            _batchers[embedder] = batcher
        return batcher
