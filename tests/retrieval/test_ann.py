"""The ANN index of a search table: built at ``search.ann_min_rows`` and not below, kept up
to date incrementally (optimize) and retrained when the table outgrew it (rebuild); the
vector channel through it finds what exact search finds, with exact similarities, and
filters still apply."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from corpus_pipeline.errors import ConfigError
from corpus_pipeline.kbconfig import load_kb_config
from corpus_pipeline.retrieval import Searcher, SearchSettings
from corpus_pipeline.retrieval.filters import SearchFilters
from corpus_pipeline.store import lance as store_lance
from corpus_pipeline.store.lance import (
    VECTOR_INDEX_IVF_SAMPLE,
    VECTOR_INDEX_NAME,
    VECTOR_INDEX_PQ_SAMPLE,
    VECTOR_INDEX_TRAINED_KEY,
    VectorIndexState,
    ensure_vector_index,
    open_search_table,
    search_rows,
    vector_index_action,
    vector_index_params,
    vector_index_state,
    write_search_table,
)
from corpus_pipeline.store.layout import Layout
from tests.retrieval.tiny_index import FakeEmbedder

DIM = 64
ROWS = 1200
PER_DOC = 12


def _rows(start: int, n: int) -> list[dict]:
    out = []
    for i in range(start, start + n):
        doc = i // PER_DOC
        out.append(
            {
                "chunk_id": f"c{i}",
                "parent_id": f"p{i}",
                "chunk_index": i % PER_DOC,
                "chunk_type": "TEXT",
                "kb": "ops",
                "strategy_version": "v1",
                "doc_id": f"d{doc}",
                "doc_path": f"doc{doc}.md",
                "text": f"chunk {i} of document {doc}",
                "start_offset": 0,
                "end_offset": 10,
                "char_count": 10,
                "token_count": 3,
                "section_path": "",
                "page_num": None,
                "block_index": i % PER_DOC,
                "strategy": "RECURSIVE",
                "metadata": "{}",
            }
        )
    return out


def _vectors(ids: np.ndarray, noise: float, seed: int) -> np.ndarray:
    """Embedding-like unit vectors: a common direction, one of 20 topics, the document's
    own direction, noise (so nearest neighbours are a structure, not a coin toss)."""
    base = np.random.default_rng(0)
    mean = base.standard_normal(DIM)
    topics = base.standard_normal((20, DIM))
    docs = ids // PER_DOC
    doc_dirs = np.stack([np.random.default_rng((1, int(d))).standard_normal(DIM) for d in docs])
    rng = np.random.default_rng(seed)
    v = (
        1.0 * mean / 8
        + 0.7 * topics[docs % 20] / 8
        + 0.5 * doc_dirs / 8
        + noise * rng.standard_normal((len(ids), DIM)) / 8
    )
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def _write(tmp_path: Path, rows: int, min_rows: int) -> Layout:
    return _write_at(Layout(tmp_path), rows, min_rows)


def _write_at(layout: Layout, rows: int, min_rows: int) -> Layout:
    write_search_table(
        layout,
        "ops",
        "v1",
        pa.Table.from_pylist(_rows(0, rows)),
        _vectors(np.arange(rows), 0.4, 1),
        ann_min_rows=min_rows,
    )
    return layout


def _add(layout: Layout, start: int, n: int) -> None:
    """Rows appended to the table (what a merge_insert of new documents leaves)."""
    tbl = open_search_table(layout, "ops", "v1")
    data = search_rows(pa.Table.from_pylist(_rows(start, n)), _vectors(np.arange(start, start + n), 0.4, 2))
    tbl.add(data.select(tbl.schema.names).replace_schema_metadata(tbl.schema.metadata))


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Layout, dict[str, list[float]]]:
    """A table of ROWS children written with ann_min_rows = ROWS (so: indexed), and queries."""
    layout = _write(tmp_path_factory.mktemp("ann"), ROWS, ROWS)
    qids = np.arange(0, ROWS, ROWS // 40)
    qv = _vectors(qids, 0.6, 3)
    return layout, {f"q{i}": qv[j].tolist() for j, i in enumerate(qids)}


def _searcher(layout: Layout, queries: dict[str, list[float]], **settings) -> Searcher:
    return Searcher(
        layout,
        "ops",
        "v1",
        embedding="fake",
        settings=SearchSettings(keyword_top_k=0, **settings),
        embedder=FakeEmbedder(queries),
    )


def _channel(s: Searcher, q: str, filters: SearchFilters | None = None) -> list[dict]:
    rows, _ = s._vector(q, s.settings.vector_top_k, [], s.where(filters))
    return rows


# ------------------------------------------------------------------ the decision


@pytest.mark.parametrize(
    ("rows", "index", "action"),
    [
        (999, None, "none"),  # below the threshold: flat
        (999, VectorIndexState(999, 0, 999), "drop"),  # shrank (or threshold raised): flat again
        (1000, None, "create"),  # at the threshold: built
        (1000, VectorIndexState(1000, 0, 1000), "none"),  # up to date
        (1100, VectorIndexState(1000, 100, 1000), "optimize"),  # 9 % appended: added, not retrained
        (1250, VectorIndexState(1000, 250, 1000), "optimize"),  # 20 %
        (1400, VectorIndexState(1000, 400, 1000), "rebuild"),  # 29 % not in the training: retrain
        # optimized twice already: everything indexed, yet 1/3 of it was never trained on
        (1500, VectorIndexState(1500, 0, 1000), "rebuild"),
        # rows replaced in place (same count) past the share: retrain
        (1000, VectorIndexState(700, 300, 1000), "rebuild"),
        (1000, VectorIndexState(1000, 0, None), "none"),  # trained count unknown: the indexed rows
    ],
)
def test_the_action_for_a_table(rows, index, action):
    assert vector_index_action(rows, 1000, index, rebuild_share=0.25) == action


# ------------------------------------------------------------------ on a real table


def test_the_index_is_built_at_the_threshold_and_not_below(tmp_path, indexed):
    layout, _ = indexed
    state = vector_index_state(open_search_table(layout, "ops", "v1"))
    assert state == VectorIndexState(ROWS, 0, ROWS)
    below = _write(tmp_path, ROWS, ROWS + 1)
    assert vector_index_state(open_search_table(below, "ops", "v1")) is None
    assert not _searcher(below, {}).ann


def test_ann_finds_what_exact_search_finds_with_exact_similarities(indexed):
    layout, queries = indexed
    ann = _searcher(layout, queries)
    exact = _searcher(layout, queries, ann_nprobes=0)
    assert ann.ann and exact.ann  # the same indexed table; ann_nprobes 0 bypasses the index
    recalls, worst_gap = [], 0.0
    for q in queries:
        got, truth = _channel(ann, q), _channel(exact, q)
        assert len(got) == len(truth) == 20
        recalls.append(len({r["chunk_id"] for r in got[:10]} & {r["chunk_id"] for r in truth[:10]}) / 10)
        dist = {r["chunk_id"]: r["_distance"] for r in truth}
        worst_gap = max([worst_gap] + [abs(r["_distance"] - dist[r["chunk_id"]]) for r in got if r["chunk_id"] in dist])
    assert np.mean(recalls) >= 0.95, recalls
    # refine_factor re-ranks by the stored vectors: the similarities the gates read are exact
    assert worst_gap < 1e-4


def test_the_channel_always_refines_pq_distances_to_exact_ones(indexed):
    """Without a refine step the index returns PQ's approximate distances (so the gates and
    the relevance would read wrong similarities); the channel re-ranks even at factor 1."""
    layout, queries = indexed
    tbl = open_search_table(layout, "ops", "v1")
    exact = _searcher(layout, queries, ann_nprobes=0)
    least = _searcher(layout, queries, ann_nprobes=1, ann_refine_factor=1)
    raw_gaps, gaps = [], []
    for q, vec in list(queries.items())[:10]:
        truth = {r["chunk_id"]: r["_distance"] for r in _channel(exact, q)}
        raw = tbl.search(vec).distance_type("cosine").nprobes(20).select(["chunk_id", "_distance"]).limit(20).to_list()
        raw_gaps += [abs(r["_distance"] - truth[r["chunk_id"]]) for r in raw if r["chunk_id"] in truth]
        gaps += [abs(r["_distance"] - truth[r["chunk_id"]]) for r in _channel(least, q) if r["chunk_id"] in truth]
    assert raw_gaps and max(raw_gaps) > 1e-3
    assert gaps and max(gaps) < 1e-4


def test_without_a_filter_the_channel_probes_ann_nprobes_partitions_not_all(indexed):
    """LanceDB's unbounded maximum searched every partition (at 1M children ~105 ms instead
    of ~30 ms a query): without a filter the probes are exactly ``ann_nprobes``."""
    import re

    layout, queries = indexed
    s = _searcher(layout, queries, ann_nprobes=1)
    vec = np.asarray(next(iter(queries.values())), np.float32)
    plan = s.vector_query(vec, 20).analyze_plan()
    searched = [float(x) for x in re.findall(r"partitions_searched=([\d.]+)", plan)]
    assert searched and max(searched) == 1, plan
    widened = s.vector_query(vec, 20, "doc_path LIKE 'doc1_.md'").analyze_plan()  # a filter may widen
    assert "partitions_searched" in widened


def test_filters_still_apply_through_the_index(indexed):
    layout, queries = indexed
    narrow = SearchFilters(path="doc1?.md")  # documents 10-19: 120 of 1,200 rows
    ann = _searcher(layout, queries, ann_nprobes=1)  # one partition: the rest is found by widening
    exact = _searcher(layout, queries, ann_nprobes=0)
    recalls = []
    for q in queries:
        got, truth = _channel(ann, q, narrow), _channel(exact, q, narrow)
        assert got and all(r["doc_path"] in {f"doc{d}.md" for d in range(10, 20)} for r in got)
        assert len(got) == len(truth) == 20  # a narrow filter still fills the top k
        recalls.append(len({r["chunk_id"] for r in got[:10]} & {r["chunk_id"] for r in truth[:10]}) / 10)
    assert np.mean(recalls) >= 0.95, recalls


def test_appended_rows_are_optimized_in_and_a_grown_table_is_retrained(tmp_path):
    layout = _write(tmp_path, ROWS, ROWS)
    _add(layout, ROWS, 120)  # +10 %
    tbl = open_search_table(layout, "ops", "v1")
    assert vector_index_state(tbl) == VectorIndexState(ROWS, 120, ROWS)
    assert ensure_vector_index(tbl, ROWS) == "optimize"
    assert vector_index_state(tbl) == VectorIndexState(ROWS + 120, 0, ROWS)  # indexed, trained on ROWS
    s = _searcher(layout, {"new": _vectors(np.asarray([ROWS + 5]), 0.0, 9)[0].tolist()})
    assert "c1205" in [r["chunk_id"] for r in _channel(s, "new")[:10]]  # the new rows are found
    assert ensure_vector_index(tbl, ROWS) == "none"
    _add(layout, ROWS + 120, 400)  # now 520 of 1,720 rows (30 %) were not trained on
    tbl = open_search_table(layout, "ops", "v1")
    assert ensure_vector_index(tbl, ROWS) == "rebuild"
    state = vector_index_state(tbl)
    assert state == VectorIndexState(ROWS + 520, 0, ROWS + 520)
    assert tbl.schema.field("vector").metadata[VECTOR_INDEX_TRAINED_KEY.encode()] == str(ROWS + 520).encode()
    assert ensure_vector_index(tbl, 10**6) == "drop"  # threshold raised past the table
    assert vector_index_state(tbl) is None


def test_the_index_is_built_by_fragment_groups_with_shared_models_into_one_segment(tmp_path, monkeypatch):
    """The build encodes a group of fragments at a time (bounded memory) with the centroids
    and codebooks trained once, and commits one merged segment: one search per query, and it
    finds what exact search finds as the one-group build does."""
    monkeypatch.setattr(store_lance.rows, "FRAGMENT_ROWS", 100)
    monkeypatch.setattr(store_lance.ann, "VECTOR_INDEX_SEGMENT_ROWS", 300)
    layout = _write(tmp_path, ROWS, ROWS)
    tbl = open_search_table(layout, "ops", "v1")
    ds = tbl.to_lance()
    assert len(ds.get_fragments()) == 12
    assert [len(g) for g in store_lance._fragment_groups(ds, 300)] == [3, 3, 3, 3]
    assert vector_index_state(tbl) == VectorIndexState(ROWS, 0, ROWS)
    assert tbl.index_stats(VECTOR_INDEX_NAME).num_indices == 1  # the groups' segments merged
    qids = np.arange(0, ROWS, ROWS // 40)
    qv = _vectors(qids, 0.6, 3)
    queries = {f"q{i}": qv[j].tolist() for j, i in enumerate(qids)}
    ann, exact = _searcher(layout, queries), _searcher(layout, queries, ann_nprobes=0)
    recalls = [
        len({r["chunk_id"] for r in _channel(ann, q)[:10]} & {r["chunk_id"] for r in _channel(exact, q)[:10]}) / 10
        for q in queries
    ]
    assert np.mean(recalls) >= 0.95, recalls
    store_lance.build_vector_index(tbl)  # a rebuild replaces the index in one commit
    assert tbl.index_stats(VECTOR_INDEX_NAME).num_indices == 1
    assert vector_index_state(tbl) == VectorIndexState(ROWS, 0, ROWS)


@pytest.mark.slow
def test_the_index_is_built_and_rebuilt_on_object_storage(tmp_path, s3_warehouse, monkeypatch):
    """The grouped build (segments written, merged, committed) on a table in a bucket of
    the local S3 server: search through the index finds what exact search finds."""
    monkeypatch.setattr(store_lance.rows, "FRAGMENT_ROWS", 200)
    monkeypatch.setattr(store_lance.ann, "VECTOR_INDEX_SEGMENT_ROWS", 400)
    layout = Layout.at(tmp_path)
    assert layout.remote
    _write_at(layout, 800, 800)
    tbl = open_search_table(layout, "ops", "v1")
    assert vector_index_state(tbl) == VectorIndexState(800, 0, 800)
    assert tbl.index_stats(VECTOR_INDEX_NAME).num_indices == 1
    qv = _vectors(np.arange(0, 800, 40), 0.6, 3)
    queries = {f"q{j}": v.tolist() for j, v in enumerate(qv)}
    ann, exact = _searcher(layout, queries), _searcher(layout, queries, ann_nprobes=0)
    recalls = [
        len({r["chunk_id"] for r in _channel(ann, q)[:10]} & {r["chunk_id"] for r in _channel(exact, q)[:10]}) / 10
        for q in queries
    ]
    assert np.mean(recalls) >= 0.95, recalls
    _add(layout, 800, 400)  # a third of the table new: retrained
    assert ensure_vector_index(open_search_table(layout, "ops", "v1"), 800) == "rebuild"
    assert vector_index_state(open_search_table(layout, "ops", "v1")) == VectorIndexState(1200, 0, 1200)


@pytest.mark.parametrize("rows", [512, 1200, 100_000, 1_000_000, 50_000_000])
def test_the_training_samples_are_bounded_and_lance_accepts_them(rows):
    """Lance samples ``rate`` vectors per partition for k-means and per code (256) for the
    codebooks, and refuses a rate under 2 or a sample larger than the table: the rates keep
    both samples under their caps at any size, and valid down to the smallest table allowed."""
    p = vector_index_params(rows, 384)
    assert p["num_partitions"] == round(rows**0.5)
    ivf, pq = p["ivf_sample_rate"] * p["num_partitions"], p["pq_sample_rate"] * 256
    assert p["ivf_sample_rate"] >= 2 and p["pq_sample_rate"] >= 2
    assert ivf <= max(VECTOR_INDEX_IVF_SAMPLE, 2 * p["num_partitions"]) and ivf <= rows
    assert pq <= VECTOR_INDEX_PQ_SAMPLE and pq <= rows
    if rows >= 1_000_000:
        assert ivf >= 32_768 and pq == VECTOR_INDEX_PQ_SAMPLE  # not starved either


# ------------------------------------------------------------------ the configuration


def test_the_settings_are_validated_naming_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"search\.ann_min_rows = 10: .*greater than or equal to 512"):
        SearchSettings(ann_min_rows=10)
    with pytest.raises(ConfigError, match=r"search\.ann_refine_factor = 0"):
        SearchSettings(ann_refine_factor=0)
    (tmp_path / "kb.yaml").write_text("search:\n  ann_min_rows: -5\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"ann_min_rows"):
        load_kb_config(tmp_path)
    (tmp_path / "kb.yaml").write_text("search:\n  ann_min_rows: 50000\n", encoding="utf-8")
    assert load_kb_config(tmp_path).search.ann_min_rows == 50000
    assert SearchSettings().ann_min_rows == 100_000


def test_search_rows_made_in_slices_equal_one_slice(monkeypatch):
    """A write turns rows into Python values (row hashes, keyword text) a slice at a time
    (``PY_SLICE_ROWS``), so its memory does not grow with the table: the rows are the same
    as in one slice, Chinese text included."""
    from corpus_pipeline.store import lance

    rows = _rows(0, 50)
    rows[7]["text"] = "线程栈溢出时先用 jstack 看线程"
    chunks = pa.Table.from_pylist(rows)
    vecs = _vectors(np.arange(50), 0.4, 2)
    whole = search_rows(chunks, vecs)
    monkeypatch.setattr(lance.rows, "PY_SLICE_ROWS", 7)
    sliced = search_rows(chunks, vecs)
    assert sliced.combine_chunks().equals(whole.combine_chunks())
    assert sliced.column("row_hash").num_chunks == 8 and len(set(whole.column("row_hash").to_pylist())) == 50
