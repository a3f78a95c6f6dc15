"""RECURSIVE: paragraph -> line -> sentence -> word -> fixed window, merged up to the size.

Seed 002's ``recursiveSplit`` / ``mergeAndSplit`` / ``applyOverlap``, on spans:

1. A span within the size is kept whole.
2. Otherwise it is cut at the coarsest boundary that exists in it (blank lines, then line
   breaks, then sentence ends in Chinese or English, then spaces), and neighbouring parts
   are merged greedily while they fit; a part still too large recurses one level finer.
   The last resort is a fixed window (the seed's), which only text with none of those
   boundaries ever reaches (a long run of CJK without punctuation, a base64 blob).
3. Each chunk after the first is prefixed with the end of the previous one (the overlap).
   The overlap starts at a sentence start when there is one inside it (seed 001's
   alignment), else at a word start; the size limit always includes the overlap.

Sizes are in characters or in tokens of the KB's embedding model (``size_unit``); in
tokens, every measurement is a binary search over one tokenization of the document.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from corpus_pipeline.chunking import text as tx
from corpus_pipeline.chunking.base import ChunkContext, Strategy, sub_piece
from corpus_pipeline.chunking.params import StrategyConfig, param
from corpus_pipeline.chunking.registry import register
from corpus_pipeline.chunking.sizes import SizeMeter
from corpus_pipeline.errors import ConfigError
from corpus_pipeline.models import Piece

_LEVELS: tuple[tuple[str, Callable[[str, int, int], list[tx.Span]]], ...] = (
    ("paragraph", tx.paragraphs),
    ("line", tx.lines),
    ("sentence", tx.sentences),
    ("word", tx.words),
)


@dataclass(frozen=True)
class RecursiveConfig(StrategyConfig):
    max_chars: int = param(800, ge=100, le=8000, doc="largest chunk in characters, overlap included")
    overlap_chars: int = param(
        120, ge=0, le=4000, doc="characters repeated from the previous chunk (at most half of max_chars)"
    )
    size_unit: str = param(
        "chars", choices=("chars", "tokens"), doc="measure sizes in characters or in embedding-model tokens"
    )
    max_tokens: int = param(
        240, ge=16, le=8192, doc="largest chunk in tokens when size_unit is 'tokens', overlap included"
    )
    overlap_tokens: int = param(
        32, ge=0, le=4096, doc="tokens repeated from the previous chunk when size_unit is 'tokens'"
    )

    def check(self) -> None:
        if self.overlap_chars > self.max_chars // 2:
            raise ConfigError(
                f"overlap_chars = {self.overlap_chars} is more than half of max_chars = {self.max_chars}; "
                f"allowed 0..{self.max_chars // 2}. Lower overlap_chars or raise max_chars."
            )
        if self.overlap_tokens > self.max_tokens // 2:
            raise ConfigError(
                f"overlap_tokens = {self.overlap_tokens} is more than half of max_tokens = {self.max_tokens}; "
                f"allowed 0..{self.max_tokens // 2}. Lower overlap_tokens or raise max_tokens."
            )

    @property
    def limit(self) -> int:
        return self.max_tokens if self.size_unit == "tokens" else self.max_chars

    @property
    def overlap(self) -> int:
        return self.overlap_tokens if self.size_unit == "tokens" else self.overlap_chars


def split_spans(text: str, start: int, end: int, meter: SizeMeter, budget: int) -> list[tuple[int, int, bool]]:
    """Cut ``text[start:end]`` into spans each of at most ``budget`` (no overlap).

    Returns ``(start, end, hard_cut)`` triples; ``hard_cut`` marks fixed-window spans.
    """
    out: list[tuple[int, int, bool]] = []
    cur_s = cur_e = -1

    def flush() -> None:
        nonlocal cur_s, cur_e
        if cur_s >= 0:
            out.append((cur_s, cur_e, False))
            cur_s = cur_e = -1

    def add(a: int, b: int) -> None:
        nonlocal cur_s, cur_e
        if cur_s < 0:
            cur_s, cur_e = a, b
        elif meter.measure(cur_s, b) <= budget:
            cur_e = b
        else:
            flush()
            cur_s, cur_e = a, b

    def walk(a: int, b: int, level: int) -> None:
        if meter.measure(a, b) <= budget:
            add(a, b)
            return
        parts: list[tx.Span] = []
        while level < len(_LEVELS):
            parts = _LEVELS[level][1](text, a, b)
            level += 1
            if len(parts) > 1:
                break
        if len(parts) <= 1:
            flush()
            pos = a
            while pos < b:
                nxt = meter.advance(pos, b, budget)
                s, e = tx.trim(text, pos, nxt)
                if e > s:
                    out.append((s, e, True))
                pos = nxt
            return
        for pa, pb in parts:
            walk(pa, pb, level)

    s, e = tx.trim(text, start, end)
    if e > s:
        walk(s, e, 0)
        flush()
    return out


def overlap_start(text: str, prev_start: int, prev_end: int, room: int, meter: SizeMeter) -> int:
    """Where the overlap taken from the span ``[prev_start, prev_end)`` begins.

    At most ``room`` long; at the first sentence start inside that window when there is
    one (never half a sentence), else at a word start, else (CJK) where the window begins.
    Returns ``prev_end`` when no overlap fits.
    """
    if room <= 0:
        return prev_end
    p0 = meter.retreat(prev_start, prev_end, room)
    if p0 >= prev_end:
        return prev_end
    if p0 == prev_start or text[p0 - 1] in tx._WS:
        return tx.trim(text, p0, prev_end)[0]
    for s in tx.sentence_starts(text, p0, prev_end):
        return s
    if text[p0].isascii() and text[p0].isalnum():
        i = p0
        while i < prev_end and text[i] not in tx._WS:
            i += 1
        s, _ = tx.trim(text, i, prev_end)
        return s if s < prev_end else prev_end
    return p0


def with_overlap(
    text: str, spans: list[tuple[int, int, bool]], meter: SizeMeter, limit: int, overlap: int
) -> list[tuple[int, int, int, bool]]:
    """``(start, end, overlap_chars, hard_cut)``: each span after the first extended
    backwards into its predecessor, the whole staying within ``limit``."""
    out: list[tuple[int, int, int, bool]] = []
    prev: tuple[int, int] | None = None
    for a, b, hard in spans:
        p = a
        if prev is not None and overlap > 0:
            room = min(overlap, limit - meter.measure(prev[1], b))
            p = overlap_start(text, prev[0], prev[1], room, meter)
            if p >= prev[1]:
                p = a
        out.append((p, b, a - p, hard))
        prev = (a, b)
    return out


@register
class Recursive(Strategy):
    name = "RECURSIVE"
    code = 2
    version = "v1"
    description = (
        "Paragraph -> line -> sentence -> word -> fixed window, merged up to the size, with an "
        "overlap that starts at a sentence start. Chinese and English; sizes in chars or tokens."
    )
    config_class = RecursiveConfig
    config: RecursiveConfig

    def split(self, piece: Piece, ctx: ChunkContext) -> list[Piece]:
        cfg = self.config
        text = ctx.text
        meter = ctx.meter(cfg.size_unit)
        s, e = tx.trim(text, piece.start, piece.end)
        if e <= s:
            return []
        if meter.measure(s, e) <= cfg.limit:
            if (s, e) == (piece.start, piece.end):
                return [piece]
            return [sub_piece(piece, text, s, e, overlap_chars=max(0, piece.overlap_chars - (s - piece.start)))]
        spans = split_spans(text, s, e, meter, cfg.limit - cfg.overlap)
        out = []
        for a, b, ov, hard in with_overlap(text, spans, meter, cfg.limit, cfg.overlap):
            meta = dict(piece.metadata)
            if hard:
                meta["hard_cut"] = True
            out.append(sub_piece(piece, text, a, b, overlap_chars=ov, metadata=meta))
        return out
