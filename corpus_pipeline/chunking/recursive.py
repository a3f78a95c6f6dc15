"""RECURSIVE: paragraph -> line -> sentence -> word -> fixed window, merged up to the size.

Seed 002's ``recursiveSplit`` / ``mergeAndSplit`` / ``applyOverlap``, computed in one
forward pass over spans of the source (offsets are never searched for afterwards):

1. A span within the size is kept whole.
2. Otherwise each chunk takes as much text as fits (``max`` includes the overlap) and ends
   at the coarsest boundary inside that window: a blank line; else a line break that ends
   a sentence or precedes a Markdown block (list item, heading, table row, quote, fence);
   else a sentence end (Chinese or English, see ``text``); else any line break; else a
   space. Merging neighbours greedily while they fit and cutting at the last coarse
   boundary are the same thing; doing it as a cut search makes the work proportional to
   the number of chunks, not of paragraphs.
3. A coarse boundary that would leave a chunk under a quarter of the window is passed
   over for a finer one further on (so a heading is not left alone in a chunk when the
   paragraph after it is long); it is used when nothing finer exists.
4. Only text with none of those boundaries (a long CJK run without punctuation, a base64
   blob) is cut at a fixed position; such chunks carry ``metadata["hard_cut"] = True``.
5. Each chunk after the first starts with an overlap taken from the end of the previous
   one: from the first sentence start inside the overlap window (seed 001's alignment,
   which the seed applied only in the window's latter half and lost whenever the chunk
   ended with "。"), else from a word start, else (CJK) where the window begins.

Sizes are in characters or in tokens of the KB's embedding model (``size_unit``); in
tokens every measurement is a binary search over one tokenization of the document.
Bounds: every chunk is within ``max`` (overlap included). In tokens, a ``hard_cut`` chunk
that splits a word may count a token or two more when re-tokenized on its own.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from corpus_pipeline.chunking import text as tx
from corpus_pipeline.chunking.base import ChunkContext, Strategy, make_piece, sub_piece
from corpus_pipeline.chunking.params import StrategyConfig, param
from corpus_pipeline.chunking.registry import register
from corpus_pipeline.chunking.sizes import SizeBound, SizeMeter
from corpus_pipeline.errors import ConfigError
from corpus_pipeline.models import Piece

_PARA_SEP = tx._PARA_SEP
_SENT_CAND = tx._SENT_CAND
_WS = tx._WS_SET
_LINE_END_OK = frozenset("。！？；….!?;:：\"'”’」』）)]】》〉")
_BLOCK_START = frozenset("-*+>#|`~")
_HSPACE = frozenset(" \t\r\f\v\u3000")
_HBLANK = re.compile("\n[ \t\r\f\v\u3000]+\n")  # a blank line holding _HSPACE characters
_MIN_FILL = 4  # a coarse cut must fill at least 1/_MIN_FILL of the window


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
        32, ge=0, le=4096, doc="tokens repeated from the previous chunk when size_unit is 'tokens' (at most half)"
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


def _line_break_ok(text: str, nl: int, lo: int) -> bool:
    """Whether the line break at ``nl`` is a natural cut: the line before it ends a
    sentence, or the line after it starts a Markdown block."""
    i = nl - 1
    while i > lo and text[i] in " \t\r":
        i -= 1
    if text[i] in _LINE_END_OK:
        return True
    j = nl + 1
    n = len(text)
    while j < n and text[j] in " \t":
        j += 1
    if j >= n:
        return True
    c = text[j]
    if c in _BLOCK_START:
        return True
    if c.isdigit():
        k = j
        while k < n and text[k].isdigit():
            k += 1
        return k < n and text[k] in ".)、"
    return False


def _find_cut(text: str, own: int, lo: int, hi: int, end: int) -> tuple[int, int]:
    """The best cut ``c`` with ``lo < c <= hi`` (a chunk ends at ``c``), and its level:
    0 blank line, 1 natural line break, 2 sentence end, 3 line break, 4 space; (-1, 5)
    when there is none."""
    rfind = text.rfind
    # Fast path for the usual case: the last "\n\n" in the window is the last blank line
    # unless a blank line holding spaces lies after it (one C search says there is none).
    k = rfind("\n\n", lo + 1, hi + 1)
    if k > lo and _HBLANK.search(text, k + 1, hi + 1) is None:
        return k, 0
    hspace = _HSPACE
    first_ok = first_any = -1
    nl = rfind("\n", lo + 1, hi + 1)
    while nl > lo:
        j = nl - 1
        while j > lo and text[j] in hspace:
            j -= 1
        if text[j] == "\n":  # a blank line: the last paragraph boundary in the window
            if j > lo:
                return j, 0
            break
        if first_any < 0:
            first_any = nl
        if first_ok < 0 and _line_break_ok(text, nl, own):
            first_ok = nl
        nl = rfind("\n", lo + 1, nl)
    if first_ok > 0:
        return first_ok, 1
    se = tx.last_sentence_end(text, lo, hi, min(end, hi + 8))
    if se > 0:
        return se, 2
    if first_any > 0:
        return first_any, 3
    sp = max(rfind(" ", lo + 1, hi + 1), rfind("\t", lo + 1, hi + 1), rfind("\u3000", lo + 1, hi + 1))
    if sp > lo:
        return sp, 4
    return -1, 5


def overlap_start(text: str, prev_start: int, prev_end: int, room: int, meter: SizeMeter) -> int:
    """Where the overlap taken from the span ``[prev_start, prev_end)`` begins.

    At most ``room`` long; at the first sentence start inside that window when there is
    one (never half a sentence), else at a word start, else (CJK) where the window begins.
    Returns ``prev_end`` when no overlap fits.
    """
    if room <= 0:
        return prev_end
    if meter.unit == "chars":
        p0 = prev_end - room
    else:
        p0 = meter.retreat(prev_start, prev_end, room)
        if p0 >= prev_end:
            return prev_end
    if p0 <= prev_start:
        return prev_start
    # A sentence end just before p0 makes p0 itself a sentence start: search from a little
    # before it, keeping only starts at or after p0.
    ws = _WS
    accepts = tx._accepts
    search = _SENT_CAND.search  # runs _accepts would refuse mostly filtered out in C
    m = search(text, p0 - 3 if p0 - 3 > prev_start else prev_start, prev_end)
    while m is not None:
        s = m.end()
        while s < prev_end and text[s] in ws:
            s += 1
        if s >= prev_end:
            break
        if s >= p0 and accepts(text, m):
            return s
        m = search(text, m.end(), prev_end)
    c = text[p0]
    if c in _WS:
        s = tx.skip_ws(text, p0, prev_end)
        return s
    if text[p0 - 1] in _WS:
        return p0
    if c.isascii():
        i = p0
        while i < prev_end and text[i] not in _WS:
            i += 1
        return tx.skip_ws(text, i, prev_end)
    return p0


def cut_spans(
    text: str, start: int, end: int, meter: SizeMeter, limit: int, overlap: int = 0
) -> list[tuple[int, int, int, bool]]:
    """Cut ``text[start:end]`` into chunks of at most ``limit`` (overlap included).

    Returns ``(chunk_start, chunk_end, overlap_len, hard_cut)``: the chunk's own text
    begins at ``chunk_start + overlap_len``. Chunk ends never carry trailing whitespace.
    """
    out: list[tuple[int, int, int, bool]] = []
    own, e = tx.trim(text, start, end)
    if e <= own:
        return out
    measure, advance = meter.measure, meter.advance
    chars = meter.unit == "chars"
    ws = _WS
    p = own
    while own < e:
        if (e - p if chars else measure(p, e)) <= limit:
            cut, hard = e, False
        else:
            hi = p + limit if chars else advance(p, e, limit)
            room = (limit - (own - p)) if chars else (limit - measure(p, own))
            fill = room // _MIN_FILL
            if fill < 1:
                fill = 1
            lo = own + fill if chars else advance(own, e, fill)
            cut, level = _find_cut(text, own, lo, hi, e) if lo < hi else (-1, 5)
            if level >= 3:  # nothing coarse past the fill line: any coarse cut at all?
                c2, l2 = _find_cut(text, own, own, hi, e)
                if c2 > own and l2 < level:
                    cut, level = c2, l2
            hard = cut <= own
            if hard:
                cut = hi
        ce = cut
        while ce > own and text[ce - 1] in ws:
            ce -= 1
        out.append((p, ce, own - p, hard))
        nxt = cut
        while nxt < e and text[nxt] in ws:
            nxt += 1
        if nxt >= e:
            break
        if overlap > 0:
            p = overlap_start(text, own, ce, overlap, meter)
            if p >= ce:
                p = nxt
        else:
            p = nxt
        own = nxt
    return out


def split_spans(text: str, start: int, end: int, meter: SizeMeter, budget: int) -> list[tuple[int, int, bool]]:
    """Cut ``text[start:end]`` into spans of at most ``budget``, without overlap:
    ``(start, end, hard_cut)`` triples (used by other strategies to bound sizes)."""
    return [(a, b, hard) for a, b, _, hard in cut_spans(text, start, end, meter, budget, 0)]


def recursive_pieces(
    piece: Piece, ctx: ChunkContext, cfg: RecursiveConfig, strategy: str = "", **meta_extra: object
) -> list[Piece]:
    """RECURSIVE over one piece with ``cfg`` (also the fallback of STRUCTURE and others);
    new pieces are stamped with ``strategy``, the name of the step that runs it."""
    text = ctx.text
    meter = ctx.meter(cfg.size_unit)
    s, e = tx.trim(text, piece.start, piece.end)
    if e <= s:
        return []
    limit = cfg.limit
    if (e - s if cfg.size_unit == "chars" else meter.measure(s, e)) <= limit:
        if (s, e) == (piece.start, piece.end) and not meta_extra:
            return [piece]
        meta = {**piece.metadata, **meta_extra} if meta_extra else piece.metadata
        ov = max(0, piece.overlap_chars - (s - piece.start))
        return [sub_piece(piece, text, s, e, overlap_chars=ov, metadata=meta, strategy=strategy)]
    base = {**piece.metadata, **meta_extra} if meta_extra else piece.metadata
    return cut_pieces(text, s, e, meter, cfg, piece.section_path, piece.chunk_type, piece.block_index, base, strategy)


def cut_pieces(
    text: str, s: int, e: int, meter: SizeMeter, cfg: RecursiveConfig, section_path: str, chunk_type: str,
    block_index: int | None, metadata: Mapping[str, Any], strategy: str,
) -> list[Piece]:  # fmt: skip
    """The chunks of the trimmed span ``text[s:e]`` (over the size) as pieces that share the
    given section path, type, block index and metadata (plus ``hard_cut`` where one is)."""
    hard_meta = None
    out: list[Piece] = []
    append = out.append
    for a, b, ov, hard in cut_spans(text, s, e, meter, cfg.limit, cfg.overlap):
        if hard and hard_meta is None:
            hard_meta = {**metadata, "hard_cut": True}  # shared by this span's hard-cut chunks
        append(make_piece(text[a:b], a, b, section_path, chunk_type, ov, False, block_index, strategy,
                          hard_meta if hard else metadata))  # fmt: skip
    return out


@register
class Recursive(Strategy):
    name = "RECURSIVE"
    clean_output = True  # trimmed, non-empty spans at distinct places
    code = 2
    version = "v2"
    description = (
        "Paragraph -> line -> sentence -> word -> fixed window, merged up to the size, with an "
        "overlap that starts at a sentence start. Chinese and English; sizes in chars or tokens."
    )
    config_class = RecursiveConfig
    config: RecursiveConfig
    size_guard = True
    parent_defaults: ClassVar[Mapping[str, Any]] = {
        "max_chars": 2200,
        "overlap_chars": 180,
    }  # seed 003's parent pipeline
    # Children are what gets embedded, so by default they are sized in the embedding model's
    # tokens (240 content tokens fit all-MiniLM-L6-v2's 256 positions) instead of the seed's
    # 800 characters, which are ~800 tokens of Chinese and would be truncated.
    child_defaults: ClassVar[Mapping[str, Any]] = {"size_unit": "tokens", "max_tokens": 240, "overlap_tokens": 32}
    size_keys = frozenset({"size_unit", "max_chars", "overlap_chars", "max_tokens", "overlap_tokens"})

    @classmethod
    def size_bound(cls, config: StrategyConfig) -> SizeBound:
        assert isinstance(config, RecursiveConfig)
        tok = config.size_unit == "tokens"
        return SizeBound(
            "tokens" if tok else "chars", config.limit, None, f"{cls.name} {'max_tokens' if tok else 'max_chars'}"
        )

    def split(self, piece: Piece, ctx: ChunkContext) -> list[Piece]:
        return recursive_pieces(piece, ctx, self.config, self.name)

    def split_all(self, pieces: Sequence[Piece], ctx: ChunkContext) -> list[Piece]:
        # After STRUCTURE most pieces are sections already within the size and trimmed:
        # ``recursive_pieces`` would return them unchanged, so they are passed through here
        # with one size test and two character tests, without the call.
        cfg = self.config
        text = ctx.text
        limit = cfg.limit
        chars = cfg.size_unit == "chars"
        measure = None if chars else ctx.meter(cfg.size_unit).measure
        ws = _WS
        name = self.name
        out: list[Piece] = []
        append = out.append
        for piece in pieces:
            s, e = piece.start, piece.end
            if (
                s < e
                and text[s] not in ws
                and text[e - 1] not in ws
                and (
                    e - s <= limit if chars else measure(s, e) <= limit  # type: ignore[misc]
                )
            ):
                append(piece)
            else:
                out.extend(recursive_pieces(piece, ctx, cfg, name))
        return out
