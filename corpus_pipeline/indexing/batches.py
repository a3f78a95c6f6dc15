"""How a partition's work is cut into batches that run in parallel (the fanned-out
``parsed_blocks``, ``image_descriptions``, ``parent_blocks``, ``child_chunks`` and
``chunk_embeddings`` assets; on Dagster's executors, one step each).

The cut never changes a result: a batch is a contiguous slice of the work in table
order, each item is processed alone (a document's parse, a text's vector), and the merge
puts every item back in its place; only the speed and the unit of retry change.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

#: Environment variable: how many batches a stage may run at once (``corpus index
#: --workers`` sets it; on a cluster, the number of worker slots). Default: 1.
WORKERS_ENV = "CORPUS_WORKERS"


@dataclass(frozen=True)
class BatchRule:
    """``min_size``: a batch is not cut smaller than this (a step costs a process and a
    model load); ``max_size``: nor larger (the unit a failure retries)."""

    min_size: int
    max_size: int


PARSE = BatchRule(min_size=8, max_size=200)  # documents
DESCRIBE = BatchRule(min_size=4, max_size=64)  # images (a vision call or an OCR pass each: seconds)
CHUNK = BatchRule(min_size=32, max_size=2000)  # documents (parents, then children)
EMBED = BatchRule(min_size=256, max_size=4096)  # distinct texts
RULES = {"parse": PARSE, "describe": DESCRIBE, "chunk": CHUNK, "embed": EMBED}
#: Environment variables that lower (or raise) the smallest batch of a stage.
MIN_SIZE_ENV = {
    "parse": "CORPUS_MIN_BATCH_DOCUMENTS",
    "describe": "CORPUS_MIN_BATCH_IMAGES",
    "chunk": "CORPUS_MIN_BATCH_DOCUMENTS",
    "embed": "CORPUS_MIN_BATCH_TEXTS",
}


def rule(stage: str, min_size: int = 0) -> BatchRule:
    """The batch rule of ``stage`` (``parse``, ``describe``, ``chunk`` or ``embed``); its
    smallest batch is ``min_size`` when > 0, else ``$CORPUS_MIN_BATCH_DOCUMENTS`` /
    ``_IMAGES`` / ``_TEXTS`` when set."""
    base = RULES[stage]
    if min_size <= 0:
        raw = os.environ.get(MIN_SIZE_ENV[stage], "").strip()
        min_size = int(raw) if raw.isdigit() and int(raw) > 0 else 0
    return BatchRule(min_size=min_size, max_size=max(min_size, base.max_size)) if min_size > 0 else base


def workers_from_env(default: int = 1) -> int:
    """``$CORPUS_WORKERS`` as a positive number (``default`` when unset or invalid)."""
    raw = os.environ.get(WORKERS_ENV, "").strip()
    try:
        return max(1, int(raw)) if raw else default
    except ValueError:
        return default


def batch_count(items: int, workers: int, rule: BatchRule) -> int:
    """How many batches ``items`` are cut into: enough that none passes ``max_size``, and
    one per worker when there is enough work for each to get ``min_size``."""
    if items <= 0:
        return 0
    by_size = math.ceil(items / rule.max_size)
    by_workers = min(max(1, workers), max(1, items // max(1, rule.min_size)))
    return max(by_size, by_workers)


def sizes(items: int, workers: int, rule: BatchRule) -> list[int]:
    """The sizes of the ``batch_count`` batches ``items`` are cut into: near-equal, the
    larger first; what ``split`` cuts by, and what a plan that streams its work (the
    embedding plan) fills."""
    n = batch_count(items, workers, rule)
    if n == 0:
        return []
    size, extra = divmod(items, n)
    return [size + (1 if i < extra else 0) for i in range(n)]


def split(items: Sequence[T], workers: int, rule: BatchRule) -> list[list[T]]:
    """``items`` cut into ``batch_count`` contiguous slices of near-equal size, in order."""
    out, start = [], 0
    for size in sizes(len(items), workers, rule):
        out.append(list(items[start : start + size]))
        start += size
    return out
