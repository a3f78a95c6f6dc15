"""Relevance: in [0, 1], monotone in each channel's own score, the same for the same query,
shown with what found each hit (``found_by``), and what ``score_threshold`` compares."""

from __future__ import annotations

import pytest

from corpus_pipeline.retrieval import SearchFilters
from corpus_pipeline.retrieval.fusion import ChannelScore
from corpus_pipeline.retrieval.relevance import keyword_relevance, relevance, vector_relevance

from .tiny_index import _searcher


@pytest.mark.parametrize("baseline", [None, -0.2, 0.0, 0.1, 0.78, 0.95])
def test_vector_relevance_is_in_0_1_and_grows_with_the_cosine(baseline):
    cosines = [-1.0, -0.3, 0.0, 0.2, 0.5, 0.78, 0.8, 0.85, 0.9, 0.99, 1.0]
    values = [vector_relevance(c, baseline) for c in cosines]
    assert all(0.0 <= v <= 1.0 for v in values)
    assert values == sorted(values)
    b = baseline or 0.0
    assert vector_relevance(b, baseline) == 0.0  # what an arbitrary chunk scores
    assert vector_relevance(b + 0.5 * (1 - b), baseline) == pytest.approx(1.0)  # half way: the span
    assert vector_relevance(b + 0.25 * (1 - b), baseline) == pytest.approx(0.5)


def test_two_models_scales_come_out_alike():
    # multilingual-e5 (any chunk 0.78) and all-MiniLM (any chunk 0.05), a third of the way each
    assert vector_relevance(0.78 + (1 - 0.78) / 3, 0.78) == pytest.approx(vector_relevance(0.05 + 0.95 / 3, 0.05))


def test_keyword_relevance_saturates_and_is_the_same_for_the_same_bm25():
    values = [keyword_relevance(s, 12.0) for s in [0.0, 1.0, 6.0, 12.0, 24.0, 100.0, 1e6]]
    assert values[0] == 0.0 and values[3] == pytest.approx(0.5) and values[-1] < 1.0 + 1e-12
    assert values == sorted(values) and all(0.0 <= v <= 1.0 for v in values)
    assert keyword_relevance(-3.0, 12.0) == 0.0


def test_a_hit_takes_the_best_of_its_channels():
    both = {"vector": ChannelScore(3, 0.9), "keyword": ChannelScore(1, 36.0)}
    assert relevance(both, 0.8, vector_span=0.5, keyword_half=12.0) == pytest.approx(max(1.0, 0.75))
    assert relevance({"keyword": ChannelScore(1, 36.0)}, 0.8, vector_span=0.5, keyword_half=12.0) == 0.75
    assert relevance({}, 0.8, vector_span=0.5, keyword_half=12.0) == 0.0


def test_a_better_match_ranks_and_reads_higher_and_the_same_query_gives_the_same_value(index):
    q = "zzz qqq"  # no keyword hit: the vector alone ranks c2 (nearest), then c1
    s = _searcher(index, {q: [1.0, 0.3, 0.0, 0.0]}, vector_relevance_span=1.0)  # no clamp at 1 here
    hits = s.candidates(q)
    assert [h.chunk_id for h in hits] == ["c2", "c1"]  # c3, c4: no nearer than an arbitrary chunk
    cosines = [h.channels["vector"].score for h in hits]
    assert cosines == sorted(cosines, reverse=True) and cosines[0] > cosines[1]
    values = [h.relevance for h in hits]
    assert all(0.0 <= v <= 1.0 for v in values) and values == sorted(values, reverse=True) and values[0] > values[-1]
    again = _searcher(index, {q: [1.0, 0.3, 0.0, 0.0]}, vector_relevance_span=1.0).candidates(q)
    assert [(h.chunk_id, h.relevance) for h in again] == [(h.chunk_id, h.relevance) for h in hits]
    assert s.search(q).results[0].relevance == values[0]  # the parent: its best hit's


def test_the_threshold_drops_the_low_ones_and_keeps_the_ranking_of_the_rest(index):
    q = "告警"
    s = _searcher(index, {q: [0.7, 0.7, 0.1, 0.0]}, vector_relevance_span=1.0)
    every = s.candidates(q)
    values = sorted(h.relevance for h in every)
    assert len(every) >= 3 and values[0] < values[-1]
    cut = (values[0] + values[-1]) / 2
    kept = s.candidates(q, filters=SearchFilters(score_threshold=cut))
    assert kept and len(kept) < len(every)
    assert all(h.relevance >= cut for h in kept)
    assert [h.chunk_id for h in kept] == [h.chunk_id for h in every if h.relevance >= cut]
    res = s.search(q, filters=SearchFilters(score_threshold=cut))
    assert res.results and all(r.relevance >= cut for r in res.results)
    assert all(r.relevance == 1.0 for r in s.search(q, filters=SearchFilters(score_threshold=1.0)).results)


def test_the_json_says_what_found_each_hit_and_each_parents_relevance(index):
    q = "which port does the web console use"
    out = _searcher(index, {q: [0.0, 0.0, 1.0, 0.0]}).search(q).to_dict()
    top = out["results"][0]
    hit = top["hits"][0]
    assert set(hit["found_by"]) == {"vector", "keyword"}
    assert hit["found_by"]["vector"]["rank"] == 1 and hit["found_by"]["vector"]["cosine"] == pytest.approx(1.0)
    assert hit["found_by"]["keyword"]["rank"] == 1 and hit["found_by"]["keyword"]["bm25"] > 0
    assert 0.0 < hit["relevance"] <= 1.0 and top["relevance"] == max(h["relevance"] for h in top["hits"])
    assert {"score", "channels", "best_child_score"} <= set(top) | set(hit)  # nothing removed
    assert out["filters"] is None


def test_keyword_only_hits_have_no_vector_figures(index):
    res = _searcher(index, {}).search("磁盘使用率超过多少是严重告警")  # the vector gate drops all
    hit = res.to_dict()["results"][0]["hits"][0]
    assert list(hit["found_by"]) == ["keyword"] and set(hit["found_by"]["keyword"]) == {"bm25", "rank"}
    bm25 = hit["found_by"]["keyword"]["bm25"]
    assert hit["relevance"] == pytest.approx(bm25 / (bm25 + 12.0), abs=1e-3)
