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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from corpus_pipeline.chunking import text as tx
from corpus_pipeline.chunking.base import ChunkContext, Strategy, make_piece
from corpus_pipeline.chunking.headings import HeadingTuple, heading_tuples
from corpus_pipeline.chunking.params import StrategyConfig, param
from corpus_pipeline.chunking.recursive import Recursive, RecursiveConfig, cut_pieces, recursive_pieces
from corpus_pipeline.chunking.registry import register
from corpus_pipeline.errors import ConfigError
from corpus_pipeline.models import Piece

_BOTTOM = -(1 << 60)  # below every heading level: the heading stack's sentinel


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
    clean_output = True  # trimmed, non-empty spans at distinct places
    code = 1
    # v2: a fence at the start of a span no longer opens and closes at once; v3: numbered
    # headings standing alone in documents with explicit headings (Markdown, parsed TITLE
    # blocks), lone numbered list items never headings, a span opening with its own heading
    # not nested under itself, "1.5 GHz" no heading
    version = "v3"
    description = (
        "One piece per section, cut at headings (Markdown, setext, 1.2.3, 第一章, 一、, appendix; "
        "never inside code fences), with 'A > B' section paths. No heading -> RECURSIVE."
    )
    config_class = StructureConfig
    config: StructureConfig
    parent_defaults: ClassVar[Mapping[str, Any]] = {
        "fallback_max_chars": 2200,
        "fallback_overlap_chars": 180,
    }  # seed 003
    # size_bound: none; sections are as long as they are (follow with RECURSIVE to bound them)

    def split(self, piece: Piece, ctx: ChunkContext) -> list[Piece]:
        text = ctx.text
        headings = heading_tuples(text, piece.start, piece.end, ctx.blocks if self.config.use_parsed_headings else ())
        if not headings:
            return self._fallback(piece, ctx)
        ctype, bi, meta, name = piece.chunk_type, piece.block_index, piece.metadata, self.name
        p_start, p_ov = piece.start, piece.overlap_chars
        ov_end = p_start + p_ov  # spans starting before it inherit part of the piece's overlap
        out: list[Piece] = []
        for a, b, path in self._sections(text, piece, headings):
            ov = max(0, p_ov - (a - p_start)) if a < ov_end else 0
            out.append(make_piece(text[a:b], a, b, path, ctype, ov, False, bi, name, meta))
        return out

    def split_all_then(self, pieces: Sequence[Piece], ctx: ChunkContext, then: Strategy) -> list[Piece] | None:
        """STRUCTURE -> RECURSIVE in one pass: a section within RECURSIVE's size becomes a
        STRUCTURE piece (RECURSIVE would pass it through), a larger one is cut by RECURSIVE
        straight away, without first becoming a piece of its own. From one input piece the
        result is clean (sections do not overlap), as the pipeline's skipped cleanup needs."""
        if type(then) is not Recursive:
            return None
        rcfg = then.config
        assert isinstance(rcfg, RecursiveConfig)
        text = ctx.text
        limit = rcfg.limit
        chars = rcfg.size_unit == "chars"
        meter = ctx.meter(rcfg.size_unit)
        measure = meter.measure
        use_blocks = self.config.use_parsed_headings
        name, then_name = self.name, then.name
        out: list[Piece] = []
        append = out.append
        for piece in pieces:
            headings = heading_tuples(text, piece.start, piece.end, ctx.blocks if use_blocks else ())
            if not headings:
                # The fallback's chunks overlap, so RECURSIVE's cuts of two of them can repeat
                # a piece: clean up here, as the pipeline would after the second step.
                from corpus_pipeline.chunking.pipeline import cleanup  # (the pipeline imports us)

                out.extend(cleanup(then.split_all(self._fallback(piece, ctx), ctx)))
                continue
            ctype, bi, meta = piece.chunk_type, piece.block_index, piece.metadata
            p_start, p_ov = piece.start, piece.overlap_chars
            ov_end = p_start + p_ov
            for a, b, path in self._sections(text, piece, headings):
                if (b - a if chars else measure(a, b)) <= limit:
                    ov = max(0, p_ov - (a - p_start)) if a < ov_end else 0
                    append(make_piece(text[a:b], a, b, path, ctype, ov, False, bi, name, meta))
                else:
                    out.extend(cut_pieces(text, a, b, meter, rcfg, path, ctype, bi, meta, then_name))
        return out

    def _fallback(self, piece: Piece, ctx: ChunkContext) -> list[Piece]:
        return recursive_pieces(
            piece,
            ctx,
            self.config.fallback_config(),
            self.name,
            fallback_from="STRUCTURE",
            fallback_to="RECURSIVE",
            fallback_reason="no heading found",
        )

    def _sections(self, text: str, piece: Piece, headings: list[HeadingTuple]) -> list[tuple[int, int, str]]:
        """The sections of ``piece`` as trimmed, non-empty ``(start, end, section_path)`` spans,
        the text before the first heading first."""
        base = piece.section_path.strip()
        ws = tx._WS_SET
        out: list[tuple[int, int, str]] = []
        append = out.append
        pre_s, pre_e = tx.trim(text, piece.start, headings[0][0])
        if base and pre_e <= pre_s:
            # The span opens with a heading that ends its own path (a parent cut at that
            # heading, a document whose title is its path): not nested under itself.
            head, _, last = base.rpartition(" > ")
            if last == headings[0][3]:
                base = head
        if pre_e > pre_s:
            append((pre_s, pre_e, base))
        # The heading stack as two lists (levels, and the path so far at each): each path is
        # built once, from its parent's; the sentinel at the bottom is never popped.
        levels, paths = [_BOTTOM], [base]
        merge = self.config.merge_heading_only
        a = -1  # start of the open section: its heading's, or that of heading-only ones before it
        path = ""  # the open section's path
        body_start = 0
        for h_start, next_body, level, title, _, _ in headings:
            if a < 0:
                a = h_start
            else:  # this heading ends the open section
                j = body_start
                while j < h_start and text[j] in ws:
                    j += 1
                if j < h_start or not merge:  # (a heading with no body is kept with the next)
                    # tx.trim(text, a, h_start), inlined
                    b = h_start
                    while b > a and text[b - 1] in ws:
                        b -= 1
                    while a < b and text[a] in ws:
                        a += 1
                    if b > a:
                        append((a, b, path))
                    a = h_start
            while levels[-1] >= level:
                levels.pop()
                paths.pop()
            parent = paths[-1]
            path = (parent + " > " + title if parent else title) if title else parent
            levels.append(level)
            paths.append(path)
            body_start = next_body
        a, b = tx.trim(text, a, piece.end)  # the last section runs to the end of the piece
        if b > a:
            append((a, b, path))
        return out
