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


def test_the_merge_takes_previous_then_batch_then_cached_vectors_and_embeds_only_the_rest(tmp_path, monkeypatch):
    """What a fanned-out embed's merge does (``embed_chunks`` with ``previous`` and
    ``fresh``): each chunk's vector from this partition's previous embeddings, else from
    the batches' tables (``batch_vectors``, looked up by text hash, each read when its turn
    comes: a function that reads it, or the table), else
    the cache, else the model over real HTTP; the batches' vectors are cached (a few rows at
    a time); the table equals one embed of everything."""
    import pytest
    from support.openai_server import OpenAIServer, embeddings_handler

    from corpus_pipeline.embedding import EmbeddingConfig
    from corpus_pipeline.embedding import cache as cache_mod
    from corpus_pipeline.embedding.cache import text_hash
    from corpus_pipeline.errors import StoreError
    from corpus_pipeline.indexing import embed_batch, embed_chunks
    from corpus_pipeline.indexing.embed import batch_vectors

    monkeypatch.setattr(cache_mod, "PUT_ROWS", 2)
    cache = EmbeddingCache(tmp_path / "e.sqlite")
    with OpenAIServer(handler=embeddings_handler(16)) as server:
        config = EmbeddingConfig(provider="openai", base_url=server.base_url, model="m", max_retries=0)
        previous = embed_chunks(_children(["alpha", "beta"]), config, cache=None).table
        embed_chunks(_children(["epsilon"]), config, cache=cache)  # (in the cache)
        parts = [embed_batch(b, config) for b in (["gamma"], ["delta", "eta"])]
        read = []

        def staged(table):  # (a batch on disk: read when the merge asks)
            return lambda: read.append(table.num_rows) or table

        fresh = [staged(parts[0]), parts[1], staged(batch_vectors([], np.zeros((0, 0), dtype=np.float32)))]
        asked = len(server.calls("/v1/embeddings"))
        texts = ["gamma", "alpha", "epsilon", "zeta", "delta", "gamma", "beta"]
        merged = embed_chunks(_children(texts), config, cache=cache, fresh=fresh, previous=previous)
        sent = [r.body["input"] for r in server.calls("/v1/embeddings")[asked:]]
        whole = embed_chunks(_children(texts), config, cache=None).table
    assert sent == [["zeta"]]
    assert read == [1, 0]  # (each staged batch read once)
    assert (merged.stats.embedded, merged.stats.reused) == (3, 4)  # gamma, delta (batches), zeta
    assert merged.table.equals(whole)
    all_hashes = [text_hash(t) for t in [*texts, "eta", "alpha"]]
    assert cache.has_many(config.vector_key, all_hashes) == {
        text_hash(t) for t in ["gamma", "delta", "eta", "epsilon", "zeta"]
    }
    # A batch whose vectors have another size than the partition's previous ones: refused.
    other = [batch_vectors([text_hash("zeta")], np.ones((1, 8), dtype=np.float32))]
    with pytest.raises(StoreError, match="16 dimensions, its new ones 8"):
        embed_chunks(_children(["alpha", "zeta"]), config, cache=None, fresh=other, previous=previous)


