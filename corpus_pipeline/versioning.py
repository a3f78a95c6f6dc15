"""``strategy_version``: the name of one KB's chunking output, derived from what shapes it.

    p2-c32-1f0c9a7e
    │   │   └── 8 hex of sha256 over the canonical JSON of: the plan and every step's
    │   │       resolved config, the per-document overrides, the embedding model (its
    │   │       tokenizer sizes and counts tokens), and each used strategy's code version
    │   └────── child pipeline's strategy codes (STRUCTURE=1, RECURSIVE=2, SEMANTIC=3,
    └────────── parent pipeline's         LLM=4; w=SLIDING_WINDOW, p=PROPOSITION)

Stable across runs and machines (no paths, times or dict ordering in the hash); different
whenever the chunks could differ. Settings that cannot change chunks (descriptions,
include globs, batch sizes) are not in it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from corpus_pipeline.chunking import registry
from corpus_pipeline.chunking.plan import Plan
from corpus_pipeline.errors import ConfigError
from corpus_pipeline.kbconfig import KBConfig, KnowledgeBase, kb_from_config
from corpus_pipeline.llm.settings import version_input as llm_version_input

_LETTERS = {"SLIDING_WINDOW": "w", "PROPOSITION": "p"}


def _abbrev(names: list[str]) -> str:
    out = []
    for n in names:
        code = registry.get(n).code
        out.append(str(code) if code is not None else _LETTERS.get(n, n[0].lower()))
    return "".join(out)


def _plan_key(plan: Plan) -> dict[str, Any]:
    return plan.to_dict()


def version_inputs(kb: KnowledgeBase) -> dict[str, Any]:
    """Everything the version is a hash of, as plain JSON (shown by ``corpus versions``).

    For ``plan: auto`` the plan of each document comes from the recommender, so its rules'
    version and the user's per-strategy settings stand in for the plan, and every
    registered strategy's code version counts (any of them may be chosen).
    """
    entries = [(kb.auto, kb.plan, kb.config.chunking.parent, kb.config.chunking.child)] + [
        (o.auto, o.plan, o.parent_settings, o.child_settings) for o in kb.overrides
    ]

    def plan_key(auto: bool, plan: Plan, parent: Any, child: Any) -> dict[str, Any]:
        if auto:
            from corpus_pipeline.chunking.recommend import RECOMMENDER_VERSION

            return {"auto": True, "recommender": RECOMMENDER_VERSION, "parent": parent, "child": child}
        return _plan_key(plan)

    if any(e[0] for e in entries):
        used = registry.names()
    else:
        used = sorted({s for _, p, _, _ in entries for s in p.strategies})
    inputs = {
        "plan": plan_key(*entries[0]),
        "overrides": [{"match": o.match, "plan": plan_key(*e)} for o, e in zip(kb.overrides, entries[1:])],
        "embedding_model": kb.config.embedding.model,
        "strategy_code_versions": {n: registry.get(n).version for n in used},
    }
    llm = llm_version_input(kb)  # the LLM model shapes chunks, for plans that call one
    if llm is not None:
        inputs["llm"] = llm
    return inputs


def strategy_version(kb: KnowledgeBase) -> str:
    blob = json.dumps(version_inputs(kb), sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    digest = hashlib.sha256(blob.encode()).hexdigest()[:8]
    if kb.auto:
        return f"auto-{digest}"
    prefix = "c" + _abbrev([s.strategy for s in kb.plan.child])
    if kb.plan.parent:
        prefix = "p" + _abbrev([s.strategy for s in kb.plan.parent]) + "-" + prefix
    return f"{prefix}-{digest}"


# --------------------------------------------------------------------------- registry
# Each version's configuration is kept under warehouse/versions/<kb>/<version>.json, so a
# partition can be re-materialized later with exactly the settings that named it, even
# after kb.yaml has moved on (backfills of old versions, rollbacks).


def _version_file(versions_dir: Path, kb: str, version: str) -> Path:
    return versions_dir / kb / f"{version}.json"


def register_version(versions_dir: Path, kb: KnowledgeBase) -> str:
    """Record the KB's current configuration under its version; returns the version."""
    version = strategy_version(kb)
    f = _version_file(versions_dir, kb.name, version)
    if not f.exists():
        f.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "kb": kb.name,
            "strategy_version": version,
            "registered_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "config": kb.config.model_dump(mode="json"),
            "inputs": version_inputs(kb),
        }
        tmp = f.with_suffix(".tmp")
        tmp.write_text(json.dumps(payload, ensure_ascii=False, indent=2, sort_keys=True), encoding="utf-8")
        tmp.replace(f)
    return version


