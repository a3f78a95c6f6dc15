"""Evidence: images in place of their references, the seed's matched-children snippets, and
budgets that let every returned parent in (per parent, per sub-question, in total)."""

from __future__ import annotations

import pytest

from corpus_pipeline.retrieval.elevation import ChildHit, Parent, elevate
from corpus_pipeline.retrieval.evidence import (
    ImageText,
    apply_budgets,
    evidence_window,
    fit,
    format_evidence,
    render,
    water_fill,
)
from corpus_pipeline.retrieval.fusion import ChannelScore
from corpus_pipeline.retrieval.settings import SearchSettings

V = {"vector": ChannelScore(1, 0.7)}
S = SearchSettings()


def child(cid, parent, score, start=0, end=10, doc="a.md", text=None):
    return ChildHit(cid, parent, score, V, text or f"text of {cid}", doc, "S", start, end)


def parent(pid, length, start=0, doc="a.md", overlap=0, char="x"):
    return Parent(pid, char * length, doc, "S", start, start + length - overlap, overlap)


def one(children, parents, settings=S):
    return elevate(children, parents, settings)


PUMP = "# Pumps\n\nThe feed pump is P-204.\n\n![pump label](pressure_label.png)\n\nService it yearly.\n"
LABEL = PUMP.index("![pump")
LABEL_END = PUMP.index(".png)") + len(".png)")


def test_an_image_reference_is_replaced_by_its_description():
    p = Parent("P", PUMP, "pumps.md", "Pumps", 0, len(PUMP))
    hit = child("img", "P", 0.05, LABEL, LABEL_END, "pumps.md", "[image] Pump P-204 max pressure 16 bar")
    [r] = one([hit], {"P": p})
    ev = apply_budgets([r], S, {"pumps.md": [ImageText(LABEL, LABEL_END, "[image] Pump P-204 max pressure 16 bar")]})
    [out] = ev.results
    assert "![pump label]" not in out.text and "[image] Pump P-204 max pressure 16 bar" in out.text
    assert out.text.startswith("# Pumps") and out.text.rstrip().endswith("Service it yearly.")
    assert out.images == 1 and (out.start_offset, out.end_offset) == (0, len(PUMP))
    assert out.evidence == out.text + "\n\nMatched child passages:\nchild#1: [image] Pump P-204 max pressure 16 bar"
    assert ev.chars == len(out.evidence)


def test_an_image_without_markup_is_inserted_at_its_position():
    text = "page one text. page two text."
    images = [(15, 15, "[image] a chart of sales")]
    body, a, b = render(text, images, 0, len(text))
    assert body == "page one text. \n[image] a chart of sales\npage two text." and (a, b) == (0, len(text))


def test_a_window_edge_inside_an_image_reference_takes_the_whole_reference():
    text = "aaaa![x](y.png)bbbb"
    body, a, b = render(text, [(4, 15, "[image] X")], 6, 17)
    assert (a, b) == (4, 17) and body == "\n[image] X\nbb"


def test_chinese_evidence_lists_its_matched_children_in_the_seeds_form():
    text = "问题现象：CPU 使用率持续超过 85%。排查步骤：先用 top 定位进程。"
    p = Parent("P", text, "cpu.md", "排查", 0, len(text))
    [r] = one([child("c1", "P", 0.05, 0, 10, "cpu.md", "问题现象：CPU 使用率持续超过 85%。")], {"P": p})
    [out] = apply_budgets([r], S).results
    assert out.evidence == text + "\n\n命中子片段:\nchild#1：问题现象：CPU 使用率持续超过 85%。"


def test_snippets_are_cut_to_140_characters_and_at_most_max_hit_snippets():
    text = "y" * 1000
    hits = [child(f"c{i}", "P", 0.05 - i * 0.001, i * 200, i * 200 + 180, text="z" * 200) for i in range(5)]
    [r] = one(hits, {"P": Parent("P", text, "a.md", "", 0, 1000)})
    [out] = apply_budgets([r], S).results
    lines = out.evidence.split("Matched child passages:\n")[1].split("\n")
    assert lines == [f"child#{i}: " + "z" * 140 for i in (1, 2, 3)]


