"""The embedding plan streams its partition (``indexing.EmbedPlan``): it reads the text
hashes to find what to embed, then the texts a batch at a time from the files that hold
them, and what it hands out is the distinct unembedded texts in first-seen order, cut as
``batches.split`` would cut the whole list."""

from __future__ import annotations

import pyarrow as pa
import pytest

from corpus_pipeline.embedding import EmbeddingCache, EmbeddingConfig
from corpus_pipeline.embedding.cache import text_hash
from corpus_pipeline.errors import StoreError
from corpus_pipeline.indexing import EmbedPlan, batches, texts_to_embed
from corpus_pipeline.indexing import embed as embed_mod
from corpus_pipeline.store.parquet import dataset, write_partition

CONFIG = EmbeddingConfig(provider="openai", base_url="http://127.0.0.1:9/v1", model="m", max_retries=0)


def _children(texts: list[str]) -> pa.Table:
    return pa.table(
        {
            "chunk_id": [f"c{i}" for i in range(len(texts))],
            "doc_id": [f"d{i // 3}" for i in range(len(texts))],
            "text": texts,
            "text_hash": [text_hash(t) for t in texts],
        }
    )


def _previous(texts: list[str]) -> pa.Table:
    return pa.table(
        {
            "model": [CONFIG.vector_key] * len(texts),
            "text_hash": [text_hash(t) for t in texts],
            "vector": pa.array([[0.0, 1.0]] * len(texts), pa.list_(pa.float32(), 2)),
        }
    )


def _expected(texts: list[str], known: set[str]) -> list[str]:
    """What the plan must hand out, said plainly: each text once, first-seen order, unless known."""
    return [t for t in dict.fromkeys(texts) if t not in known]


# 70 chunks: repeats near and far, some texts known to the previous output or the cache.
TEXTS = [f"t{i % 37}" if i % 5 else f"t{(i * 7) % 23}" for i in range(70)]
OLD = ["t3", "t11", "t30"]
CACHED = ["t5", "t12"]


@pytest.mark.parametrize("docs_per_file", [1, 4, 100])
@pytest.mark.parametrize("workers", [1, 3, 8])
def test_batches_are_the_whole_list_cut_as_split_cuts_it(tmp_path, docs_per_file, workers):
    folder = tmp_path / "child_chunks"
    write_partition(folder, _children(TEXTS), docs_per_file=docs_per_file)
    cache = EmbeddingCache(tmp_path / "e.sqlite")
    cache.put_many(CONFIG.vector_key, {text_hash(t): pa.array([1.0, 0.0]).to_numpy() for t in CACHED})
    rule = batches.BatchRule(min_size=2, max_size=9)
    want = _expected(TEXTS, set(OLD) | set(CACHED))

    for children in (dataset(folder), _children(TEXTS)):
        plan = EmbedPlan.of(children, CONFIG, cache, _previous(OLD))
        assert (plan.count, plan.rows) == (len(want), len(TEXTS))
        sizes = batches.sizes(plan.count, workers, rule)
        got = list(plan.batches(sizes))
        assert got == batches.split(want, workers, rule)
        assert [len(b) for b in got] == sizes
    assert texts_to_embed(dataset(folder), CONFIG, cache, _previous(OLD)) == want


def test_a_batch_is_read_when_asked_for_and_only_from_its_files(tmp_path, monkeypatch):
    """The texts are read a batch at a time as the batches are asked for, not all before the
    first; and an edit's plan reads the files of the edited document's chunks only."""
    texts = [f"x{i}" for i in range(64)]
    folder = tmp_path / "child_chunks"
    files = write_partition(folder, _children(texts), docs_per_file=2)  # (6 chunks a file)
    read: list[int] = []
    real = embed_mod.rows.take_at

    def counting(ds, spans, columns, at):
        out = real(ds, spans, columns, at)
        read.append(out.num_rows)
        return out

    monkeypatch.setattr(embed_mod.rows, "take_at", counting)
    plan = EmbedPlan.of(dataset(folder), CONFIG, None)
    out = plan.batches([16, 16, 16, 16])
    assert next(out) == texts[:16] and read == [16]
    assert list(out) == [texts[16:32], texts[32:48], texts[48:]] and read == [16] * 4

    edited = [*texts[:30], "new text", *texts[31:]]
    other = tmp_path / "edited"
    write_partition(other, _children(edited), docs_per_file=2)
    opened: list[int] = []

    def files_read(ds, spans, columns, at):
        opened.append(sum(1 for start, end in spans if ((at >= start) & (at < end)).any()))
        return real(ds, spans, columns, at)

    monkeypatch.setattr(embed_mod.rows, "take_at", files_read)
    edit = EmbedPlan.of(dataset(other), CONFIG, None, _previous(texts))
    assert list(edit.batches([1])) == [["new text"]] and opened == [1] and len(files) > 5


def test_nothing_to_embed_gives_no_batch(tmp_path):
    plan = EmbedPlan.of(_children(["a", "b", "a"]), CONFIG, None, _previous(["a", "b"]))
    assert plan.count == 0 and batches.sizes(0, 4, batches.EMBED) == []
    assert list(plan.batches([])) == [] and texts_to_embed(_children(["a"]), CONFIG, None, _previous(["a"])) == []


def test_sizes_that_do_not_cut_the_work_are_refused():
    plan = EmbedPlan.of(_children(["a", "b", "c"]), CONFIG, None)
    with pytest.raises(ValueError, match=r"do not cut the 3 text"):
        list(plan.batches([2, 2]))
    with pytest.raises(ValueError, match=r"do not cut"):
        list(plan.batches([3, 0]))


def test_children_that_changed_under_the_plan_are_refused(tmp_path):
    """The plan holds the rows of the texts it found; if they hold other texts when they are
    read (the partition replaced in between), refused, named."""
    plan = EmbedPlan.of(_children(["a", "b", "c"]), CONFIG, None)
    moved = EmbedPlan(_children(["b", "a", "c"]), plan.hashes, plan.at)
    with pytest.raises(StoreError, match="child_chunks changed while the embedding plan read it"):
        list(moved.batches([3]))
    gone = EmbedPlan(_children(["a", "b"]), plan.hashes, plan.at)
    with pytest.raises(StoreError, match="changed while"):
        list(gone.batches([3]))
    folder = tmp_path / "child_chunks"
    write_partition(folder, _children(["a", "b"]), docs_per_file=1)
    with pytest.raises(StoreError, match="changed while"):
        list(EmbedPlan(dataset(folder), plan.hashes, plan.at).batches([3]))


@pytest.mark.parametrize("items", [0, 1, 255, 256, 4097, 100_000])
@pytest.mark.parametrize("workers", [1, 2, 16])
def test_sizes_are_splits_lengths(items, workers):
    sizes = batches.sizes(items, workers, batches.EMBED)
    assert sizes == [len(b) for b in batches.split(list(range(items)), workers, batches.EMBED)]
    assert sum(sizes) == items and len(sizes) == batches.batch_count(items, workers, batches.EMBED)
