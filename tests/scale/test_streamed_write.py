"""The search table is written from the ``child_chunks`` and ``chunk_embeddings``
partitions' Parquet files a slice at a time (``indexing.publish.PartitionInput``, what the
``search_index`` asset hands it): the same table, rows, hashes and metadata as from the
same chunks and vectors in memory, created or merged."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pytest

from corpus_pipeline.errors import StoreError
from corpus_pipeline.indexing.publish import PartitionInput, search_input, write_search_index
from corpus_pipeline.store import lance as store_lance
from corpus_pipeline.store.lance import TableInput, open_search_table, write_search_input, write_search_table
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.parquet import dataset, iter_slices, write_partition
from tests.scale.test_table_writes import DOCS, PER_DOC, _chunks

SLICE = 37  # not a divisor of anything here: slices straddle the files of both partitions


@pytest.fixture(autouse=True)
def small_slices(monkeypatch):
    monkeypatch.setattr(store_lance.rows, "PY_SLICE_ROWS", SLICE)
    monkeypatch.setattr(store_lance.rows, "FRAGMENT_ROWS", 50)


def _partitions(folder: Path, chunks: pa.Table, vecs: np.ndarray) -> tuple[pads.Dataset, pads.Dataset]:
    """The two partitions as the pipeline writes them: children in files of whole documents,
    vectors in files cut by chunk id (so their boundaries differ)."""
    emb = pa.table(
        {
            "chunk_id": chunks.column("chunk_id"),
            "model": pa.array(["m"] * len(chunks)),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vecs.reshape(-1)), vecs.shape[1]),
        }
    )
    write_partition(folder / "children", chunks, docs_per_file=3)
    write_partition(folder / "embeddings", emb, docs_per_file=1)
    return dataset(folder / "children"), dataset(folder / "embeddings")


def _meta(table: pa.Table) -> dict[bytes, bytes]:
    """A table's schema metadata but the names of the files it was read from (memory has none)."""
    return {k: v for k, v in (table.schema.metadata or {}).items() if k != store_lance.SOURCES_KEY}


def _table(layout: Layout) -> pa.Table:
    table = open_search_table(layout, "big", "v1").to_arrow()
    return table.sort_by("chunk_id")


