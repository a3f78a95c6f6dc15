"""Query embeddings of concurrent searches are batched (``embedding.batching``): each
caller gets its own query's vector, fewer forward passes run than queries, one forward pass
at a time, and a failure reaches every search of its batch."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np
import pytest

from corpus_pipeline.embedding.batching import QueryBatcher, query_batcher


class SlowEmbedder:
    """One forward pass at a time (it checks), 20 ms each; a query's vector is its length."""

    model_name = "slow"
    dimension = 2

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.passes: list[int] = []
        self._busy = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        raise AssertionError("queries only")

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        assert self._busy.acquire(blocking=False), "two forward passes at once"
        try:
            time.sleep(0.02)
            self.passes.append(len(texts))
            if self.fail:
                raise RuntimeError("model down")
            return np.asarray([[len(t), 1.0] for t in texts], dtype=np.float32)
        finally:
            self._busy.release()


def _concurrently(batcher: QueryBatcher, queries: list[str]) -> list[object]:
    out: list[object] = [None] * len(queries)
    start = threading.Barrier(len(queries))

    def ask(i: int) -> None:
        start.wait()
        try:
            out[i] = batcher.embed(queries[i])
        except Exception as exc:
            out[i] = exc

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(queries))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return out


def test_concurrent_queries_are_batched_and_each_gets_its_own_vector() -> None:
    model = SlowEmbedder()
    batcher = QueryBatcher(model)
    queries = ["q" * (i + 1) for i in range(16)]
    vectors = _concurrently(batcher, queries)
    assert [float(np.asarray(v)[0]) for v in vectors] == [float(len(q)) for q in queries]
    assert sum(model.passes) == 16 and len(model.passes) < 16  # (batched: fewer passes than queries)
    assert batcher.queries == 16 and batcher.batches == len(model.passes)


def test_a_lone_query_is_one_pass_and_a_failure_reaches_every_search_of_its_batch() -> None:
    model = SlowEmbedder()
    assert float(QueryBatcher(model).embed("abc")[0]) == 3.0 and model.passes == [1]
    down = QueryBatcher(SlowEmbedder(fail=True))
    results = _concurrently(down, ["a", "bb", "ccc", "dddd"])
    assert all(isinstance(r, RuntimeError) and "model down" in str(r) for r in results)


def test_one_batcher_per_embedder() -> None:
    a, b = SlowEmbedder(), SlowEmbedder()
    assert query_batcher(a) is query_batcher(a) and query_batcher(a) is not query_batcher(b)


@pytest.mark.parametrize("n", [1, 33])
def test_at_most_max_batch_queries_in_one_pass(n: int) -> None:
    model = SlowEmbedder()
    vectors = _concurrently(QueryBatcher(model, max_batch=8), ["x" * (i + 1) for i in range(n)])
    assert len(vectors) == n and max(model.passes) <= 8
