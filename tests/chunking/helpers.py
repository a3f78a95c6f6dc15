"""Helpers for the chunking tests: run a strategy or plan on literal text, check invariants."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from corpus_pipeline.chunking import registry
from corpus_pipeline.chunking.base import ChunkContext
from corpus_pipeline.chunking.pipeline import chunk_text
from corpus_pipeline.chunking.plan import Role, Step
from corpus_pipeline.models import Block, Chunk, Piece
from corpus_pipeline.tokens import token_counter_for

COUNTER = token_counter_for()


def ctx_for(text: str, blocks: Sequence[Block] = (), embedder: Any = None) -> ChunkContext:
    return ChunkContext(text=text, token_counter=COUNTER, blocks=blocks, embedder=embedder)


def split(name: str, text: str, ctx: ChunkContext | None = None, **config: Any) -> list[Piece]:
    """The pieces strategy ``name`` cuts the whole of ``text`` into."""
    cls = registry.get(name)
    ctx = ctx or ctx_for(text)
    return cls(cls.config_class(**config)).split(Piece(text, 0, len(text)), ctx)


def texts(pieces: Sequence[Piece | Chunk]) -> list[str]:
    return [p.text for p in pieces]


def run(name: str, text: str, ctx: ChunkContext | None = None, **config: Any) -> list[Chunk]:
    """Numbered chunks, as ``corpus preview --strategy`` makes them."""
    cls = registry.get(name)
    step = Step(cls.name, Role.PRIMARY, cls.config_class(**config))
    return chunk_text([step], ctx or ctx_for(text))


# Documented exceptions to "every chunk within the configured size".
def size_bound(name: str, cfg: Any) -> tuple[str, int]:
    """(unit, the largest size any chunk of ``name`` with ``cfg`` may have)."""
    if name == "RECURSIVE":
        return cfg.size_unit, cfg.limit
    if name == "SLIDING_WINDOW":
        return cfg.size_unit, int(cfg.chunk_size * 1.5)  # kept / merged paragraphs, up to 1.5x
    if name == "SEMANTIC":
        return cfg.size_unit, cfg.max_size
    if name == "LLM":  # the SEMANTIC fallback
        return "chars", cfg.fallback_max_chars
    if name == "PROPOSITION":  # the SLIDING_WINDOW fallback
        return "chars", int(cfg.max_chunk_size * 1.5)
    if name == "STRUCTURE":  # sections are unbounded by design; the fallback is bounded
        return "chars", 10**9
    raise AssertionError(name)


def check_invariants(name: str, text: str, pieces: Sequence[Piece], ctx: ChunkContext, cfg: Any) -> None:
    """The contract every strategy keeps (see DESIGN.md, 'Contracts')."""
    cls = registry.get(name)
    unit, bound = size_bound(name, cfg)
    meter = ctx.meter(unit)
    prev_own_start, prev_end = -1, -1
    covered = bytearray(len(text))
    for p in pieces:
        assert 0 <= p.start < p.end <= len(text), p
        if cls.keeps_source_text or not p.derived:
            assert text[p.start : p.end] == p.text, f"{name}: text is not source[start:end] for {p}"
        assert p.text == p.text.strip(), f"{name}: untrimmed piece {p.text!r}"
        own = p.start + p.overlap_chars
        assert 0 <= p.overlap_chars < len(p.text) or p.overlap_chars == 0
        assert own > prev_own_start, f"{name}: pieces out of order"
        assert own >= prev_end, f"{name}: own spans overlap ({own} < {prev_end})"
        if p.overlap_chars:
            assert p.start < prev_end, f"{name}: overlap does not come from the previous piece"
        prev_own_start, prev_end = own, p.end
        size = meter.measure(p.start, p.end)
        assert size <= bound or (p.metadata.get("hard_cut") and unit == "tokens" and size <= bound + 2), (
            f"{name}: piece of {size} {unit} over the bound {bound}: {p.text[:60]!r}"
        )
        covered[p.start : p.end] = b"\x01" * (p.end - p.start)
    missing = [i for i, c in enumerate(text) if not c.isspace() and not covered[i]]
    assert not missing, f"{name}: characters not in any chunk at {missing[:5]}: {text[missing[0] : missing[0] + 20]!r}"