def test_slices_of_two_partitions_cut_differently_line_up(tmp_path):
    chunks, vecs = _chunks()
    children, embeddings = _partitions(tmp_path, chunks, vecs)
    assert len(children.files) > 1 and len(embeddings.files) > 1 and len(children.files) != len(embeddings.files)
    a = list(iter_slices(children, ["chunk_id", "doc_id"], SLICE))
    b = list(iter_slices(embeddings, ["chunk_id"], SLICE))
    assert [len(t) for t in a] == [len(t) for t in b] == [SLICE] * (len(chunks) // SLICE) + [len(chunks) % SLICE]
    assert all(x.column("chunk_id").equals(y.column("chunk_id")) for x, y in zip(a, b, strict=True))
    assert pa.concat_tables(a).column("chunk_id").equals(chunks.column("chunk_id"))


def test_a_table_written_from_the_partitions_equals_one_written_from_memory(tmp_path):
    chunks, vecs = _chunks()
    children, embeddings = _partitions(tmp_path, chunks, vecs)
    source = search_input("big", "v1", children, embeddings)
    assert isinstance(source, PartitionInput)  # streamed, not read whole
    assert max(len(c) for c, _v in source.slices()) == SLICE
    streamed, memory = Layout(tmp_path / "streamed"), Layout(tmp_path / "memory")
    a = write_search_index(streamed, "big", "v1", children, embeddings)
    b = write_search_table(memory, "big", "v1", chunks, vecs)
    assert (a.mode, a.rows, a.docs_changed) == (b.mode, b.rows, b.docs_changed) == ("create", DOCS * PER_DOC, DOCS)
    ta, tb = _table(streamed), _table(memory)
    assert ta.equals(tb) and _meta(ta) == _meta(tb)
    stored = store_lance.vector_mean(ta)
    assert stored is not None and np.allclose(stored, vecs.astype(np.float64).mean(axis=0), atol=1e-6)


def test_an_edit_streamed_from_the_partitions_merges_only_that_document(tmp_path):
    layout, memory = Layout(tmp_path / "streamed"), Layout(tmp_path / "memory")
    chunks, vecs = _chunks()
    write_search_index(layout, "big", "v1", *_partitions(tmp_path / "p1", chunks, vecs))
    edited, evecs = _chunks(edits={7: "changed"}, drop={30})
    write = write_search_index(layout, "big", "v1", *_partitions(tmp_path / "p2", edited, evecs))
    assert (write.mode, write.docs_changed, write.rows_written, write.rows_deleted) == (
        "merge",
        2,
        PER_DOC,
        2 * PER_DOC,
    )
    write_search_table(memory, "big", "v1", edited, evecs)
    ta, tb = _table(layout), _table(memory)
    assert ta.equals(tb) and _meta(ta) == _meta(tb)
    again = write_search_index(layout, "big", "v1", *_partitions(tmp_path / "p3", edited, evecs))
    assert again.mode == "unchanged"


def test_vectors_in_another_order_are_aligned_by_chunk_id_and_a_missing_one_is_refused(tmp_path):
    chunks, vecs = _chunks()
    children, _ = _partitions(tmp_path / "a", chunks, vecs)
    order = np.random.default_rng(0).permutation(len(chunks))
    _, shuffled = _partitions(tmp_path / "b", chunks.take(order), vecs[order])
    layout, memory = Layout(tmp_path / "streamed"), Layout(tmp_path / "memory")
    write_search_index(layout, "big", "v1", children, shuffled)
    write_search_table(memory, "big", "v1", chunks, vecs)
    assert _table(layout).equals(_table(memory))
    _, short = _partitions(tmp_path / "c", chunks.slice(1), vecs[1:])
    with pytest.raises(StoreError, match=r"1 chunks of big\|v1 have no vector \(first: d0-c0\)"):
        write_search_index(Layout(tmp_path / "x"), "big", "v1", children, short)


def test_a_write_that_fails_half_way_leaves_the_previous_table_readable(tmp_path):
    """A whole write killed part way through its stream (here: a read that fails at its
    fourth slice) raises the reader's own error and commits nothing: search still reads
    the table as it was."""
    layout = Layout(tmp_path / "t")
    chunks, vecs = _chunks()
    write_search_table(layout, "big", "v1", chunks, vecs)
    before = _table(layout)
    reads: list[int] = []

    class FailingRead(TableInput):
        def slices(self):  # the merge's row hashes, the vectors' sum, then the whole write
            reads.append(1)
            for i, part in enumerate(super().slices()):
                if len(reads) == 3 and i == 3:
                    raise StoreError("the partition's file went away")
                yield part

    everything_edited, evecs = _chunks(edits=dict.fromkeys(range(DOCS), "rewritten"))
    with pytest.raises(StoreError, match="the partition's file went away"):
        write_search_input(layout, "big", "v1", FailingRead(everything_edited, evecs))
    assert len(reads) == 3  # it failed in the whole write, not before it
    assert _table(layout).equals(before)


def test_an_edit_reads_only_the_files_new_since_the_last_write(tmp_path, monkeypatch):
    """The table names the files it was written from: after one document's edit, the only
    documents read and hashed are those of the few files that are new, not the KB's."""
    layout = Layout(tmp_path / "t")
    chunks, vecs = _chunks()
    write_search_index(layout, "big", "v1", *_partitions(tmp_path / "p1", chunks, vecs))
    stored = store_lance.TableSummary.stored(
        open_search_table(layout, "big", "v1").schema, _table(layout).column("row_hash")
    )
    assert stored is not None and stored.sources is not None
    edited, evecs = _chunks(edits={7: "changed"})
    source = search_input("big", "v1", *_partitions(tmp_path / "p2", edited, evecs))
    assert isinstance(source, PartitionInput)
    maybe = source.docs_from(stored.sources)
    assert "doc007" in maybe and len(maybe) < DOCS // 2, maybe  # its file of children and its files of vectors
    hashed: list[str] = []
    real = PartitionInput.rows_of

    def counting(self, docs):
        hashed.extend(docs)
        return real(self, docs)

    monkeypatch.setattr(PartitionInput, "rows_of", counting)
    write = write_search_input(layout, "big", "v1", source)
    assert (write.mode, write.docs_changed, write.rows_written) == ("merge", 1, PER_DOC)
    assert set(hashed) == maybe | {"doc007"}
    memory = Layout(tmp_path / "memory")
    write_search_table(memory, "big", "v1", edited, evecs)
    assert _table(layout).equals(_table(memory)) and _meta(_table(layout)) == _meta(_table(memory))


def test_a_summary_that_no_longer_describes_the_rows_is_not_trusted(tmp_path):
    """A write stopped between its rows and its metadata (here: rows deleted behind the
    table's back) leaves a summary whose digest is not the rows': the next write compares
    every row and sums the vectors anew, and puts the table right."""
    layout = Layout(tmp_path / "t")
    chunks, vecs = _chunks()
    parts = _partitions(tmp_path / "p1", chunks, vecs)
    write_search_index(layout, "big", "v1", *parts)
    tbl = open_search_table(layout, "big", "v1")
    tbl.delete("doc_id = 'doc012'")  # the summary (sources, sum) still says doc012 is there
    assert store_lance.TableSummary.stored(tbl.schema, tbl.to_arrow().column("row_hash")) is None
    write = write_search_index(layout, "big", "v1", *parts)  # the same files: only the row hashes see it
    assert (write.mode, write.docs_changed, write.rows_written) == ("merge", 1, PER_DOC)
    tbl = open_search_table(layout, "big", "v1")
    stored = store_lance.TableSummary.stored(tbl.schema, tbl.to_arrow().column("row_hash"))
    assert stored is not None and stored.sources == search_input("big", "v1", *parts).sources()
    memory = Layout(tmp_path / "memory")
    write_search_table(memory, "big", "v1", chunks, vecs)
    assert _table(layout).equals(_table(memory)) and _meta(_table(layout)) == _meta(_table(memory))


def test_the_vectors_sum_taken_in_blocks_is_the_whole_sum_to_the_unit():
    """``fixed_sum`` converts ``SUM_BLOCK_ROWS`` rows at a time (bounded temporaries): the
    sum is the one of the whole matrix converted at once, NaN and infinities as 0."""
    import numpy as np

    rng = np.random.default_rng(7)
    vecs = rng.normal(size=(store_lance.SUM_BLOCK_ROWS * 3 + 17, 24)).astype(np.float32)
    vecs[5, 3], vecs[2000, 0], vecs[-1, -1] = np.nan, np.inf, -np.inf
    clean = np.nan_to_num(vecs.astype(np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    whole = np.rint(clean * store_lance.SUM_SCALE).astype(np.int64).sum(axis=0)
    assert store_lance.fixed_sum(vecs) == [int(x) for x in whole]
    assert store_lance.fixed_sum(vecs[:0]) == [0] * 24
