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
    greedy_fill,
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
    [out] = apply_budgets([r], S.with_(max_hit_snippets=3)).results
    lines = out.evidence.split("Matched child passages:\n")[1].split("\n")
    assert lines == [f"child#{i}: " + "z" * 140 for i in (1, 2, 3)]
    [one_line] = apply_budgets([r], S).results  # the default: one line
    assert one_line.evidence.split("Matched child passages:\n")[1] == "child#1: " + "z" * 140


def test_water_filling_gives_short_parents_what_they_need_and_the_rest_evenly():
    assert water_fill([2200, 2200, 2200, 2200, 2200], 5200) == [1040] * 5
    assert water_fill([300, 2200, 2200], 5200) == [300, 2200, 2200]
    assert water_fill([300, 2200, 2200, 2200], 5200) == [300, 1634, 1633, 1633]
    assert water_fill([100, 100], 5200) == [100, 100]
    assert sum(water_fill([5, 7, 9], 10)) == 10


def test_all_five_parents_reach_the_caller_within_5200_characters_in_equal_shares():
    children = [child(f"c{i}", f"P{i}", 0.05 - i * 0.001, i * 10_000 + 1500, i * 10_000 + 1600) for i in range(5)]
    parents = {f"P{i}": parent(f"P{i}", 3000, start=i * 10_000) for i in range(5)}
    ev = apply_budgets(one(children, parents), S.with_(evidence_fill="equal"))
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


def test_matched_children_too_far_apart_for_one_window_each_keep_their_own():
    """A long parent whose hits are at its start and its end: the evidence holds both
    children whole, joined by the gap mark, and the spans it returns are exactly the two
    windows (what corpus eval scores), within the budget."""
    words = [f"w{i:04d}" for i in range(1200)]  # 6,000 characters
    text = " ".join(words)
    p = Parent("P", text, "a.md", "S", 0, len(text))
    first = child("c1", "P", 0.06, 100, 400, text=text[100:400])
    far = child("c2", "P", 0.05, 5000, 5300, text=text[5000:5300])
    [r] = one([first, far], {"P": p})
    out = fit(r, [], 1000, SearchSettings(max_hit_snippets=0))
    assert len(out.evidence) <= 1000 and "\n…\n" in out.text
    assert text[100:400] in out.text and text[5000:5300] in out.text
    assert len(out.spans) == 2 and out.returned_spans == out.spans
    (a1, b1), (a2, b2) = out.spans
    assert a1 <= 100 and b1 >= 400 and a2 <= 5000 and b2 >= 5300
    assert out.text == text[a1:b1] + "\n…\n" + text[a2:b2]
    assert (out.start_offset, out.end_offset) == (a1, b2)


def test_hits_that_fit_one_window_give_one_contiguous_span():
    text = "y" * 5000
    p = Parent("P", text, "a.md", "S", 0, len(text))
    [r] = one([child("c1", "P", 0.06, 2000, 2200), child("c2", "P", 0.05, 2400, 2600)], {"P": p})
    out = fit(r, [], 1000, SearchSettings(max_hit_snippets=0))
    assert out.spans == () and out.returned_spans == ((out.start_offset, out.end_offset),)
    assert out.start_offset <= 2000 and out.end_offset >= 2600 and len(out.text) == 1000


def test_rank_fill_gives_the_best_ranked_parents_their_full_share_and_keeps_all_five():
    """evidence_fill "rank": every parent its least (best child + one snippet line), then
    what is left to the best-ranked first, up to the per-parent cap."""
    settings = S.with_(evidence_fill="rank", parent_evidence_max_chars=2200)
    children = [child(f"c{i}", f"P{i}", 0.05 - i * 0.001, i * 10_000 + 1500, i * 10_000 + 1600) for i in range(5)]
    parents = {f"P{i}": parent(f"P{i}", 3000, start=i * 10_000) for i in range(5)}
    ev = apply_budgets(one(children, parents, settings), settings)
    sizes = [len(r.evidence) for r in ev.results]
    assert [r.parent_id for r in ev.results] == ["P0", "P1", "P2", "P3", "P4"]
    assert sizes[0] == settings.parent_evidence_max_chars and sizes == sorted(sizes, reverse=True)
    assert ev.chars <= 5200 and min(sizes) >= 200
    for i, r in enumerate(ev.results):
        assert r.start_offset <= i * 10_000 + 1500 and r.end_offset >= i * 10_000 + 1600


def test_greedy_fill_serves_demands_in_order():
    assert greedy_fill([2200, 2200, 2200], 5000) == [2200, 2200, 600]
    assert greedy_fill([100, 2200], 5000) == [100, 2200]


ZH_PUMP = "# 水泵\n\n给水泵是 P-204，压力见下图。\n\n![铭牌](pressure_label.png)\n\n每年保养一次。\n"


@pytest.mark.parametrize(
    ("doc", "description", "want"),
    [
        (PUMP, "Pump P-204 label, 最大 16 bar", "[image] Pump P-204 label, 最大 16 bar"),  # English page
        (PUMP, "[图片] 泵 P-204 铭牌", "[image] 泵 P-204 铭牌"),  # (a label in the other language is replaced)
        (ZH_PUMP, "Pump P-204 label", "[图片] Pump P-204 label"),  # Chinese page, English description
    ],
)
def test_an_image_is_labelled_in_the_language_of_its_document(doc: str, description: str, want: str) -> None:
    """Issue 41: English image descriptions were labelled ``[图片]`` (any Han character did it)."""
    start, end = doc.index("!["), doc.index(".png)") + len(".png)")
    r = one(
        [child("img", "P", 0.05, start, end, "pumps.md", description)],
        {"P": Parent("P", doc, "pumps.md", "S", 0, len(doc), 0)},
    )[0]
    out = apply_budgets([r], S, {"pumps.md": [ImageText(start, end, description)]}).results[0]
    assert want in out.text and "![" not in out.text


def test_a_degraded_image_is_labelled_in_the_language_of_the_text_around_it() -> None:
    from corpus_pipeline.vision.describe import degraded_embedding_text

    assert (
        degraded_embedding_text("PUMP 泵 16 bar", "The feed pump is P-204. Service it yearly.")
        == "[image] PUMP 泵 16 bar"
    )
    assert degraded_embedding_text("PUMP 16 bar", "给水泵是 P-204，压力见下图。") == "[图片] PUMP 16 bar"
    assert degraded_embedding_text("磁盘告警") == "[图片] 磁盘告警"  # (no context: the OCR text decides)
