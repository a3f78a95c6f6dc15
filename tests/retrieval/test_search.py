"""Hybrid search end to end on a hand-made LanceDB table: channels, gates, fusion,
elevation to parents read from Parquet, budgets, the JSON contract; Chinese keyword
search through the ICU full-text index. A fake embedder stands in for the model."""

from __future__ import annotations

import pytest

from corpus_pipeline.retrieval import Searcher

from .tiny_index import CHUNKS, FakeEmbedder, _searcher  # the index fixture: conftest.py


def test_a_chinese_query_is_found_by_the_keyword_channel_and_elevated_to_its_parent(index):
    # The query vector is orthogonal to every chunk: the vector gate drops all of them.
    res = _searcher(index, {}).search("磁盘使用率超过多少是严重告警")
    top = res.results[0]
    assert top.parent_id == "P2" and top.text.startswith("<P2") and (top.start_offset, top.end_offset) == (90, 190)
    assert [h.chunk_id for h in top.hits] == ["c3"] and top.channels == ["keyword"]
    assert res.raw_hits["vector"] == 4 and all("vector" not in h.channels for h in res.candidates)


def test_two_children_of_one_parent_found_by_both_channels_lift_the_parent(index):
    q = "jstack 线程栈"
    res = _searcher(index, {q: [1.0, 0.2, 0.0, 0.0]}, extra_hit_boost=0.12, multi_channel_boost=0.10).search(q)
    top = res.results[0]
    assert top.parent_id == "P1" and {h.chunk_id for h in top.hits} == {"c1", "c2"}
    assert top.channels == ["vector", "keyword"]
    assert top.boost == pytest.approx(0.12 + 0.10)  # seed 003's boosts (off by default)
    assert top.score == pytest.approx(top.best_child_score * 1.22)


def test_an_english_query_finds_its_chunk_by_both_channels(index):
    q = "which port does the web console use"
    res = _searcher(index, {q: [0.0, 0.0, 1.0, 0.0]}).search(q)
    assert res.results[0].parent_id == "P3" and res.results[0].hits[0].chunk_id == "c4"
    assert set(res.results[0].hits[0].channels) == {"vector", "keyword"}


def test_the_json_has_the_parent_level_contract_with_chunk_ids_in_hits(index):
    q = "jstack 线程栈"
    out = _searcher(index, {q: [1.0, 0.2, 0.0, 0.0]}).search(q).to_dict()
    assert set(out) >= {"kb", "strategy_version", "results"}
    r = out["results"][0]
    assert set(r) >= {"parent_id", "score", "text", "doc_path", "section_path", "start_offset", "end_offset", "hits"}
    assert set(r["hits"][0]) >= {"chunk_id", "score", "channels", "text"}
    assert len(out["results"]) == len({x["parent_id"] for x in out["results"]})  # one entry per parent


def test_top_k_and_budgets_limit_the_results(index):
    q = "告警"
    s = _searcher(index, {q: [0.7, 0.7, 0.1, 0.0]}, total_evidence_max_chars=120)
    res = s.search(q, top_k=3)
    assert sum(len(r.evidence) for r in res.results) == res.evidence_chars <= 120
    assert len(res.results) + len(res.dropped_by_budget) <= 3


def test_without_parent_blocks_the_children_are_their_own_evidence(index):
    db, _ = index
    s = Searcher(db, "ops", "v1", embedding="fake", parents_file=db.home / "missing.parquet", embedder=FakeEmbedder({}))
    res = s.search("磁盘")
    assert res.results[0].text == CHUNKS[2][2] and res.warnings
