"""Whether a KB's chunking calls an LLM, and what of its ``llm:`` section names its chunks."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from corpus_pipeline.chunking.plan import Plan
    from corpus_pipeline.kbconfig import KnowledgeBase


def plans_call_llm(plans: Iterable[Plan]) -> bool:
    """Whether any step of these plans may call an LLM (``Strategy.calls_llm``)."""
    return any(plan.calls_llm for plan in plans)


def version_input(kb: KnowledgeBase) -> dict[str, Any] | None:
    """What of kb.yaml's ``llm:`` section names the KB's chunks (the model shapes them), or
    None when no document of the KB can be chunked by a strategy that calls an LLM (then
    the section changes no chunk)."""
    if not kb.calls_llm:
        return None
    return {"model": kb.config.llm.model, "enabled": kb.config.llm.enabled}


def kb_calls_llm(kb: KnowledgeBase) -> bool:
    """Whether any document of the KB may be chunked by a strategy that calls an LLM."""
    return kb.calls_llm