def load_version(versions_dir: Path, kb_dir: Path, version: str) -> KnowledgeBase:
    """The KB as it was configured when ``version`` was registered."""
    f = _version_file(versions_dir, kb_dir.name, version)
    if not f.exists():
        known = sorted(p.stem for p in (versions_dir / kb_dir.name).glob("*.json"))
        raise ConfigError(
            f"strategy_version {version!r} is not a version of knowledge base {kb_dir.name!r} "
            f"(known: {', '.join(known) or 'none'}); run `corpus index --kb {kb_dir.name}` to register "
            "the current one."
        )
    payload = json.loads(f.read_text(encoding="utf-8"))
    kb = kb_from_config(kb_dir, KBConfig.model_validate(payload["config"]))
    if strategy_version(kb) != version:
        raise ConfigError(
            f"{f}: the configuration registered as {version!r} now yields {strategy_version(kb)!r}: a "
            "strategy's code version or defaults changed since. This version cannot be rebuilt; index "
            "the KB again to register the current one."
        )
    return kb


def known_versions(versions_dir: Path, kb: str) -> list[str]:
    d = versions_dir / kb
    return sorted(p.stem for p in d.glob("*.json")) if d.is_dir() else []


def active_version(versions_dir: Path, kb: str) -> str | None:
    """The version search reads for ``kb`` (None before the first successful index)."""
    f = versions_dir / kb / "ACTIVE"
    return f.read_text(encoding="utf-8").strip() or None if f.exists() else None


def set_active(versions_dir: Path, kb: str, version: str) -> None:
    if version not in known_versions(versions_dir, kb):
        raise ConfigError(
            f"{version!r} is not a registered version of {kb!r}: {', '.join(known_versions(versions_dir, kb))}"
        )
    f = versions_dir / kb / "ACTIVE"
    tmp = f.with_suffix(".tmp")
    tmp.write_text(version + "\n", encoding="utf-8")
    tmp.replace(f)


def version_info(versions_dir: Path, kb: str, version: str) -> dict[str, Any]:
    f = _version_file(versions_dir, kb, version)
    try:
        return json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def versions_by_age(versions_dir: Path, kb: str) -> list[str]:
    """Registered versions, newest first."""
    vs = known_versions(versions_dir, kb)
    return sorted(vs, key=lambda v: (version_info(versions_dir, kb, v).get("registered_at", ""), v), reverse=True)


def versions_to_retire(versions_dir: Path, kb: str, keep: int) -> list[str]:
    """Versions beyond the ``keep`` newest, never the active one."""
    active = active_version(versions_dir, kb)
    kept = [v for v in versions_by_age(versions_dir, kb) if v == active]
    out = []
    for v in versions_by_age(versions_dir, kb):
        if v == active:
            continue
        if len(kept) < keep:
            kept.append(v)
        else:
            out.append(v)
    return out


VERSIONED_ASSETS = ("parent_blocks", "child_chunks", "chunk_embeddings", "retrieval_eval")


def retire_version(warehouse: Path, versions_dir: Path, kb: str, version: str) -> None:
    """Delete a version's Parquet partitions, LanceDB table, state and registration."""
    from corpus_pipeline.store.lance import drop_search_table

    if version == active_version(versions_dir, kb):
        raise ConfigError(f"{version!r} is the active version of {kb!r}; activate another one before retiring it")
    for asset in VERSIONED_ASSETS:
        shutil.rmtree(warehouse / asset / f"kb={kb}" / f"strategy_version={version}", ignore_errors=True)
    drop_search_table(warehouse / "lancedb", kb, version)
    (warehouse / "state" / kb / f"index-{version}.json").unlink(missing_ok=True)
    _version_file(versions_dir, kb, version).unlink(missing_ok=True)


def uses_strategy(kb: KnowledgeBase, strategy: str) -> bool:
    """Whether the KB's plan or any of its per-document overrides runs ``strategy``."""
    name = registry.get(strategy).name
    return any(name in p.strategies for p in [kb.plan, *(o.plan for o in kb.overrides)])
