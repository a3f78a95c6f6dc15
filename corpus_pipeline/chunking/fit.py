"""Children that always fit the embedding model: the last step of every child pipeline.

A chunk longer than the model's input window is silently truncated by the model: its end
is never searchable. Plans are sized in characters or tokens by the user, and a size in
characters can be more tokens than the model reads (300 Chinese characters are ~300
tokens of a BERT vocabulary; the default window is 254). So after the child pipeline, and
after the image chunks joined it, every chunk is counted with the model's own tokenizer
and one over the window is cut again, by RECURSIVE's rules (paragraph, line, sentence,
then word boundaries; a fixed position only for text with none), with exact offsets, and
without overlap between its parts:

- a chunk that keeps source text is cut into spans of the document (``text ==
  canonical_text[start:end]`` still holds; the first part keeps the chunk's overlap prefix);
- a derived chunk (an image description, a proposition) is cut in its own text; every part
  keeps the source span the chunk had.

Each part records ``recut_from_tokens`` (the chunk's count before), ``recut_part`` ("2/3")
and ``recut_limit`` in its metadata; ``ctx.stats["recut_chunks"]`` counts the chunks cut
and ``ctx.stats["recut_parts"]`` the parts made. Each part is counted again; a part still
over the window (a word cut in two can tokenize into more pieces) is cut with a smaller
budget until every part fits.
"""

from __future__ import annotations

from collections.abc import Sequence

from corpus_pipeline.chunking.base import ChunkContext, make_piece
from corpus_pipeline.chunking.recursive import cut_spans
from corpus_pipeline.chunking.sizes import SizeMeter
from corpus_pipeline.embedding.tokens import TokenCounter
from corpus_pipeline.models import Piece

_MAX_ROUNDS = 8


def fit_each(pieces: Sequence[Piece], ctx: ChunkContext, limit: int | None = None) -> list[list[tuple[Piece, int]]]:
    """For each piece, the parts it becomes with their token counts: itself when it fits in
    ``limit`` tokens (default: the model's window), else its re-cut parts. One batch
    tokenization for all pieces; only re-cut parts are counted again."""
    counter = ctx.token_counter
    if counter is None:
        return [[(p, 0)] for p in pieces]
    window = counter.max_tokens if limit is None else limit
    counts = counter.count_batch([p.text for p in pieces])
    out: list[list[tuple[Piece, int]]] = []
    for p, n in zip(pieces, counts, strict=True):
        if n <= window:
            out.append([(p, n)])
            continue
        parts = _recut(p, ctx, counter, window)
        ctx.bump("recut_chunks")
        ctx.bump("recut_parts", len(parts))
        total = len(parts)
        fitted = []
        for i, (part, count) in enumerate(parts, 1):
            meta = {**part.metadata, "recut_from_tokens": n, "recut_part": f"{i}/{total}", "recut_limit": window}
            fitted.append((
                make_piece(
                    part.text, part.start, part.end, part.section_path, part.chunk_type, part.overlap_chars,
                    part.derived, part.block_index, part.strategy, meta,
                ),
                count,
            ))  # fmt: skip
        out.append(fitted)
    return out


def fit_to_window(pieces: Sequence[Piece], ctx: ChunkContext, limit: int | None = None) -> list[Piece]:
    """``pieces`` with every one over ``limit`` tokens (default: the model's window) cut again."""
    return [part for parts in fit_each(pieces, ctx, limit) for part, _ in parts]


def _spans(text: str, start: int, end: int, meter: SizeMeter, budget: int) -> list[tuple[int, int]]:
    return [(a, b) for a, b, _, _ in cut_spans(text, start, end, meter, budget, 0)]


def _recut(p: Piece, ctx: ChunkContext, counter: TokenCounter, window: int) -> list[tuple[Piece, int]]:
    """The parts of one over-long piece with their counts, each within ``window`` tokens
    when counted alone."""
    if p.derived:
        own_text = p.text
        meter = SizeMeter(own_text, "tokens", counter)
    else:
        own_text = ctx.text
        meter = ctx.meter("tokens")
    lo, hi = (0, len(p.text)) if p.derived else (p.start, p.end)
    budget = window
    spans = _spans(own_text, lo, hi, meter, budget)
    counts = counter.count_batch([own_text[a:b] for a, b in spans])
    for _ in range(_MAX_ROUNDS):
        worst = max(counts) if counts else 0
        if worst <= window:
            break
        # Re-tokenized alone, a part can count more than its span did inside the document
        # (a word cut in two): cut the offenders again with a budget smaller by the excess.
        budget = max(1, budget - (worst - window))
        fixed: list[tuple[int, int]] = []
        for (a, b), c in zip(spans, counts, strict=True):
            fixed.extend(_spans(own_text, a, b, meter, budget) if c > window else [(a, b)])
        spans = fixed
        counts = counter.count_batch([own_text[a:b] for a, b in spans])
    parts: list[tuple[Piece, int]] = []
    for i, ((a, b), count) in enumerate(zip(spans, counts, strict=True)):
        if p.derived:
            start, end, overlap = p.start, p.end, 0
        else:
            start, end = a, b
            overlap = max(0, min(p.overlap_chars - (a - p.start), b - a)) if i == 0 else 0
        part = make_piece(
            own_text[a:b], start, end, p.section_path, p.chunk_type, overlap, p.derived, p.block_index,
            p.strategy, p.metadata,
        )  # fmt: skip
        parts.append((part, count))
    return parts