def test_the_merge_reads_of_a_partition_dataset_only_keys_and_the_texts_it_embeds(tmp_path):
    """``embed_chunks`` over the ``child_chunks`` partition's dataset (what ``embed_merge``
    is handed): the same table as over the table in memory, the texts of the rows it must
    embed read by row number across the partition's files."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from support.openai_server import OpenAIServer, embeddings_handler

    from corpus_pipeline.embedding import EmbeddingConfig
    from corpus_pipeline.indexing import chunk_keys, embed_chunks, texts_to_embed
    from corpus_pipeline.store.parquet import dataset, write_partition

    texts = ["alpha", "beta", "gamma", "alpha", "delta", "epsilon"]
    children = _children(texts).append_column("doc_id", pa.array([f"d{i}" for i in range(len(texts))]))
    folder = tmp_path / "child_chunks"
    files = write_partition(folder, children, docs_per_file=1)
    assert len(files) > 1  # (rows spread over several files)
    ds = dataset(folder)
    assert chunk_keys(ds).equals(children.select(["chunk_id", "text_hash"]))
    with OpenAIServer(handler=embeddings_handler(16)) as server:
        config = EmbeddingConfig(provider="openai", base_url=server.base_url, model="m", max_retries=0)
        previous = embed_chunks(_children(["beta", "gamma"]), config, cache=None).table
        asked = len(server.calls("/v1/embeddings"))
        streamed = embed_chunks(ds, config, cache=None, previous=previous)
        sent = [r.body["input"] for r in server.calls("/v1/embeddings")[asked:]]
        in_memory = embed_chunks(children, config, cache=None, previous=previous)
        wider = embed_chunks(_children([*(f"w{i}" for i in range(60)), "beta", "gamma"]), config, cache=None).table
        prev_folder = tmp_path / "chunk_embeddings"
        prev_files = write_partition(prev_folder, wider, docs_per_file=1)
        assert len(prev_files) > 1
        prev_ds = dataset(prev_folder)
        assert texts_to_embed(children, config, None, prev_ds) == texts_to_embed(children, config, None, previous)
        asked = len(server.calls("/v1/embeddings"))
        from_files = embed_chunks(ds, config, cache=None, previous=prev_ds)
        assert len(server.calls("/v1/embeddings")) == asked + 1  # (alpha, delta, epsilon again: no cache)
        # An unreadable file of the previous output: its chunks are embedded again, not lost.
        lost = prev_files[-1]
        lost_texts = [
            h for h in pq.read_table(lost)["text_hash"].to_pylist() if h in set(children["text_hash"].to_pylist())
        ]
        lost.write_bytes(b"not parquet")
        lost_plan = texts_to_embed(children, config, None, dataset(prev_folder))  # (the plan skips it too)
        damaged = embed_chunks(ds, config, cache=None, previous=dataset(prev_folder))
    assert sent == [["alpha", "delta", "epsilon"]]  # (rows 0, 4, 5: read from their files)
    assert streamed.table.equals(in_memory.table)
    assert (streamed.stats.embedded, streamed.stats.reused) == (3, 3)
    assert from_files.table.equals(in_memory.table) and from_files.stats.embedded == 3
    assert damaged.table.equals(in_memory.table) and damaged.stats.embedded == 3 + len(set(lost_texts))
    assert len(lost_plan) == 3 + len(set(lost_texts))


def test_embeddings_streamed_from_a_spill_file_are_the_table_made_in_memory(tmp_path):
    """What ``embed_merge`` does (``embed_vectors`` with ``spill``, rows handed on a slice at
    a time): the same rows as ``embed_chunks``' one table, from previous vectors, a batch and
    the model; the spill file leaves nothing behind."""
    import pyarrow as pa
    from support.openai_server import OpenAIServer, embeddings_handler

    from corpus_pipeline.embedding import EmbeddingConfig
    from corpus_pipeline.indexing import embed_batch, embed_chunks, embed_vectors

    texts = [f"text {i}" for i in range(23)]
    spill = tmp_path / "spill"
    with OpenAIServer(handler=embeddings_handler(16)) as server:
        config = EmbeddingConfig(provider="openai", base_url=server.base_url, model="m", max_retries=0)
        previous = embed_chunks(_children(texts[:9]), config, cache=None).table
        fresh = [embed_batch(texts[9:15], config)]
        whole = embed_chunks(_children(texts), config, cache=None, previous=previous, fresh=fresh)
        with embed_vectors(_children(texts), config, cache=None, previous=previous, fresh=fresh, spill=spill) as out:
            assert len(list(spill.iterdir())) == 0  # (the spill file is unlinked from the start)
            parts = list(out.slices(rows=5))
            stats, fingerprint = out.stats, out.fingerprint()
    assert [t.num_rows for t, _ in parts] == [5, 5, 5, 5, 3]
    streamed = pa.concat_tables([t for t, _ in parts])
    assert streamed.equals(whole.table)
    assert pa.concat_tables([k for _, k in parts]).equals(_children(texts).select(["chunk_id", "text_hash"]))
    assert (stats.embedded, stats.reused) == (whole.stats.embedded, whole.stats.reused) == (14, 9)
    from corpus_pipeline.indexing import table_fingerprint

    assert fingerprint == table_fingerprint(whole.table, ["chunk_id", "text_hash", "model"])


def _peak_rss_reset() -> bool:
    """Reset this process's peak resident size (``VmHWM``; Linux): False where it cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def test_a_spilled_output_holds_one_source_in_memory_not_every_vector(tmp_path):
    """Filling a 250 MB spilled matrix a source at a time, each source's rows scattered over
    the whole matrix (what repeated texts do: one batch's text is the text of chunks all over
    the KB), raises the process's peak resident memory by about a source, not by the
    matrix: the rows go through file writes, not a memory map (whose pages, mapped in large
    folios, counted megabytes per scattered row: ~600 MB at 50,000 documents). Read back,
    every row is the last one put there."""
    import pytest

    from corpus_pipeline.indexing.embed import _Matrix

    if not _peak_rss_reset():
        pytest.skip("needs Linux's /proc/self/clear_refs to measure the peak")
    rows, dim, source = 170_000, 384, 20_000
    rng = np.random.default_rng(0)
    order = rng.permutation(rows)
    order[-1] = order[0]  # (one row put twice, by two sources: the later wins)
    m = _Matrix(rows, dim, tmp_path)
    try:
        _peak_rss_reset()
        before = _status_kb("VmRSS")
        for start in range(0, rows, source):
            dest = order[start : start + source]
            # (a source's values as a broadcast view: what is measured is the put, not them)
            m.put(dest, np.broadcast_to(dest[:, None].astype(np.float32) + start, (dest.size, dim)))
        grown = (_status_kb("VmHWM") - before) * 1024
        got = np.concatenate([m.get(s, min(s + 32_768, rows))[:, 0] for s in range(0, rows, 32_768)])
    finally:
        m.close()
    # (a memory map, its pages handed back after each source, grew 85 MB here; the file writes 2)
    assert grown < 24 * 2**20, f"the peak resident memory grew {grown / 2**20:.0f} MB filling a spilled matrix"
    expected = np.zeros(rows, dtype=np.float32)  # (the row no source put: the file's zeros)
    for start in range(0, rows, source):
        dest = order[start : start + source]
        expected[dest] = dest + start
    assert np.array_equal(got, expected)


def test_a_spilled_matrix_reads_back_what_an_in_memory_one_holds(tmp_path):
    """``put`` and ``get`` of a spilled matrix are those of the in-memory one: runs,
    single rows, repeats within one put, and slices across them."""
    from corpus_pipeline.indexing.embed import _Matrix

    rows, dim = 1_000, 8
    spilled, held = _Matrix(rows, dim, tmp_path), _Matrix(rows, dim, None)
    assert spilled.spilled and not held.spilled
    rng = np.random.default_rng(1)
    puts = [np.arange(rows), np.array([5, 6, 7, 900, 3, 4]), np.array([10, 10, 11]), rng.choice(rows, 300)]
    try:
        for dest in puts:
            values = rng.standard_normal((dest.size, dim)).astype(np.float32)
            spilled.put(dest, values)
            held.put(dest, values)
        for start, end in [(0, rows), (3, 12), (899, 901), (rows - 1, rows)]:
            assert np.array_equal(spilled.get(start, end), held.get(start, end))
    finally:
        spilled.close()
