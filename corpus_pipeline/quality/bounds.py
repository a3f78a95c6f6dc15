"""Thresholds of the quality checks, derived from the KB's plan and embedding model.

The size bound of a pipeline is the bound of its last step that declares one (a later
step without a bound only splits further, so the earlier bound still holds). Each strategy
declares its own (``Strategy.size_bound``):

    RECURSIVE       max_chars, or max_tokens when size_unit is tokens
    SLIDING_WINDOW  1.5 x chunk_size (a kept paragraph or a merged small chunk may reach it);
                    min_chunk_size as the minimum
    SEMANTIC        max_chars / max_tokens; min_chars / min_tokens as the minimum
    PROPOSITION     1.5 x max_chunk_size (its fallback is SLIDING_WINDOW); min_chunk_size
    LLM             max(max_piece_chars, fallback_max_chars) characters
    STRUCTURE       none: sections are not size-bounded

A child pipeline with no bound inherits its parent pipeline's (children lie inside
parents). Values set under ``quality:`` in ``kb.yaml`` replace the derived ones. Without
a declared minimum the minimum is a tenth of the bound. The token limit is the embedding
model's (``max_seq_length - 2``); the expected vector dimension is read from the model
folder.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from corpus_pipeline.chunking.plan import Plan, Step
from corpus_pipeline.errors import ConfigError
from corpus_pipeline.kbconfig import KnowledgeBase
from corpus_pipeline.quality.config import QuantileRanges, SizeQuality
from corpus_pipeline.quality.thresholds import QUANTILES, SizeLimits, TableThresholds, Thresholds

# --------------------------------------------------------------------------- plan bounds


def pipeline_limits(steps: Sequence[Step], role: str) -> SizeLimits | None:
    """The bound of a pipeline: that of its last step that declares one
    (``Strategy.size_bound``; a later step without a bound only splits further)."""
    for step in reversed(steps):
        bound = step.strategy_class.size_bound(step.config)
        if bound is None:
            continue
        desc = f"{role} {bound.what}={bound.max}"
        if bound.unit == "tokens":
            return SizeLimits(max_tokens=bound.max, min_tokens=bound.min, source=desc)
        return SizeLimits(max_chars=bound.max, min_chars=bound.min, source=desc)
    return None


def plan_limits(plan: Plan, table: str) -> SizeLimits:
    """Limits of ``table`` ("child" or "parent") under one plan."""
    parent = pipeline_limits(plan.parent, "parent") if plan.parent else None
    if table == "parent":
        return parent or SizeLimits(source="parent pipeline declares no size bound")
    child = pipeline_limits(plan.child, "child")
    return child or parent or SizeLimits(source="child and parent pipelines declare no size bound")


def _apply(limits: SizeLimits, cfg: SizeQuality) -> SizeLimits:
    """Configured values replace derived ones; a missing minimum is a tenth of the bound."""
    src = limits.source
    mx_c = cfg.max_chars if cfg.max_chars is not None else limits.max_chars
    mx_t = cfg.max_tokens if cfg.max_tokens is not None else limits.max_tokens
    if cfg.max_chars is not None or cfg.max_tokens is not None:
        src = "kb.yaml quality"
    mn_c = cfg.min_chars if cfg.min_chars is not None else limits.min_chars
    mn_t = cfg.min_tokens if cfg.min_tokens is not None else limits.min_tokens
    if mn_c is None and mn_t is None:
        if mx_c is not None:
            mn_c = mx_c // 10
        elif mx_t is not None:
            mn_t = mx_t // 10
    return SizeLimits(mx_c, mx_t, mn_c, mn_t, src)


def _ranges(
    configured: QuantileRanges | None, derived: dict[str, tuple[float | None, float | None]]
) -> dict[str, tuple[float | None, float | None]]:
    out = dict(derived)
    if configured is not None:
        for q in QUANTILES:
            v = getattr(configured, q)
            if v is not None:
                out[q] = (v[0], v[1])
    return {q: out[q] for q in QUANTILES if q in out}


def _table(kb: KnowledgeBase, table: str, cfg: SizeQuality, token_limit: int | None) -> TableThresholds:
    default = _apply(plan_limits(kb.plan, table), cfg)
    overrides = tuple(
        (ov.match, _apply(plan_limits(ov.plan, table), cfg)) for ov in kb.overrides if ov.match is not None
    )
    every = [default] + [lim for _, lim in overrides]
    chars = [lim.max_chars for lim in every if lim.max_chars is not None]
    toks = [lim.max_tokens for lim in every if lim.max_tokens is not None]
    char_q: dict[str, tuple[float | None, float | None]] = {}
    tok_q: dict[str, tuple[float | None, float | None]] = {}
    if chars:
        char_q = {"p50": (min(chars) // 20, None), "p95": (None, max(chars))}
    if toks:
        tok_q = {"p50": (min(toks) // 20, None), "p95": (None, max(toks))}
    if token_limit is not None:
        hi = tok_q.get("p95", (None, None))[1]
        tok_q["p95"] = (None, min(hi, token_limit) if hi is not None else token_limit)
    return TableThresholds(
        default=default,
        overrides=overrides,
        small_share=cfg.small_share,
        char_count=_ranges(cfg.char_count, char_q),
        token_count=_ranges(cfg.token_count, tok_q),
    )


def model_dimension(model: str) -> int | None:
    """The vector size of a local sentence-transformers model, read from its files
    (last Dense layer's ``out_features``, else the pooling dimension); None if unknown."""
    from corpus_pipeline.embedding.tokens import resolve_model_path

    path = resolve_model_path(model)
    if path is None:
        return None
    dim: int | None = None
    modules = path / "modules.json"
    try:
        entries = json.loads(modules.read_text(encoding="utf-8")) if modules.exists() else []
        for m in entries:
            cfg_file = Path(path, m.get("path", ""), "config.json")
            if not m.get("path") or not cfg_file.exists():
                continue
            cfg = json.loads(cfg_file.read_text(encoding="utf-8"))
            if "out_features" in cfg:
                dim = int(cfg["out_features"])
            elif "word_embedding_dimension" in cfg:
                dim = int(cfg["word_embedding_dimension"])
        if dim is None and (path / "config.json").exists():
            hidden = json.loads((path / "config.json").read_text(encoding="utf-8")).get("hidden_size")
            dim = int(hidden) if hidden else None
    except (OSError, ValueError, TypeError):
        return None
    return dim


def resolve_thresholds(kb: KnowledgeBase) -> Thresholds:
    """The thresholds of a KB: ``kb.yaml``'s ``quality:`` over defaults from its plans and
    embedding model. Raises ConfigError for a token limit above the model's."""
    from corpus_pipeline.embedding.tokens import token_counter_for

    q = kb.config.quality
    model = kb.config.embedding.model
    model_limit = token_counter_for(kb.config.embedding).max_tokens
    limit = model_limit
    if q.token_limit is not None:
        if q.token_limit > model_limit:
            raise ConfigError(
                f"{kb.path / 'kb.yaml'}: quality.token_limit = {q.token_limit} is above the limit of the "
                f"embedding model {model!r} ({model_limit} tokens); allowed 8..{model_limit}. Longer chunks "
                "would be truncated silently: lower it or leave it unset."
            )
        limit = q.token_limit
    return Thresholds(
        token_limit=limit,
        token_slack=q.token_slack,
        child=_table(kb, "child", q.child, limit),
        parent=_table(kb, "parent", q.parent, None),
        embedding_dimension=q.embedding.dimension or model_dimension(model),
        severity={k: v.upper() for k, v in q.severity.items()},
    )
