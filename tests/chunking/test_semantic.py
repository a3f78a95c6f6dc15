"""SEMANTIC: Jaccard topic shifts (no model) and embedding breakpoints (one batched call)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from chunking.helpers import ctx_for, split, texts
from corpus_pipeline.chunking.semantic import SemanticConfig, embedding_breaks, jaccard, jaccard_tokens
from corpus_pipeline.errors import ConfigError, ModelError

SPRING_MYSQL = (
    "Spring Boot is a fast framework for Spring apps. Spring Boot simplifies Spring configuration for apps. "
    "Spring Boot embeds Tomcat so Spring apps start fast. MySQL is the most popular relational database. "
    "MySQL supports transactions and index tuning in the database."
)


class TopicEmbedder:
    """A deterministic stand-in for the embedding model: one axis per topic word."""

    model_name = "topic-fake"
    dimension = 3

    def __init__(self) -> None:
        self.calls: list[int] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(len(texts))
        rows = []
        for t in texts:
            v = np.array([t.count("Spring"), t.count("MySQL"), 0.1], dtype=np.float32)
            rows.append(v / np.linalg.norm(v))
        return np.stack(rows)


def test_jaccard_tokens_are_words_and_single_cjk_characters() -> None:
    assert jaccard_tokens("Spring Boot 是 a 框架 v2") == {"spring", "boot", "是", "框", "架", "v2"}
    assert jaccard({"a", "b"}, {"b", "c"}) == pytest.approx(1 / 3)


def test_jaccard_mode_cuts_where_the_topic_changes() -> None:
    pieces = split("SEMANTIC", SPRING_MYSQL, min_chars=60, max_chars=400)
    assert texts(pieces) == [
        "Spring Boot is a fast framework for Spring apps. Spring Boot simplifies Spring configuration for apps. "
        "Spring Boot embeds Tomcat so Spring apps start fast.",
        "MySQL is the most popular relational database. MySQL supports transactions and index tuning in the database.",
    ]
    assert [p.chunk_type for p in pieces] == ["SEMANTIC_SEGMENT", "SEMANTIC_SEGMENT"]
    assert pieces[1].metadata == {"similarity": "jaccard", "boundary_score": 0.0526, "split_reason": "topic"}


def test_a_piece_within_min_is_kept_whole() -> None:
    assert texts(split("SEMANTIC", "Short. Text.", min_chars=60, max_chars=400)) == ["Short. Text."]


def test_no_chunk_passes_max_even_for_chinese_without_punctuation() -> None:
    doc = "没有标点的长中文文本" * 100
    pieces = split("SEMANTIC", doc)
    assert max(len(p.text) for p in pieces) <= 700


def test_embedding_mode_embeds_all_sentences_in_one_call_and_cuts_at_the_drop() -> None:
    emb = TopicEmbedder()
    pieces = split(
        "SEMANTIC",
        SPRING_MYSQL,
        ctx_for(SPRING_MYSQL, embedder=emb),
        similarity="embedding",
        min_chars=60,
        max_chars=400,
        breakpoint_type="percentile",
        breakpoint_amount=80,
    )
    assert emb.calls == [5]
    assert [p.text.split()[0] for p in pieces] == ["Spring", "MySQL"]
    assert pieces[1].metadata["breakpoint_type"] == "percentile"
    assert pieces[1].metadata["boundary_score"] < 0.1


def test_embedding_mode_without_a_model_is_an_error_not_a_fallback() -> None:
    with pytest.raises(ModelError, match=r"needs an embedding model, but none is configured.*similarity: jaccard"):
        split("SEMANTIC", SPRING_MYSQL, similarity="embedding", min_chars=60)


@pytest.mark.parametrize(
    ("kind", "amount", "expected"),
    [
        ("percentile", 75, [False, False, True, False, False]),  # the lowest quarter
        ("standard_deviation", 100, [False, False, True, False, False]),  # below mean - 1 std
        ("interquartile", 150, [False, False, True, False, False]),  # below Q1 - 1.5 IQR (0.68)
    ],
)
def test_breakpoint_detectors(kind: str, amount: float, expected: list[bool]) -> None:
    assert embedding_breaks([0.9, 0.85, 0.2, 0.88, 0.8], kind, amount) == expected


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"min_chars": 800, "max_chars": 700}, r"min_chars = 800 must be smaller than max_chars = 700"),
        ({"threshold": 1.5}, r"threshold = 1\.5 is out of range: allowed 0\.\.1"),
        ({"similarity": "cosine"}, r"similarity = 'cosine' is not allowed; choose one of 'jaccard', 'embedding'"),
        ({"breakpoint_amount": 150}, r"breakpoint_amount = 150\.0 is out of range for breakpoint_type = 'percentile'"),
    ],
)
def test_invalid_settings_are_refused(settings: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SemanticConfig(**settings)
