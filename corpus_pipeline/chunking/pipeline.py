"""The step pipeline (seed 002 ``executePipeline``) and the parent/child build (seed 003).

``run_steps`` feeds each step's output to the next, cleaning up before, between and after
steps: empty pieces dropped, duplicates (same section path, position and text) removed.
``chunk_document`` runs a plan over one document: the parent pipeline over the whole text,
then the child pipeline over each parent, so every child lies inside its parent's span;
children are numbered across the document and parents record their chunk range.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter, eq
from typing import Any

from corpus_pipeline.chunking.base import ChunkContext, make_piece
from corpus_pipeline.chunking.plan import Plan, Step
from corpus_pipeline.models import Chunk, ParentBlock, Piece

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


@dataclass(frozen=True)
class ChunkedDocument:
    parents: list[ParentBlock]
    children: list[Chunk]


def _versions(plan: Plan) -> dict[str, str]:
    return {s.strategy: s.build().version for s in plan.parent + plan.child}


def chunk_document(plan: Plan, ctx: ChunkContext, *, section_path: str = "") -> ChunkedDocument:
    text = ctx.text
    whole = Piece(text=text, start=0, end=len(text), section_path=section_path)
    versions = _versions(plan)
    parent_pieces = run_steps(plan.parent, [whole], ctx) if plan.parent else cleanup([whole])
    counter = ctx.token_counter

    child_rows: list[tuple[int, Piece]] = []
    for pi, parent in enumerate(parent_pieces):
        # Children never inherit the parent's overlap: their overlap is with the previous child.
        seed = dataclasses.replace(parent, overlap_chars=0)
        for child in run_steps(plan.child, [seed], ctx):
            child_rows.append((pi, child))

    child_tokens = counter.count_batch([c.text for _, c in child_rows]) if counter else [0] * len(child_rows)
    parent_tokens = counter.count_batch([p.text for p in parent_pieces]) if counter else [0] * len(parent_pieces)

    children = [
        _chunk(n, p, tok, versions, parent_index=pi) for n, ((pi, p), tok) in enumerate(zip(child_rows, child_tokens))
    ]
    parents: list[ParentBlock] = []
    by_parent: dict[int, list[int]] = {}
    for c in children:
        by_parent.setdefault(c.parent_index or 0, []).append(c.index)
    for pi, (p, tok) in enumerate(zip(parent_pieces, parent_tokens)):
        nos = by_parent.get(pi, [])
        parents.append(
            ParentBlock(
                index=pi,
                text=p.text,
                start_offset=p.start,
                end_offset=p.end,
                char_count=len(p.text),
                token_count=tok,
                section_path=p.section_path,
                strategy=p.strategy or ("DOCUMENT" if not plan.parent else ""),
                overlap_chars=p.overlap_chars,
                derived=p.derived,
                start_chunk_no=nos[0] if nos else -1,
                end_chunk_no=nos[-1] if nos else -1,
                child_count=len(nos),
                metadata=dict(p.metadata),
            )
        )
    return ChunkedDocument(parents, children)


def chunk_text(strategy_steps: Sequence[Step], ctx: ChunkContext) -> list[Chunk]:
    """Run steps over one text and number the result (``corpus preview --strategy``)."""
    text = ctx.text
    pieces = run_steps(strategy_steps, [Piece(text=text, start=0, end=len(text))], ctx)
    toks = ctx.token_counter.count_batch([p.text for p in pieces]) if ctx.token_counter else [0] * len(pieces)
    versions = {s.strategy: s.build().version for s in strategy_steps}
    return [_chunk(i, p, t, versions) for i, (p, t) in enumerate(zip(pieces, toks))]


def _chunk(index: int, p: Piece, tokens: int, versions: dict[str, str], parent_index: int | None = None) -> Chunk:
    """A numbered chunk record from a piece."""
    return Chunk(
        index=index,
        text=p.text,
        start_offset=p.start,
        end_offset=p.end,
        char_count=len(p.text),
        token_count=tokens,
        chunk_type=p.chunk_type,
        section_path=p.section_path,
        strategy=p.strategy,
        strategy_version=versions.get(p.strategy, ""),
        overlap_chars=p.overlap_chars,
        derived=p.derived,
        block_index=p.block_index,
        parent_index=parent_index,
        metadata=dict(p.metadata),
    )
