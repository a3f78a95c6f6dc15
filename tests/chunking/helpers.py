"""Helpers for the chunking tests: run a strategy or plan on literal text, check invariants."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from corpus_pipeline.chunking import registry
from corpus_pipeline.chunking.base import ChunkContext
from corpus_pipeline.chunking.document import ChunkedDocument, SourceDocument, chunk_document
from corpus_pipeline.chunking.plan import build_plan
from corpus_pipeline.embedding.tokens import token_counter_for
from corpus_pipeline.models import Block, Chunk, Piece

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


def source(text: str, blocks: Sequence[Block] = (), *, version: str = "v-test", doc_id: str = "d") -> SourceDocument:
    return SourceDocument("kb", version, doc_id, "doc.md", "markdown", "hash", text, blocks)


def chunk(snapshot: str, text: str, ctx: ChunkContext | None = None, **settings: Any) -> ChunkedDocument:
    """Parents and children of ``text`` under a plan (``child_settings=`` / ``parent_settings=``
    as ``build_plan`` takes them), as ``corpus preview --plan`` and the index make them."""
    plan = build_plan(snapshot, settings.get("parent_settings"), settings.get("child_settings"))
    return chunk_document(source(text), plan, ctx or ctx_for(text))


def run(name: str, text: str, ctx: ChunkContext | None = None, **config: Any) -> list[Chunk]:
    """Numbered chunks, as ``corpus preview --strategy`` makes them (the plan CHILD:<name>)."""
    return chunk(f"CHILD:{registry.get(name).name}", text, ctx, child_settings={name: config}).children


def size_bound(name: str, cfg: Any) -> tuple[str, int]:
    """(unit, the largest size any chunk of ``name`` with ``cfg`` may have): what the
    strategy declares (``Strategy.size_bound``); STRUCTURE declares none (its sections are
    unbounded by design)."""
    bound = registry.get(name).size_bound(cfg)
    return (bound.unit, bound.max) if bound is not None else ("chars", 10**9)


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
