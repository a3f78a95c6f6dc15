"""PROPOSITION: an LLM rewrites the text as atomic propositions, regrouped into chunks.

Seed 000 §5.3. With an LLM (issue 5): the piece is cut into batches of whole paragraphs
of at most ``max_input_chars_per_batch``; each batch is sent to the LLM, whose answer
(one proposition per line, ``- `` or ``1. `` prefixes) is parsed by ``parse_propositions``;
propositions are regrouped in order into chunks of at most ``max_chunk_size`` characters
(``reassemble``), ``PROPOSITION`` chunks with ``derived=True`` and the span of the batch
they came from, and ``metadata`` ``proposition_range`` / ``proposition_count``.

Without one (the seed's fallback, and the only path until issue 5 lands): the piece is
chunked by ``fallback_strategy`` (SLIDING_WINDOW) with ``chunk_size = max_chunk_size``
and ``chunk_overlap = fallback_overlap``, and every chunk records
``metadata["fallback_from"] = "PROPOSITION"`` and ``fallback_reason``. Fallback chunks
keep the source text, so their offsets are exact.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from corpus_pipeline.chunking import text as tx
from corpus_pipeline.chunking.base import ChunkContext, Strategy
from corpus_pipeline.chunking.params import StrategyConfig, param
from corpus_pipeline.chunking.registry import register
from corpus_pipeline.chunking.sliding_window import SlidingWindow, SlidingWindowConfig
from corpus_pipeline.errors import ConfigError
from corpus_pipeline.models import Piece

_PREFIX = re.compile(r"^\s*(?:[-*•]\s+|\d+[.)、]\s+)")


@dataclass(frozen=True)
class PropositionConfig(StrategyConfig):
    max_input_chars_per_batch: int = param(3000, ge=200, le=32000, doc="characters of source per LLM call")
    max_propositions_per_batch: int = param(50, ge=1, le=500, doc="propositions kept from one LLM answer")
    max_chunk_size: int = param(500, ge=100, le=8000, doc="largest regrouped chunk in characters (and fallback chunk_size)")
    min_chunk_size: int = param(50, ge=0, le=8000, doc="a last regrouped chunk smaller than this joins the previous one")
    fallback_strategy: str = param("SLIDING_WINDOW", choices=("SLIDING_WINDOW",), doc="strategy used without an LLM")
    fallback_overlap: int = param(50, ge=0, le=4000, doc="chunk_overlap of the fallback (at most half of max_chunk_size)")

    def check(self) -> None:
        if self.min_chunk_size >= self.max_chunk_size:
            raise ConfigError(
                f"min_chunk_size = {self.min_chunk_size} must be smaller than max_chunk_size = "
                f"{self.max_chunk_size}; allowed 0..{self.max_chunk_size - 1}."
            )
        if self.fallback_overlap > self.max_chunk_size // 2:
            raise ConfigError(
                f"fallback_overlap = {self.fallback_overlap} is more than half of max_chunk_size = "
                f"{self.max_chunk_size}; allowed 0..{self.max_chunk_size // 2}."
            )

    def fallback_config(self) -> SlidingWindowConfig:
        return SlidingWindowConfig(
            chunk_size=self.max_chunk_size,
            chunk_overlap=self.fallback_overlap,
            min_chunk_size=min(self.min_chunk_size, self.max_chunk_size),
        )


def parse_propositions(answer: str, limit: int) -> list[str]:
    """Propositions from an LLM answer: one per line, list prefixes removed, lines of five
    characters or fewer ignored (the seed's parser), at most ``limit``."""
    out: list[str] = []
    for line in answer.splitlines():
        line = _PREFIX.sub("", line).strip()
        if len(line) > 5:
            out.append(line)
            if len(out) >= limit:
                break
    return out


def batches(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """Spans of whole paragraphs of at most ``max_chars`` (a longer paragraph is cut)."""
    from corpus_pipeline.chunking.recursive import split_spans
    from corpus_pipeline.chunking.sizes import SizeMeter

    return [(a, b) for a, b, _ in split_spans(text, start, end, SizeMeter(text), max_chars)]


def reassemble(props: list[str], max_chars: int, min_chars: int, first_index: int = 0) -> list[tuple[str, dict[str, Any]]]:
    """Group propositions in order into texts of at most ``max_chars`` (one per line)."""
    groups: list[list[int]] = []
    size = 0
    for i, p in enumerate(props):
        if groups and size + len(p) + 1 <= max_chars:
            groups[-1].append(i)
            size += len(p) + 1
        else:
            groups.append([i])
            size = len(p)
    if len(groups) > 1 and sum(len(props[i]) for i in groups[-1]) < min_chars:
        last = groups.pop()
        groups[-1].extend(last)
    out = []
    for g in groups:
        a, b = g[0] + first_index, g[-1] + first_index
        out.append(("\n".join(props[i] for i in g), {"proposition_range": f"{a}-{b}", "proposition_count": len(g)}))
    return out


@register
class Proposition(Strategy):
    name = "PROPOSITION"
    code = None
    version = "v1"
    description = (
        "An LLM rewrites the text as atomic facts, regrouped into chunks. Without an LLM it falls "
        "back to SLIDING_WINDOW (recorded in metadata)."
    )
    config_class = PropositionConfig
    config: PropositionConfig
    keeps_source_text = False

    def split(self, piece: Piece, ctx: ChunkContext) -> list[Piece]:
        s, e = tx.trim(ctx.text, piece.start, piece.end)
        if e <= s:
            return []
        if ctx.llm is None:
            return self._fallback(piece, ctx, "no LLM configured")
        pieces = self._with_llm(piece, ctx)
        if not pieces:
            return self._fallback(piece, ctx, "the LLM produced no propositions")
        return pieces

    def _with_llm(self, piece: Piece, ctx: ChunkContext) -> list[Piece]:
        """Extraction with the LLM client: issue 5. Until then nothing is extracted, and the
        caller falls back (recorded in every chunk's metadata)."""
        return []

    def _fallback(self, piece: Piece, ctx: ChunkContext, reason: str) -> list[Piece]:
        cfg = self.config
        out = SlidingWindow(cfg.fallback_config()).split(piece, ctx)
        return [
            Piece(
                p.text, p.start, p.end, p.section_path, p.chunk_type, p.overlap_chars, False, p.block_index, "",
                {**p.metadata, "fallback_from": "PROPOSITION", "fallback_to": cfg.fallback_strategy,
                 "fallback_reason": reason},
            )
            for p in out
        ]
