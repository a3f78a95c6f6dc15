"""Sub-questions (seed 003 §6, 子问题拆分): a compound question split by the KB's LLM.

"What port does the console use and how long are monthly snapshots kept?" asks two things
that live in two documents; retrieved as one, the stronger half takes all the evidence.
Split, each half is retrieved on both channels and gets its own evidence budget.

Only with an LLM configured (kb.yaml ``llm:``, see ``corpus_pipeline.llm``) and
``search.max_sub_questions`` ≥ 2; a question too short to be compound is never sent. The
answer is cached (the LLM client's cache: a repeated question costs no call) and not
trusted: it must be JSON ``{"sub_questions": [...]}`` of non-empty strings, each at most
``MAX_CHARS`` characters, at most ``max_sub_questions`` of them (more are dropped),
duplicates removed. Anything else, or an LLM failure, keeps the question whole, and says so.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from corpus_pipeline.errors import ModelError

if TYPE_CHECKING:
    from corpus_pipeline.llm import LLMClient

MAX_CHARS = 300
#: Questions shorter than this (in characters, CJK counting 3) are not split.
MIN_COMPOUND_CHARS = 24

PROMPT = """Split the user's question into the separate questions it asks, for a search engine.
Rules:
- A question that asks one thing stays one question: return it unchanged.
- Each sub-question must stand alone: repeat the subject instead of "it" or "they".
- Keep the user's language (Chinese stays Chinese) and every name, number and identifier.
- At most {n} sub-questions.
Answer with JSON only: {{"sub_questions": ["...", "..."]}}"""


@dataclass(frozen=True)
class SubQuestions:
    """The questions retrieved for one query, and where they came from: ``llm`` (split),
    ``whole`` (not sent, or the LLM kept it whole), ``fallback`` (the LLM failed: ``error``)."""

    questions: tuple[str, ...]
    source: str
    error: str | None = None


def _weight(text: str) -> int:
    return sum(3 if "\u4e00" <= c <= "\u9fff" else 1 for c in text)


def parse_sub_questions(content: str, question: str, max_n: int) -> tuple[str, ...]:
    """The sub-questions in an LLM answer; ModelError when the answer is not usable."""
    try:
        data = json.loads(content)
    except ValueError as exc:
        raise ModelError(f"the LLM's sub-questions are not JSON: {content[:120]!r}") from exc
    items = data.get("sub_questions") if isinstance(data, dict) else None
    if not isinstance(items, list) or not items:
        raise ModelError("the LLM's answer has no list 'sub_questions'")
    out: list[str] = []
    seen: set[str] = set()
    for item in items:
        if not isinstance(item, str):
            raise ModelError(f"a sub-question is not text: {item!r}"[:200])
        text = " ".join(item.split())
        if not text or len(text) > MAX_CHARS:
            raise ModelError(f"a sub-question is empty or over {MAX_CHARS} characters")
        key = re.sub(r"\W+", "", text.lower())
        if key not in seen:
            seen.add(key)
            out.append(text)
    return tuple(out[:max_n]) if len(out) > 1 else (question,)


def split_question(question: str, llm: LLMClient | None, max_n: int) -> SubQuestions:
    """The questions to retrieve for ``question`` (itself when no LLM, too short, or not compound)."""
    if llm is None or max_n < 2 or _weight(question) < MIN_COMPOUND_CHARS:
        return SubQuestions((question,), "whole")
    messages = [
        {"role": "system", "content": PROMPT.format(n=max_n)},
        {"role": "user", "content": question},
    ]
    try:
        answer = llm.chat(messages, json_object=True, max_tokens=400)
        parts = parse_sub_questions(answer.content, question, max_n)
    except ModelError as exc:
        return SubQuestions((question,), "fallback", str(exc)[:300])
    return SubQuestions(parts, "llm" if len(parts) > 1 else "whole")
