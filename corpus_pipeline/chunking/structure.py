"""STRUCTURE: one piece per section, cut at headings, with ``A > B`` section paths.

Seed 002's ``applyStructureChunking``: the text is scanned for headings (``headings``:
the eight line forms, setext, the parser's TITLE blocks; never inside code fences), a
heading stack is kept, and every section (its heading line and the body up to the next
heading) becomes a piece whose ``section_path`` joins the titles on the stack with
``" > "`` under the input piece's own path. Text before the first heading is a piece of
its own with the input's path.

Differences from the seed, on purpose:

- The stack pops by level, so ``## B`` after ``# A > ### C`` gives ``A > B`` even when
  levels skip (the seed popped by stack size and nested siblings when they did).
- A heading with no body of its own (``# Guide`` directly followed by ``## Install``) is
  kept with the section after it instead of becoming a chunk that is only a title
  (``merge_heading_only``).
- No heading at all -> RECURSIVE over the piece (the seed's fallback), recorded as
  ``metadata["fallback_from"] = "STRUCTURE"`` with the reason.

Sections are not size-bounded here; follow STRUCTURE with RECURSIVE (the usual plans do)
when a size limit matters.
"""

from __future__ import annotations

from dataclasses import dataclass

from corpus_pipeline.chunking import text as tx
from corpus_pipeline.chunking.base import ChunkContext, Strategy, make_piece
from corpus_pipeline.chunking.headings import find_headings
from corpus_pipeline.chunking.params import StrategyConfig, param
from corpus_pipeline.chunking.recursive import RecursiveConfig, recursive_pieces
from corpus_pipeline.chunking.registry import register
from corpus_pipeline.errors import ConfigError
from corpus_pipeline.models import Piece


@dataclass(frozen=True)
class StructureConfig(StrategyConfig):
    merge_heading_only: bool = param(True, doc="keep a heading with no body of its own with the next section")
    use_parsed_headings: bool = param(True, doc="treat the parser's TITLE blocks (DOCX, HTML, Markdown) as headings")
    fallback_max_chars: int = param(800, ge=100, le=8000, doc="RECURSIVE max_chars used when no heading is found")
    fallback_overlap_chars: int = param(120, ge=0, le=4000, doc="RECURSIVE overlap_chars used when no heading is found")
    size_unit: str = param("chars", choices=("chars", "tokens"), doc="size unit of the RECURSIVE fallback")
    fallback_max_tokens: int = param(240, ge=16, le=8192, doc="RECURSIVE max_tokens of the fallback (size_unit tokens)")
    fallback_overlap_tokens: int = param(32, ge=0, le=4096, doc="RECURSIVE overlap_tokens of the fallback")

    def check(self) -> None:
        try:
            self.fallback_config()
        except ConfigError as exc:
            raise ConfigError(f"fallback_{exc}") from None

    def fallback_config(self) -> RecursiveConfig:
        return RecursiveConfig(
            max_chars=self.fallback_max_chars,
            overlap_chars=self.fallback_overlap_chars,
            size_unit=self.size_unit,
            max_tokens=self.fallback_max_tokens,
            overlap_tokens=self.fallback_overlap_tokens,
        )


def compose_path(base: str, titles: list[str]) -> str:
    """``base > t1 > t2`` (seed 002 ``composeSectionPath``), skipping empty parts."""
    parts = [p for p in [base.strip(), *(t.strip() for t in titles)] if p]
    return " > ".join(parts)


@register
class Structure(Strategy):
    name = "STRUCTURE"
    code = 1
    version = "v2"  # v2: a fence at the start of a span no longer opens and closes at once
    description = (
        "One piece per section, cut at headings (Markdown, setext, 1.2.3, 第一章, 一、, appendix; "
        "never inside code fences), with 'A > B' section paths. No heading -> RECURSIVE."
    )
    config_class = StructureConfig
    config: StructureConfig

    def split(self, piece: Piece, ctx: ChunkContext) -> list[Piece]:
        cfg = self.config
        text = ctx.text
        blocks = ctx.blocks if cfg.use_parsed_headings else ()
        headings = find_headings(text, piece.start, piece.end, blocks)
        if not headings:
            return recursive_pieces(
                piece,
                ctx,
                cfg.fallback_config(),
                fallback_from="STRUCTURE",
                fallback_to="RECURSIVE",
                fallback_reason="no heading found",
            )
        base = piece.section_path.strip()
        ws = tx._WS_SET
        pend = piece.end
        ctype, bi, meta = piece.chunk_type, piece.block_index, piece.metadata
        p_start, p_ov = piece.start, piece.overlap_chars
        ov_end = p_start + p_ov  # spans starting before it inherit part of the piece's overlap
        out: list[Piece] = []
        pre_s, pre_e = tx.trim(text, p_start, headings[0].start)
        if pre_e > pre_s:
            ov = max(0, p_ov - (pre_s - p_start)) if pre_s < ov_end else 0
            out.append(make_piece(text[pre_s:pre_e], pre_s, pre_e, base, ctype, ov, False, bi, "", meta))
        # The stack holds (level, path so far): each path is built once, from its parent's.
        stack: list[tuple[int, str]] = []
        pending = -1  # start of heading-only sections waiting for the next one
        merge = cfg.merge_heading_only
        last = len(headings) - 1
        nexts = [h[0] for h in headings]
        nexts.append(pend)
        for i, (h_start, body_start, level, title, _) in enumerate(headings):
            while stack and stack[-1][0] >= level:
                stack.pop()
            parent = stack[-1][1] if stack else base
            title = title.strip()
            path = (parent + " > " + title if parent else title) if title else parent
            stack.append((level, path))
            nxt = nexts[i + 1]
            a = h_start if pending < 0 else pending
            if merge and i < last:
                j = body_start
                while j < nxt and text[j] in ws:
                    j += 1
                if j >= nxt:  # a heading with no body: kept with the next section
                    pending = a
                    continue
            pending = -1
            # tx.trim(text, a, nxt), inlined
            b = nxt
            while a < b and text[a] in ws:
                a += 1
            while b > a and text[b - 1] in ws:
                b -= 1
            if b > a:
                ov = max(0, p_ov - (a - p_start)) if a < ov_end else 0
                out.append(make_piece(text[a:b], a, b, path, ctype, ov, False, bi, "", meta))
        return out
