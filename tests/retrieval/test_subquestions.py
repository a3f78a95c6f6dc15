"""Sub-questions through the local LLM server (real HTTP): a compound question is split,
each part retrieved on both channels, parents de-duplicated, budgets per sub-question;
the LLM's answer is untrusted and cached; without an LLM nothing is sent."""

from __future__ import annotations

import json

import pytest
from support.openai_server import Reply

from corpus_pipeline.errors import ModelError
from corpus_pipeline.retrieval.subquestions import parse_sub_questions, split_question

from .tiny_index import _searcher

COMPOUND = "Which port does the web console use, and what is the severe disk usage alert threshold?"
PARTS = ["Which port does the web console use?", "What is the severe disk usage alert threshold?"]


def answer(parts: list[str]) -> Reply:
    return Reply.chat(json.dumps({"sub_questions": parts}))


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"sub_questions": ["a b c?", "d e f?"]}', ("a b c?", "d e f?")),
        ('{"sub_questions": ["a  b\\nc?", "A B C?", "x?"]}', ("a b c?", "x?")),  # duplicates go
        ('{"sub_questions": ["only one?"]}', ("Q",)),  # not compound: the question itself
        ('{"sub_questions": ["1", "2", "3", "4", "5", "6"]}', ("1", "2", "3", "4")),  # bounded
    ],
)
def test_the_answer_is_parsed_bounded_and_de_duplicated(content, expected):
    assert parse_sub_questions(content, "Q", 4) == expected


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "not JSON"),
        ('["a", "b"]', "no list"),
        ('{"sub_questions": [1, 2]}', "not text"),
        ('{"sub_questions": ["' + "x" * 400 + '", "b"]}', "over 300"),
        ('{"sub_questions": []}', "no list"),
    ],
)
def test_an_unusable_answer_is_refused(content, message):
    with pytest.raises(ModelError, match=message):
        parse_sub_questions(content, "Q", 4)


def test_a_compound_question_is_split_once_then_answered_from_the_cache(openai_server, make_client):
    llm = make_client(openai_server)
    openai_server.queue(answer(PARTS))
    subs = split_question(COMPOUND, llm, 4)
    assert subs.questions == tuple(PARTS) and subs.source == "llm"
    [call] = openai_server.calls()
    assert call.body["response_format"] == {"type": "json_object"} and COMPOUND in str(call.messages)
    again = split_question(COMPOUND, llm, 4)
    assert again.questions == tuple(PARTS) and len(openai_server.calls()) == 1


def test_no_llm_a_short_question_or_max_one_sends_nothing(openai_server, make_client):
    llm = make_client(openai_server)
    assert split_question(COMPOUND, None, 4).source == "whole"
    assert split_question("web console port?", llm, 4).questions == ("web console port?",)
    assert split_question(COMPOUND, llm, 1).questions == (COMPOUND,)
    assert openai_server.calls() == []


def test_a_failing_llm_keeps_the_question_whole_and_says_why(openai_server, make_client):
    openai_server.queue(Reply.error(500, "down"))
    subs = split_question(COMPOUND, make_client(openai_server), 4)
    assert subs.questions == (COMPOUND,) and subs.source == "fallback" and "500" in (subs.error or "")


def test_each_sub_question_is_retrieved_and_their_parents_merged(index, openai_server, make_client):
    vectors = {PARTS[0]: [0.0, 0.0, 1.0, 0.0], PARTS[1]: [0.0, 1.0, 0.0, 0.0], COMPOUND: [0.0, 0.0, 0.0, 1.0]}
    s = _searcher(index, vectors)
    s.llm = make_client(openai_server)
    openai_server.queue(answer(PARTS))
    res = s.search(COMPOUND)
    assert res.sub_questions is not None and res.sub_questions.questions == tuple(PARTS)
    by_part = {r.sub_question: r.parent_id for r in res.results if r.hits}
    ids = [r.parent_id for r in res.results]
    assert len(ids) == len(set(ids))  # each parent once, whichever sub-question found it
    assert res.results[0].parent_id == "P3" and res.results[1].parent_id == "P2"  # round robin: each part's best
    assert {0, 1} <= set(by_part)
    out = res.to_dict()
    assert out["sub_questions"] == {"questions": PARTS, "source": "llm"}
    assert {r["sub_question"] for r in out["results"]} == {0, 1}