def test_water_filling_gives_short_parents_what_they_need_and_the_rest_evenly():
    assert water_fill([2200, 2200, 2200, 2200, 2200], 5200) == [1040] * 5
    assert water_fill([300, 2200, 2200], 5200) == [300, 2200, 2200]
    assert water_fill([300, 2200, 2200, 2200], 5200) == [300, 1634, 1633, 1633]
    assert water_fill([100, 100], 5200) == [100, 100]
    assert sum(water_fill([5, 7, 9], 10)) == 10


def test_all_five_parents_reach_the_caller_within_5200_characters():
    children = [child(f"c{i}", f"P{i}", 0.05 - i * 0.001, i * 10_000 + 1500, i * 10_000 + 1600) for i in range(5)]
    parents = {f"P{i}": parent(f"P{i}", 3000, start=i * 10_000) for i in range(5)}
    ev = apply_budgets(one(children, parents), S)
    assert [r.parent_id for r in ev.results] == ["P0", "P1", "P2", "P3", "P4"]
    assert ev.chars <= 5200 and all(len(r.evidence) <= 1040 for r in ev.results)
    for i, r in enumerate(ev.results):  # each window holds its hit
        assert r.truncated and r.start_offset <= i * 10_000 + 1500 and r.end_offset >= i * 10_000 + 1600


def test_a_parent_whose_share_would_be_too_small_is_dropped_not_cut_to_nothing():
    settings = S.with_(final_top_k=40)
    children = [child(f"c{i}", f"P{i}", 0.05 - i * 0.0001, i * 10_000, i * 10_000 + 10) for i in range(40)]
    parents = {f"P{i}": parent(f"P{i}", 3000, start=i * 10_000) for i in range(40)}
    ev = apply_budgets(one(children, parents, settings), settings)
    assert ev.chars <= 5200 and all(len(r.evidence) >= 200 for r in ev.results)
    assert ev.dropped_by_budget == tuple(f"P{i}" for i in range(len(ev.results), 40))


def test_each_sub_question_gets_at_most_its_own_budget():
    from dataclasses import replace

    children = [child(f"c{i}", f"P{i}", 0.05, i * 10_000, i * 10_000 + 10) for i in range(6)]
    parents = {f"P{i}": parent(f"P{i}", 3000, start=i * 10_000) for i in range(6)}
    results = [
        replace(r, sub_question=0 if i < 4 else 1) for i, r in enumerate(one(children, parents, S.with_(final_top_k=6)))
    ]
    ev = apply_budgets(results, S)
    by_question = {q: sum(len(r.evidence) for r in ev.results if r.sub_question == q) for q in (0, 1)}
    assert by_question[0] <= 2200 and by_question[1] <= 2200 and ev.chars <= 5200


def test_the_span_of_a_cut_parent_skips_its_overlap_prefix():
    # 100 chars of overlap context, then the parent's own span 500..1400.
    p = Parent("P", "o" * 100 + "x" * 900, "a.md", "", 500, 1400, 100)
    [r] = one([child("c", "P", 0.1, start=1300, end=1350)], {"P": p})
    cut = fit(r, [], 300, S.with_(max_hit_snippets=0))
    assert (cut.start_offset, cut.end_offset, len(cut.text), cut.truncated) == (1100, 1400, 300, True)


@pytest.mark.parametrize(
    ("text_len", "hits", "max_chars", "window"),
    [
        (1000, [(10, 20)], 2200, (0, 1000)),  # fits whole
        (3000, [(2500, 2600)], 2200, (800, 3000)),  # centred on the hit, clamped at the end
        (3000, [(100, 200)], 2200, (0, 2200)),  # clamped at the start
        (3000, [(1400, 1500)], 1000, (950, 1950)),  # centred: 1400 - (1000 - 100) // 2
        (3000, [(2000, 2100), (0, 100)], 1000, (1550, 2550)),  # hits too far apart: centred on the best
    ],
)
def test_a_parent_cut_to_budget_keeps_the_window_around_its_hits(text_len, hits, max_chars, window):
    assert evidence_window(text_len, hits, max_chars) == window


def test_the_prompt_form_numbers_the_sources():
    [r] = one([child("c1", "P", 0.1)], {"P": Parent("P", "parent text", "a.md", "Intro", 0, 11)})
    [out] = apply_budgets([r], S).results
    assert format_evidence([out]) == "[1] a.md — Intro\nparent text\n\nMatched child passages:\nchild#1: text of c1"
