"""Named configurations: kb.yaml fragments, as plain dicts.

``INDEX_CONFIGS`` are merged into a fresh ``kb.yaml`` before ``corpus index`` (they may change
the strategy version: chunking, embedding, ...). ``SEARCH_CONFIGS`` become the ``search:``
section, which does not change the version: the same index is evaluated under each.

Add one by adding a line here, or give it inline on the command line:

    --index-config 'bge={"embedding": {"model": "/models/bge-small-zh"}}'
    --search-config 'k20={"vector_top_k": 20, "keyword_top_k": 20}'
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

Config = dict[str, Any]

INDEX_CONFIGS: dict[str, Config] = {
    # whatever the product's defaults are (no kb.yaml keys at all)
    "default": {},
    "minilm": {"embedding": {"model": "all-MiniLM-L6-v2"}},
    "e5": {"embedding": {"model": "multilingual-e5-small"}},
    "structure-semantic": {"chunking": {"plan": "PARENT:STRUCTURE;CHILD:SEMANTIC,RECURSIVE"}},
    "recursive": {"chunking": {"plan": "PARENT:RECURSIVE;CHILD:RECURSIVE"}},
}

SEARCH_CONFIGS: dict[str, Config] = {
    "default": {},
    # seed 003's numbers where the product's defaults differ (8 hits a channel, boosts,
    # three snippet lines, budgets shared equally), on the product's relative vector gate
    "seed": {
        "vector_top_k": 8,
        "keyword_top_k": 8,
        "extra_hit_boost": 0.12,
        "multi_channel_boost": 0.10,
        "max_hit_snippets": 3,
        "evidence_fill": "equal",
    },
    # the absolute vector gate and the keyword gate open. Not every gate: the product's
    # relative vector gate (vector_relative_floor, at least 0: hits below the query's
    # baseline similarity are still dropped) and the vector channel's abstention on queries
    # its model cannot read (max_unknown_token_share) stay as they are
    "no-gates": {"min_vector_similarity": -1.0, "keyword_relative_score_floor": 0.0},
    # ... and the vector channel never abstains (an English model on Chinese questions)
    "no-gates-unk": {
        "min_vector_similarity": -1.0,
        "keyword_relative_score_floor": 0.0,
        "max_unknown_token_share": 1.0,
    },
    "wide": {"vector_top_k": 30, "keyword_top_k": 30, "candidate_top_k": 40},
}

DEFAULT_INDEX = ["default", "minilm"]
DEFAULT_SEARCH = ["default", "no-gates", "wide"]


def resolve(spec: str, known: Mapping[str, Config], kind: str) -> tuple[str, Config]:
    """``NAME`` (one of ``known``) or ``NAME=JSON`` (an inline kb.yaml fragment)."""
    if "=" in spec:
        name, _, raw = spec.partition("=")
        name = name.strip()
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValueError(f"--{kind}-config {spec!r}: the part after '=' is not valid JSON: {exc}") from exc
        if not name or not isinstance(value, dict):
            raise ValueError(f"--{kind}-config {spec!r}: needs NAME=<JSON object>")
        return name, value
    if spec not in known:
        raise ValueError(f"--{kind}-config {spec!r}: unknown; known: {', '.join(known)} (or NAME=<JSON object>)")
    return spec, json.loads(json.dumps(known[spec]))  # a deep copy


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> Config:
    """``over`` merged into ``base``: nested mappings merged key by key, anything else replaced."""
    out: Config = dict(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = v
    return out
