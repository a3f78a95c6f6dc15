"""PROPOSITION and LLM without an LLM: documented fallbacks, recorded in every chunk."""

from __future__ import annotations

from chunking.helpers import ctx_for, split, texts
from corpus_pipeline.chunking.llm_split import extract_json_array
from corpus_pipeline.chunking.proposition import parse_propositions, reassemble

DOC = "First fact about the system. Second fact here.\n\n" + "Another paragraph with more facts. " * 30


def test_proposition_without_llm_falls_back_to_sliding_window_with_max_chunk_size() -> None:
    pieces = split("PROPOSITION", DOC, max_chunk_size=300, fallback_overlap=0, min_chunk_size=10)
    assert texts(pieces) == texts(split("SLIDING_WINDOW", DOC, chunk_size=300, chunk_overlap=0, min_chunk_size=10))
    assert {(p.metadata["fallback_from"], p.metadata["fallback_reason"]) for p in pieces} == {
        ("PROPOSITION", "no LLM configured")
    }


def test_llm_split_is_off_by_default_and_falls_back_to_jaccard_semantic() -> None:
    pieces = split("LLM", DOC)
    assert texts(pieces) == texts(split("SEMANTIC", DOC))
    assert {p.metadata["fallback_reason"] for p in pieces} == {"llm_enabled is false"}
    assert {p.metadata["fallback_to"] for p in pieces} == {"SEMANTIC"}


def test_llm_split_enabled_without_a_client_says_so() -> None:
    pieces = split("LLM", DOC, ctx_for(DOC), llm_enabled=True)
    assert {p.metadata["fallback_reason"] for p in pieces} == {"no LLM client configured"}


def test_llm_answers_are_parsed_leniently() -> None:
    assert extract_json_array('Sure! ```json\n["a", " b ", "", 3]\n``` done') == ["a", "b"]
    assert extract_json_array("no array here") == []
    assert extract_json_array("[not json]") == []
    assert parse_propositions("- GPT-4 was released in 2023\n2. It has many parameters\nok\n", 10) == [
        "GPT-4 was released in 2023",
        "It has many parameters",
    ]


def test_propositions_are_regrouped_up_to_the_size_with_their_range() -> None:
    props = ["a" * 40, "b" * 40, "c" * 40, "d" * 5]
    assert reassemble(props, max_chars=90, min_chars=10) == [
        ("a" * 40 + "\n" + "b" * 40, {"proposition_range": "0-1", "proposition_count": 2}),
        ("c" * 40 + "\n" + "d" * 5, {"proposition_range": "2-3", "proposition_count": 2}),
    ]
