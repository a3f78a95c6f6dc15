"""The embedding cache: unchanged text is never embedded twice, and a fully cached run
never even loads the model."""

from __future__ import annotations

import numpy as np

from corpus_pipeline.embedding import EmbeddingCache, embed_with_cache


class CountingEmbedder:
    """A deterministic stand-in model: a vector from the text's length, and a call count."""

    model_name = "counting"
    dimension = 3

    def __init__(self) -> None:
        self.embedded: list[str] = []

    def embed(self, texts):
        self.embedded.extend(texts)
        return np.array([[len(t), 1.0, 0.0] for t in texts], dtype=np.float32)


def test_only_texts_never_seen_are_embedded(tmp_path):
    cache = EmbeddingCache(tmp_path / "e.sqlite")
    model = CountingEmbedder()
    vecs, embedded, reused = embed_with_cache(["a", "bb", "a"], model, cache)
    assert (embedded, reused) == (2, 1) and model.embedded == ["a", "bb"]
    assert vecs.tolist() == [[1, 1, 0], [2, 1, 0], [1, 1, 0]]
    vecs, embedded, reused = embed_with_cache(["bb", "ccc"], model, cache)
    assert (embedded, reused) == (1, 1) and model.embedded[-1] == "ccc"


def test_a_fully_cached_run_never_loads_the_model(tmp_path):
    cache = EmbeddingCache(tmp_path / "e.sqlite")
    embed_with_cache(["x", "yy"], CountingEmbedder(), cache)

    def must_not_load():
        raise AssertionError("the model was loaded although every vector was cached")

    vecs, embedded, reused = embed_with_cache(["yy", "x"], must_not_load, cache, model_name="counting")
    assert (embedded, reused, vecs.shape) == (0, 2, (2, 3))
