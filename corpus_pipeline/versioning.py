"""``strategy_version``: the name of one KB's chunking output, derived from what shapes it.

    p2-c32-1f0c9a7e
    │   │   └── 8 hex of sha256 over the canonical JSON of: the plan and every step's
    │   │       resolved config, the per-document overrides, the embedding model (its
    │   │       tokenizer sizes and counts tokens), and each used strategy's code version
    │   └────── child pipeline's strategy codes (``Strategy.code_letter``: STRUCTURE=1,
    └────────── parent pipeline's   RECURSIVE=2, SEMANTIC=3, LLM=4, w=SLIDING_WINDOW, p=PROPOSITION)

Stable across runs and machines (no paths, times or dict ordering in the hash); different
whenever the chunks could differ. Settings that cannot change chunks (descriptions,
include globs, batch sizes, search and quality settings) are not in it. Where versions are
kept on disk, which is active and which kb.yaml yields now: ``corpus_pipeline.store.versions``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from corpus_pipeline.chunking import registry
from corpus_pipeline.chunking.plan import Plan, Step
from corpus_pipeline.kbconfig import KnowledgeBase, PlanChoice
from corpus_pipeline.llm.planning import version_input as llm_version_input

#: Bump when the chunk tables built for the same input and strategy versions change
#: (columns, ids, image chunk rules, the fit to the model's window): every built version
#: is then stale and rebuilt (``corpus_pipeline.freshness``).
#: 2: image text cut at the model's token limit; 3: children skip parent overlap;
#: 4: one parent/child algorithm: children over the model's window are cut again, image text
#:    is cut into several chunks instead of truncated, records carry their code versions
CHUNK_TABLE_VERSION = "4"


def _abbrev(steps: tuple[Step, ...]) -> str:
    return "".join(s.strategy_class.code_letter() for s in steps)


def _plan_key(choice: PlanChoice) -> dict[str, Any]:
    if choice.auto:
        from corpus_pipeline.chunking.recommend import RECOMMENDER_VERSION

        return {
            "auto": True,
            "recommender": RECOMMENDER_VERSION,
            "parent": choice.parent.to_dict(),
            "child": choice.child.to_dict(),
        }
    return choice.plan.to_dict()


def version_inputs(kb: KnowledgeBase) -> dict[str, Any]:
    """Everything the version is a hash of, as plain JSON (shown by ``corpus versions``).

    For ``plan: auto`` the plan of each document comes from the recommender, so its rules'
    version and the user's per-strategy settings stand in for the plan, and every
    registered strategy's code version counts (any of them may be chosen).
    """
    if any(c.auto for c in kb.choices):
        used = registry.names()
    else:
        used = sorted({s for plan in kb.plans for s in plan.strategies})
    inputs: dict[str, Any] = {
        "plan": _plan_key(kb.default),
        "overrides": [{"match": o.match, "plan": _plan_key(o)} for o in kb.overrides],
        "embedding_model": kb.config.embedding.model,
        "strategy_code_versions": {n: registry.get(n).version for n in used},
    }
    embedding = kb.config.embedding.version_input()  # provider, prefix, window, tokenizer
    if embedding:
        inputs["embedding"] = embedding
    llm = llm_version_input(kb)  # the LLM model shapes chunks, for plans that call one
    if llm is not None:
        inputs["llm"] = llm
    return inputs


#: The longest version name: it names files, folders, tables and Dagster partition keys. The
#: plan's codes are cut past it; the digest, which hashes everything, stays and keeps it unique.
MAX_VERSION_CHARS = 48


def strategy_version(kb: KnowledgeBase) -> str:
    blob = json.dumps(version_inputs(kb), sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    digest = hashlib.sha256(blob.encode()).hexdigest()[:8]
    if kb.auto:
        return f"auto-{digest}"
    plan: Plan = kb.plan
    prefix = "c" + _abbrev(plan.child)
    if plan.parent:
        prefix = "p" + _abbrev(plan.parent) + "-" + prefix
    if len(prefix) + 1 + len(digest) > MAX_VERSION_CHARS:  # (a plan of many steps: the digest names it)
        prefix = prefix[: MAX_VERSION_CHARS - len(digest) - 1].rstrip("-")
    return f"{prefix}-{digest}"


def uses_strategy(kb: KnowledgeBase, strategy: str) -> bool:
    """Whether the KB's plan or any of its per-document overrides runs ``strategy``."""
    name = registry.get(strategy).name
    return any(c.auto or name in c.plan.strategies for c in kb.choices)
