"""The recommender (seed 003 §5): features -> plan, with reasons a person can check."""

from __future__ import annotations

from chunking.helpers import COUNTER
from corpus_pipeline.chunking.plan import build_plan
from corpus_pipeline.chunking.recommend import recommend

MANUAL = "# Manual\n\n" + "".join(
    f"## Part {i}\n\n"
    + "The service restarts when the health check fails twice. " * 4
    + "\n\n"
    + "Operators read the logs first. Then they page the owner.\n\n"
    for i in range(4)
)


def test_structured_markdown_gets_structure_parents_and_semantic_children() -> None:
    rec = recommend(MANUAL, "markdown", token_counter=COUNTER)
    assert rec.snapshot == "PARENT:STRUCTURE;CHILD:SEMANTIC,RECURSIVE"
    assert rec.snapshot_numeric == "PARENT:1;CHILD:3,2"
    assert rec.reasons[0] == "parent STRUCTURE: markdown with 5 headings on 2 levels (structure HIGH)"
    assert rec.reasons[1].startswith("child SEMANTIC, RECURSIVE: high quality prose in 13 paragraphs")
    assert rec.child_settings == {}
    build_plan(rec.snapshot, rec.parent_settings, rec.child_settings)  # valid as given


def test_plain_text_without_headings_gets_recursive_parents() -> None:
    rec = recommend("Just one line of text.", "text")
    assert rec.snapshot == "PARENT:RECURSIVE;CHILD:RECURSIVE"
    assert rec.reasons == [
        "parent RECURSIVE: no headings found",
        "child RECURSIVE: 1 paragraph, 22 characters: too little for topic segmentation",
    ]


def test_a_long_section_adds_recursive_as_the_parent_size_guard() -> None:
    doc = "# A\n\n" + "Long text here. " * 300 + "\n\n# B\n\nshort\n"
    rec = recommend(doc, "markdown")
    assert rec.snapshot.startswith("PARENT:STRUCTURE,RECURSIVE;")
    assert "more than a parent block's 2200" in rec.reasons[1]


def test_chinese_text_is_sized_in_tokens_for_the_embedding_model() -> None:
    doc = "\n\n".join(["中文段落的内容需要按照词元来计算长度，否则会被模型截断。" * 5] * 4)
    rec = recommend(doc, "text", token_counter=COUNTER)
    assert rec.child_settings["RECURSIVE"] == {"size_unit": "tokens", "max_tokens": 240, "overlap_tokens": 30}
    assert any(r.startswith("child sizes in tokens") for r in rec.reasons)
    plan = build_plan(rec.snapshot, rec.parent_settings, rec.child_settings)
    assert plan.child[-1].config.size_unit == "tokens"


def test_low_quality_text_recommends_llm_only_when_enabled() -> None:
    junk = "\n".join(["@@ ## %% \ufffd\ufffd $$ ^^"] * 60)
    assert recommend(junk, "pdf").snapshot == "PARENT:RECURSIVE;CHILD:RECURSIVE"
    rec = recommend(junk, "pdf", llm_enabled=True)
    assert rec.snapshot == "PARENT:RECURSIVE;CHILD:LLM,RECURSIVE"
    assert rec.features["quality"] == "LOW"
