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


def _children(texts):
    import pyarrow as pa

    from corpus_pipeline.embedding.cache import text_hash

    return pa.table(
        {
            "chunk_id": [f"c{i}" for i in range(len(texts))],
            "text": texts,
            "text_hash": [text_hash(t) for t in texts],
        }
    )


def test_a_re_embed_takes_unchanged_vectors_from_the_previous_partition(tmp_path):
    """``embed_chunks`` with ``previous``: the chunks whose text has a vector there keep it
    (not asked of the cache or the model); the others are embedded over real HTTP; the
    table equals a run without ``previous`` row for row."""
    from support.openai_server import OpenAIServer, embeddings_handler

    from corpus_pipeline.embedding import EmbeddingConfig
    from corpus_pipeline.indexing import embed_chunks, texts_to_embed

    with OpenAIServer(handler=embeddings_handler(16)) as server:
        config = EmbeddingConfig(provider="openai", base_url=server.base_url, model="m", max_retries=0)
        first = embed_chunks(_children(["alpha", "beta", "gamma"]), config, cache=None).table
        asked = len(server.calls("/v1/embeddings"))
        edited = _children(["gamma", "delta", "alpha", "gamma"])
        assert texts_to_embed(edited, config, None, first) == ["delta"]
        again = embed_chunks(edited, config, cache=None, previous=first)
        sent = [r.body["input"] for r in server.calls("/v1/embeddings")[asked:]]
        assert sent == [["delta"]]
        assert (again.stats.embedded, again.stats.reused) == (1, 3)
        whole = embed_chunks(edited, config, cache=None).table
    assert again.table.equals(whole)
    by_hash = dict(zip(first["text_hash"].to_pylist(), first["vector"].to_pylist(), strict=True))
    assert again.table["vector"].to_pylist()[2] == by_hash[edited["text_hash"][2].as_py()]


def test_batch_vectors_handed_to_the_merge_are_the_vectors_and_are_cached(tmp_path, monkeypatch):
    """What a fanned-out embed does: each batch's vectors as one Arrow table
    (``batch_vectors``), looked up by text hash without a copy per vector
    (``VectorsByHash``); the merge takes them, writes them to the cache (a few rows at a
    time) and embeds nothing itself."""
    from corpus_pipeline.embedding import cache as cache_mod
    from corpus_pipeline.embedding.cache import text_hash
    from corpus_pipeline.indexing.embed import VectorsByHash, batch_vectors

    monkeypatch.setattr(cache_mod, "PUT_ROWS", 2)
    texts = ["a", "bb", "ccc", "dddd", "bb"]
    model = CountingEmbedder()
    parts = [batch_vectors([text_hash(t) for t in b], model.embed(b)) for b in (["a", "bb"], ["ccc", "dddd"])]
    fresh = VectorsByHash([*parts, batch_vectors([], np.zeros((0, 0), dtype=np.float32))])
    assert len(fresh) == 4 and text_hash("ccc") in fresh and fresh[text_hash("dddd")].tolist() == [4, 1, 0]
    cache = EmbeddingCache(tmp_path / "e.sqlite")

    def must_not_load():
        raise AssertionError("the merge embedded a text a batch had embedded")

    vecs, embedded, reused = embed_with_cache(texts, must_not_load, cache, model_name="counting", known=fresh)
    assert vecs.tolist() == [[len(t), 1, 0] for t in texts] and (embedded, reused) == (4, 1)
    hashes = [text_hash(t) for t in [*texts, "new"]]
    assert cache.has_many("counting", hashes) == {text_hash(t) for t in texts}
    assert cache.get_many("counting", hashes)[text_hash("ccc")].tolist() == [3, 1, 0]
