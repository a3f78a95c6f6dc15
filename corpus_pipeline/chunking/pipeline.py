"""The step pipeline (seed 002 ``executePipeline``).

``run_steps`` feeds each step's output to the next, cleaning up before, between and after
steps: empty pieces dropped, duplicates (same section path, position and text) removed.
The parent/child build over a document (seed 003) is ``chunking.document``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import repeat
from operator import attrgetter, eq
from typing import Any

from corpus_pipeline.chunking.base import ChunkContext, make_piece
from corpus_pipeline.chunking.plan import Step
from corpus_pipeline.models import Piece

_STRATEGY = attrgetter("strategy")


def cleanup(pieces: Iterable[Piece]) -> list[Piece]:
    """Drop blank pieces and exact repeats (section path + position + text), keep order.

    Repeats are found by (section path, start) first and their texts compared only when
    that pair repeats, so no piece's whole text is hashed."""
    seen: dict[tuple[str, int], Any] = {}  # (path, start) -> the text kept there, or a list of them
    out: list[Piece] = []
    append = out.append
    for p in pieces:
        t = p.text
        if not t or t.isspace():
            continue
        key = (p.section_path, p.start)
        kept = seen.get(key)
        if kept is None:
            seen[key] = t
        elif type(kept) is list:
            if t in kept:
                continue
            kept.append(t)
        elif kept == t:
            continue
        else:
            seen[key] = [kept, t]
        append(p)
    return out


def run_steps(steps: Sequence[Step], pieces: Sequence[Piece], ctx: ChunkContext, *, fuse: bool = True) -> list[Piece]:
    """Each step over the previous step's output, cleaned up before, between and after.

    Every piece records the step that cut it (``strategy``): strategies stamp the pieces they
    make with their name; a piece a step passed through keeps the name it had, and one
    still without a name (or a copy a strategy made of an earlier step's piece) gets the
    step's. Two steps that can be fused (``Strategy.split_all_then``: STRUCTURE then
    RECURSIVE) run as one pass with the same result; ``fuse=False`` runs them apart.
    """
    current = cleanup(pieces)
    built = [step.build() for step in steps]
    i = 0
    while i < len(steps):
        strategy, name = built[i], steps[i].strategy
        # One input piece and a strategy whose output is clean: the cleanup would keep all.
        clean = len(current) == 1 and strategy.clean_output
        produced = None
        if fuse and i + 1 < len(steps):
            produced = strategy.split_all_then(current, ctx, built[i + 1])
        if produced is not None:  # a fused pair names every piece itself
            current = produced if clean and built[i + 1].clean_output else cleanup(produced)
            i += 2
            continue
        produced = strategy.split_all(current, ctx)
        i += 1
        if all(map(eq, map(_STRATEGY, produced), repeat(name))):  # (checked in C) all named by the step
            current = produced if clean else cleanup(produced)
            continue
        before: set[int] | None = None  # ids of the step's input, made only when needed
        stamped: list[Piece] = []
        append = stamped.append
        for p in produced:
            s = p.strategy
            if s == name:
                append(p)
                continue
            if s:
                if before is None:
                    before = {id(q) for q in current}
                if id(p) in before:  # passed through: keeps the name of the step that cut it
                    append(p)
                    continue
            # make_piece(...) is dataclasses.replace(p, strategy=name) at a fraction of the cost
            append(make_piece(
                p.text, p.start, p.end, p.section_path, p.chunk_type, p.overlap_chars, p.derived,
                p.block_index, name, p.metadata,
            ))  # fmt: skip
        current = cleanup(stamped)
    return current
