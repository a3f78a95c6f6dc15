"""Writes proportional to the change: an existing search table gets only the changed
documents' rows (one merge_insert), the fragments that held their old rows are rewritten
without them, the others are left as they are; the result equals a table written whole."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from corpus_pipeline.retrieval.settings import ANN_MIN_ROWS_FLOOR
from corpus_pipeline.store import lance as store_lance
from corpus_pipeline.store.lance import open_search_table, vector_mean, write_search_table
from corpus_pipeline.store.layout import Layout

DOCS, PER_DOC, DIM = 40, 10, 16


@pytest.fixture(autouse=True)
def small_fragments(monkeypatch):
    monkeypatch.setattr(store_lance.rows, "FRAGMENT_ROWS", 50)  # 400 rows: 8 fragments


def _chunks(
    edits: dict[int, str] | None = None, drop: set[int] = frozenset(), add: int = 0
) -> tuple[pa.Table, np.ndarray]:
    edits = edits or {}
    rows, vecs = [], []
    for d in [d for d in range(DOCS + add) if d not in drop]:
        for i in range(PER_DOC):
            word = edits.get(d, "original")
            rows.append(
                {
                    "chunk_id": f"d{d}-c{i}",
                    "parent_id": f"d{d}-p{i // 5}",
                    "chunk_index": i,
                    "chunk_type": "TEXT",
                    "kb": "big",
                    "strategy_version": "v1",
                    "doc_id": f"doc{d:03d}",
                    "doc_path": f"docs/{d:03d}.md",
                    "text": f"document {d} passage {i} says {word}word{d}x{i} about pumps",
                    "start_offset": i * 100,
                    "end_offset": i * 100 + 60,
                    "char_count": 60,
                    "token_count": 12,
                    "section_path": f"Doc {d}",
                    "page_num": None,
                    "block_index": i,
                    "strategy": "RECURSIVE",
                    "metadata": "{}",
                }
            )
            rng = np.random.default_rng(hash((d, i, word)) % 2**32)
            v = rng.normal(size=DIM).astype(np.float32)
            vecs.append(v / np.linalg.norm(v))
    return pa.Table.from_pylist(rows), np.stack(vecs)


def _data_files(layout: Layout) -> dict[str, int]:
    folder = layout.search_table_dir("big", "v1") / "data"
    return {f.name: f.stat().st_size for f in folder.iterdir()}


def _rows(layout: Layout) -> list[dict]:
    table = open_search_table(layout, "big", "v1").to_arrow()
    return sorted(table.to_pylist(), key=lambda r: r["chunk_id"])


def _whole(tmp_path: Path, chunks: pa.Table, vecs: np.ndarray) -> Layout:
    layout = Layout(tmp_path / "whole")
    assert write_search_table(layout, "big", "v1", chunks, vecs).mode == "create"
    return layout


def _everything(layout: Layout) -> bytes:
    return b"".join(f.read_bytes() for f in layout.search_table_dir("big", "v1").rglob("*") if f.is_file())


def test_a_one_document_edit_writes_that_document_and_equals_a_whole_write(tmp_path):
    layout = Layout(tmp_path / "home")
    chunks, vecs = _chunks()
    first = write_search_table(layout, "big", "v1", chunks, vecs)
    assert (first.mode, first.rows, first.docs_changed) == ("create", DOCS * PER_DOC, DOCS)
    before = _data_files(layout)
    assert len(before) == 8, before  # fragments of FRAGMENT_ROWS rows

    edited, evecs = _chunks(edits={17: "revised"})
    write = write_search_table(layout, "big", "v1", edited, evecs)
    assert (write.mode, write.docs_changed, write.rows_written, write.rows_deleted) == ("merge", 1, PER_DOC, PER_DOC)
    after = _data_files(layout)
    kept = set(before) & set(after)
    assert len(kept) == 7, "only the fragment that held the edited document's rows is rewritten"
    new_bytes = sum(size for name, size in after.items() if name not in kept)
    assert new_bytes < 0.3 * sum(after.values())

    assert _rows(layout) == _rows(_whole(tmp_path, edited, evecs))  # same rows, hashes and vectors
    tbl = open_search_table(layout, "big", "v1")
    assert len(tbl.list_versions()) == 1
    assert np.allclose(vector_mean(tbl), evecs.mean(axis=0), atol=1e-6)
    found = tbl.search("revisedword17x3", query_type="fts", fts_columns="keyword_text").limit(5).to_list()
    assert [r["chunk_id"] for r in found] == ["d17-c3"]
    assert tbl.search("originalword17x3", query_type="fts", fts_columns="keyword_text").limit(5).to_list() == []
    near = tbl.search(evecs[173].tolist()).distance_type("cosine").limit(1).to_list()
    assert near[0]["chunk_id"] == "d17-c3"
    assert b"originalword17x3" not in _everything(layout)  # the old text is gone from disk


def test_deleted_and_added_documents_are_merged_and_nothing_changed_writes_nothing(tmp_path):
    layout = Layout(tmp_path / "home")
    write_search_table(layout, "big", "v1", *_chunks())
    chunks, vecs = _chunks(drop={3}, add=1)
    write = write_search_table(layout, "big", "v1", chunks, vecs)
    assert (write.mode, write.docs_changed, write.rows_written, write.rows_deleted) == ("merge", 2, PER_DOC, PER_DOC)
    assert _rows(layout) == _rows(_whole(tmp_path, chunks, vecs))
    assert b"originalword3x" not in _everything(layout)

    version = open_search_table(layout, "big", "v1").version
    again = write_search_table(layout, "big", "v1", chunks, vecs)
    assert again.mode == "unchanged" and again.rows_written == 0
    assert open_search_table(layout, "big", "v1").version == version  # no commit at all


def test_a_large_change_writes_the_table_whole(tmp_path):
    layout = Layout(tmp_path / "home")
    write_search_table(layout, "big", "v1", *_chunks())
    chunks, vecs = _chunks(edits=dict.fromkeys(range(25), "rewritten"))
    write = write_search_table(layout, "big", "v1", chunks, vecs)
    assert write.mode == "replace"
    assert _rows(layout) == _rows(_whole(tmp_path, chunks, vecs))


def test_the_full_text_index_keeps_delta_segments_bounded(tmp_path):
    layout = Layout(tmp_path / "home")
    write_search_table(layout, "big", "v1", *_chunks())
    for n in range(store_lance.FTS_MAX_SEGMENTS + 2):
        write_search_table(layout, "big", "v1", *_chunks(edits={n: f"edit{n}"}))
    tbl = open_search_table(layout, "big", "v1")
    stats = tbl.index_stats(store_lance.FTS_INDEX_NAME)
    assert stats.num_unindexed_rows == 0
    assert stats.num_indices <= store_lance.FTS_MAX_SEGMENTS
    hits = (
        tbl.search(
            f"edit{store_lance.FTS_MAX_SEGMENTS + 1}word{store_lance.FTS_MAX_SEGMENTS + 1}x0",
            query_type="fts",
            fts_columns="keyword_text",
        )
        .limit(3)
        .to_list()
    )
    assert [r["chunk_id"] for r in hits] == [f"d{store_lance.FTS_MAX_SEGMENTS + 1}-c0"]


def test_a_table_with_an_ann_index_is_merged_and_its_index_takes_the_new_rows(tmp_path):
    from corpus_pipeline.store.lance import vector_index_state

    more = 20  # 600 rows: past the floor (an IVF_PQ index trains on at least 512)
    layout = Layout(tmp_path / "home")
    write_search_table(layout, "big", "v1", *_chunks(add=more), ann_min_rows=ANN_MIN_ROWS_FLOOR)
    assert vector_index_state(open_search_table(layout, "big", "v1")) is not None
    chunks, vecs = _chunks(edits={5: "changed"}, add=more)
    write = write_search_table(layout, "big", "v1", chunks, vecs, ann_min_rows=ANN_MIN_ROWS_FLOOR)
    assert (write.mode, write.docs_changed) == ("merge", 1)  # the index's field metadata is no other layout
    tbl = open_search_table(layout, "big", "v1")
    state = vector_index_state(tbl)
    assert state is not None and state.unindexed_rows == 0 and state.indexed_rows == (DOCS + more) * PER_DOC
    near = tbl.search(vecs[53].tolist()).distance_type("cosine").nprobes(20).refine_factor(10).limit(1).to_list()
    assert near[0]["chunk_id"] == "d5-c3"
    for n in (6, 7):  # more edits: each write's rows are merged into the one segment (no delta left)
        write_search_table(
            layout, "big", "v1", *_chunks(edits={5: "changed", n: "again"}, add=more), ann_min_rows=ANN_MIN_ROWS_FLOOR
        )
        tbl = open_search_table(layout, "big", "v1")
        assert tbl.index_stats(store_lance.VECTOR_INDEX_NAME).num_indices == 1
        assert vector_index_state(tbl).unindexed_rows == 0  # type: ignore[union-attr]
    # a table an earlier release wrote has delta segments: maintenance merges them
    for n in (8, 9):
        extra = tbl.to_lance().to_table(limit=5)
        ids = pa.array([f"extra{n}-{i}" for i in range(5)])
        tbl.add(extra.set_column(extra.schema.get_field_index("chunk_id"), "chunk_id", ids))
        tbl.to_lance().optimize.optimize_indices(index_names=[store_lance.VECTOR_INDEX_NAME], num_indices_to_merge=0)
        tbl.checkout_latest()
    assert tbl.index_stats(store_lance.VECTOR_INDEX_NAME).num_indices > 1
    done = store_lance.maintain_search_table(tbl, ANN_MIN_ROWS_FLOOR)
    assert "segments merged" in done["ann"]
    assert tbl.index_stats(store_lance.VECTOR_INDEX_NAME).num_indices == 1


def test_a_write_killed_before_its_full_text_index_is_repaired_by_the_next(tmp_path):
    layout = Layout(tmp_path / "home")
    chunks, vecs = _chunks()
    write_search_table(layout, "big", "v1", chunks, vecs)
    open_search_table(layout, "big", "v1").drop_index(store_lance.FTS_INDEX_NAME)  # what the kill left
    assert write_search_table(layout, "big", "v1", chunks, vecs).mode == "unchanged"
    tbl = open_search_table(layout, "big", "v1")
    found = tbl.search("originalword7x2", query_type="fts", fts_columns="keyword_text").limit(3).to_list()
    assert [r["chunk_id"] for r in found] == ["d7-c2"]


def _scalar_stats(tbl) -> dict[str, tuple[int, int, int]]:
    """(segments, rows indexed, rows not) of each BTREE index of ``tbl``."""
    out = {}
    for column in store_lance.SCALAR_INDEX_COLUMNS:
        s = tbl.index_stats(store_lance.index_name(column))
        out[column] = (s.num_indices, s.num_indexed_rows, s.num_unindexed_rows) if s is not None else None
    return out


def test_the_parent_and_document_indexes_cover_every_row_and_find_a_parents_children(tmp_path):
    from corpus_pipeline.retrieval.passages import children_of, parents_where

    layout = Layout(tmp_path / "home")
    write_search_table(layout, "big", "v1", *_chunks())
    whole = dict.fromkeys(store_lance.SCALAR_INDEX_COLUMNS, (1, DOCS * PER_DOC, 0))
    assert _scalar_stats(open_search_table(layout, "big", "v1")) == whole
    for n in range(3):  # merges: the new rows are merged into the one segment
        assert write_search_table(layout, "big", "v1", *_chunks(edits={n: f"edit{n}"})).mode == "merge"
        assert _scalar_stats(open_search_table(layout, "big", "v1")) == whole

    tbl = open_search_table(layout, "big", "v1")
    parents = ["d1-p0", "d17-p1", "d39-p1"]
    plan = tbl.search().where(parents_where(parents)).limit(None).explain_plan()
    assert "ScalarIndexQuery" in plan and "parent_id_idx" in plan, plan  # not a scan of the column
    got = sorted(children_of(tbl, parents).column("chunk_id").to_pylist())
    want = sorted(r["chunk_id"] for r in _rows(layout) if r["parent_id"] in parents)
    assert got == want and len(want) == 15
    got = children_of(tbl, parents, "doc_id = 'doc017'").column("chunk_id").to_pylist()
    assert sorted(got) == [f"d17-c{i}" for i in range(5, 10)]
    assert "doc_id_idx" in tbl.search().where("doc_id IN ('doc017')").limit(None).explain_plan()


def test_a_table_written_before_the_scalar_indexes_gets_them_from_the_next_write_or_maintenance(tmp_path):
    layout = Layout(tmp_path / "home")
    chunks, vecs = _chunks()
    write_search_table(layout, "big", "v1", chunks, vecs)
    tbl = open_search_table(layout, "big", "v1")
    for column in store_lance.SCALAR_INDEX_COLUMNS:  # a table of the code before them
        tbl.drop_index(store_lance.index_name(column))
    assert set(_scalar_stats(open_search_table(layout, "big", "v1")).values()) == {None}
    assert write_search_table(layout, "big", "v1", chunks, vecs).mode == "unchanged"
    assert set(_scalar_stats(open_search_table(layout, "big", "v1")).values()) == {(1, DOCS * PER_DOC, 0)}
    version = open_search_table(layout, "big", "v1").version
    assert write_search_table(layout, "big", "v1", chunks, vecs).mode == "unchanged"
    assert open_search_table(layout, "big", "v1").version == version  # indexes up to date: no commit

    tbl = open_search_table(layout, "big", "v1")
    tbl.drop_index(store_lance.index_name("doc_id"))
    done = store_lance.maintain_search_table(open_search_table(layout, "big", "v1"), ANN_MIN_ROWS_FLOOR)
    assert done["scalar_indexes_updated"] == ["doc_id"]
    assert _scalar_stats(open_search_table(layout, "big", "v1"))["doc_id"] == (1, DOCS * PER_DOC, 0)
