"""A cut parent's window goes to its best matching children (``retrieval.passages``): the
answer in a sibling of the matched child reaches the caller, found by the query vector or by
the keyword channel among the parents' children; the budget follows the best passages
whichever parent holds them (``evidence_fill: passages``)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corpus_pipeline.retrieval import Searcher, SearchSettings
from corpus_pipeline.retrieval.elevation import ChildHit, ParentResult, Passage
from corpus_pipeline.retrieval.evidence import apply_budgets
from corpus_pipeline.retrieval.fusion import ChannelScore
from corpus_pipeline.retrieval.passages import children_of
from corpus_pipeline.store.lance import write_search_table
from corpus_pipeline.store.layout import Layout

from .tiny_index import FakeEmbedder

DOC = "paper.md"
WIDTH = 500
# Parent P1 (one document): six 500-char children; the query's vector matches c0 best (the
# only vector hit with vector_top_k 1); the answer is in c4, the next most similar; c5 holds
# the words of KEYWORD_QUERY. Parent P2 (another document): one child that the keyword
# channel ranks first for KEYWORD_QUERY.
NAMES = ("intro c0", "method c1", "data c2", "x c3", "answer c4", "y c5")
TEXTS = [f"{n} " + ("lorem ipsum " * 50)[: WIDTH - len(n) - 2] + "." for n in NAMES]
TEXTS[5] = TEXTS[5][: WIDTH - 37] + " the incubation period was five days."
VECTORS = [[1, 0, 0, 0], [0, 0, 1, 0], [0, 0, 1, 0], [0, 0, 0.9, 0.1], [0.8, 0.6, 0, 0], [0, 0, 0.5, 0.5]]
P2_TEXT = "incubation period: the incubation period of the virus, its incubation period."
QUERY = "what is the answer"
KEYWORD_QUERY = "incubation period"
BODY = "".join(TEXTS)
assert all(len(t) == WIDTH for t in TEXTS)


def _row(i, cid, pid, doc, text, start):
    return {
        "chunk_id": cid,
        "parent_id": pid,
        "chunk_index": i,
        "chunk_type": "TEXT",
        "kb": "papers",
        "strategy_version": "v1",
        "doc_id": doc,
        "doc_path": doc,
        "text": text,
        "start_offset": start,
        "end_offset": start + len(text),
        "char_count": len(text),
        "token_count": 100,
        "section_path": "Results",
        "page_num": None,
        "block_index": 0,
        "strategy": "RECURSIVE",
        "metadata": "{}",
    }


def _parent(pid, doc, text):
    return {
        "parent_id": pid,
        "text": text,
        "doc_path": doc,
        "section_path": "Results",
        "start_offset": 0,
        "end_offset": len(text),
        "overlap_chars": 0,
    }


@pytest.fixture
def searcher(tmp_path):
    rows = [_row(i, f"c{i}", "P1", DOC, t, i * WIDTH) for i, t in enumerate(TEXTS)]
    rows.append(_row(0, "d0", "P2", "other.md", P2_TEXT, 0))
    vectors = np.asarray([*VECTORS, [0, 0, 0, 1]], dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    layout = Layout(tmp_path)
    write_search_table(layout, "papers", "v1", pa.Table.from_pylist(rows), vectors)
    parents = tmp_path / "parents.parquet"
    pq.write_table(pa.Table.from_pylist([_parent("P1", DOC, BODY), _parent("P2", "other.md", P2_TEXT)]), parents)

    def make(**settings):
        s = SearchSettings(**{"vector_top_k": 1, "keyword_top_k": 0, "total_evidence_max_chars": 1200, **settings})
        vectors = {QUERY: [1.0, 0.0, 0.0, 0.0], KEYWORD_QUERY: [1.0, 0.0, 0.0, 0.0]}
        return Searcher(
            layout, "papers", "v1", embedding="fake", settings=s, parents_file=parents, embedder=FakeEmbedder(vectors)
        )

    return make


def test_the_answer_in_a_sibling_of_the_hit_is_in_the_window(searcher):
    [r] = searcher().search(QUERY).results
    assert [h.chunk_id for h in r.hits] == ["c0"]
    assert (r.passages[0].start, r.passages[0].end) == (4 * WIDTH, 5 * WIDTH)  # c4 first
    assert len(r.passages) == 5 and (0, WIDTH) not in [(p.start, p.end) for p in r.passages]  # c0 is the hit
    assert r.truncated and len(r.evidence) <= 1200
    assert TEXTS[0] in r.text and TEXTS[4] in r.text  # the hit and the answer, as two windows
    (a0, b0), (a1, b1) = r.returned_spans  # what corpus eval scores
    assert a0 == 0 and b0 >= WIDTH and a1 <= 4 * WIDTH and b1 >= 5 * WIDTH


def test_without_passages_the_window_stays_around_the_hit(searcher):
    [r] = searcher(parent_passages=0).search(QUERY).results
    assert r.passages == () and TEXTS[0] in r.text and "answer c4" not in r.text


def test_passages_leave_out_the_best_hit_and_are_capped(searcher):
    [r] = searcher(parent_passages=2).search(QUERY).results
    assert len(r.passages) == 2 and (0, WIDTH) not in [(p.start, p.end) for p in r.passages]


def test_the_keyword_channel_among_the_parents_children_finds_what_the_vector_misses(searcher):
    # The vector channel's hit is P1's c0, the keyword channel's P2's d0: among the children
    # of P1 and P2, c5 is the keyword channel's second, so it is P1's best passage.
    s = searcher(keyword_top_k=1, total_evidence_max_chars=1700, max_hit_snippets=0)
    by_id = {r.parent_id: r for r in s.search(KEYWORD_QUERY).results}
    assert [h.chunk_id for h in by_id["P1"].hits] == ["c0"] and [h.chunk_id for h in by_id["P2"].hits] == ["d0"]
    assert (by_id["P1"].passages[0].start, by_id["P1"].passages[0].end) == (5 * WIDTH, 6 * WIDTH)
    assert "incubation period was five days" in by_id["P1"].text
    plain = {
        r.parent_id: r
        for r in searcher(keyword_top_k=1, total_evidence_max_chars=1700, max_hit_snippets=0, parent_passages=0)
        .search(KEYWORD_QUERY)
        .results
    }
    assert "incubation period was five days" not in plain["P1"].text


def test_a_filter_applies_to_passages(searcher):
    s = searcher()
    assert children_of(s.table, ["P1"], "chunk_type = 'TEXT'").num_rows == len(TEXTS)
    assert children_of(s.table, ["P1"], "chunk_type = 'IMAGE'").num_rows == 0


def _result(pid, rank, passages, length=3000, doc="a.md"):
    hit = ChildHit(f"{pid}-h", pid, 1.0 / (rank + 1), {"vector": ChannelScore(1, 0.8)}, "x" * 300, doc, "S", 0, 300)
    return ParentResult(
        pid,
        hit.score,
        hit.score,
        0.0,
        "y" * length,
        doc,
        "S",
        0,
        length,
        (hit,),
        passages=tuple(Passage(a, a + 300, score) for a, score in passages),
    )


def test_the_budget_follows_the_best_passages_whichever_parent_holds_them():
    # parent A (ranked first) has weak passages; B (second) has the best one, at 2000-2300.
    a = _result("A", 0, [(1000, 0.1), (1300, 0.09), (1600, 0.08)])
    b = _result("B", 1, [(2000, 0.9)])
    by_passage = SearchSettings(total_evidence_max_chars=1500, max_hit_snippets=0, evidence_fill="passages")
    _, rb = apply_budgets([a, b], by_passage).results
    assert any(x <= 2000 and y >= 2300 for x, y in rb.returned_spans)
    by_rank = by_passage.with_(evidence_fill="rank")
    _, rb = apply_budgets([a, b], by_rank).results
    assert not any(x <= 2000 and y >= 2300 for x, y in rb.returned_spans)  # A's padding took it


def test_children_of_quotes_parent_ids(searcher, tmp_path):
    s = searcher()
    assert children_of(s.table, ["P1", "it's"]).num_rows == len(TEXTS)
    assert children_of(s.table, ["x' OR '1'='1"]).num_rows == 0
