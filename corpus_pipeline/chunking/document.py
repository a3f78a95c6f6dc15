"""The one parent/child algorithm (seed 003 ``buildParentBlocks``): a document in, parent
blocks and child chunks out, as the records the store writes.

    doc = SourceDocument(kb, version, doc_id, path, fmt, content_hash, text, blocks)
    parents = chunk_parents(doc, plan, ctx)                       # the parent pipeline
    children = chunk_children(doc, plan, parents, ctx, images)    # the child pipeline
    chunk_document(doc, plan, ctx, images)                        # both

``corpus preview``, the ``parent_blocks`` / ``child_chunks`` assets and the benchmarks all
call these; indexing only turns their records into rows. The steps:

1. The parent pipeline runs over the whole text (``run_steps``); a CHILD-only plan makes the
   whole document one parent (strategy ``DOCUMENT``).
2. The child pipeline runs over each parent's *own* span: a parent's overlap prefix
   repeats the previous parent, whose children already cover it (cutting it again would
   make the same child twice).
3. Image pieces (IMAGE / TABLE_IMAGE, from the image descriptions) join the text children
   in reading order by offset; each belongs to the parent whose span holds it.
4. Every child over the embedding model's window is cut again (``fit.fit_to_window``).
5. Children are numbered across the document; sections, pages and block indices come from
   the piece, else from the parsed block at the piece's start, else from the parent.

Ids are deterministic: a hash of (kind, strategy version, doc id, position, span, text),
so the same document and version give the same ids in preview, in the index, on every run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from corpus_pipeline.chunking.base import ChunkContext
from corpus_pipeline.chunking.fit import fit_each
from corpus_pipeline.chunking.pipeline import cleanup, run_steps
from corpus_pipeline.chunking.plan import Plan
from corpus_pipeline.models import Block, Chunk, ParentBlock, Piece

DOCUMENT_STRATEGY = "DOCUMENT"  # the one parent of a CHILD-only plan


def text_hash(text: str) -> str:
    """sha256 of a text: the embedding cache's key and part of every id."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def record_id(*parts: object) -> str:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:24]


@dataclass(frozen=True)
class SourceDocument:
    """What the algorithm reads of one parsed document."""

    kb: str
    strategy_version: str
    doc_id: str
    path: str
    format: str
    content_hash: str
    text: str
    blocks: Sequence[Block] = ()


@dataclass(frozen=True)
class ChunkedDocument:
    parents: list[ParentBlock]
    children: list[Chunk]
    stats: Mapping[str, int] = field(default_factory=dict)

    def children_of(self, parent: ParentBlock) -> list[Chunk]:
        return [c for c in self.children if c.parent_id == parent.parent_id]


class _Locator:
    """The parsed block at a text offset: its index, page and section path."""

    def __init__(self, blocks: Sequence[Block]) -> None:
        self.blocks = sorted(blocks, key=lambda b: b.block_index)
        self.starts = [b.start_offset for b in self.blocks]

    def at(self, offset: int) -> Block | None:
        i = bisect_right(self.starts, offset) - 1
        if i < 0:
            return self.blocks[0] if self.blocks else None
        return self.blocks[i]


def _span_fields(
    doc: SourceDocument, p: Piece, tokens: int, loc: _Locator, versions: Mapping[str, str], section_default: str = ""
) -> dict[str, Any]:
    """The columns parents and children share: where a piece lies and what cut it. Its
    section path, page and block index are its own, else those of the parsed block at its
    start (else ``section_default``: a child's parent's)."""
    block = loc.at(p.start)
    section = p.section_path or (block.section_path if block else "") or section_default
    return {
        "kb": doc.kb,
        "strategy_version": doc.strategy_version,
        "doc_id": doc.doc_id,
        "doc_path": doc.path,
        "text": p.text,
        "start_offset": p.start,
        "end_offset": p.end,
        "char_count": len(p.text),
        "token_count": tokens,
        "section_path": section,
        "page_num": block.page_num if block else None,
        "block_index": p.block_index if p.block_index is not None else (block.block_index if block else None),
        "strategy": p.strategy,
        "strategy_code_version": versions.get(p.strategy, ""),
        "overlap_chars": p.overlap_chars,
        "derived": p.derived,
    }


def chunk_parents(
    doc: SourceDocument, plan: Plan, ctx: ChunkContext, *, plan_reasons: Sequence[str] = ()
) -> list[ParentBlock]:
    """The parent blocks of ``doc`` under ``plan`` (``ctx.text`` must be ``doc.text``)."""
    text = doc.text
    whole = Piece(text=text, start=0, end=len(text))
    if plan.parent:
        pieces = run_steps(plan.parent, [whole], ctx)
    else:  # a CHILD-only plan: the whole document is the one parent
        pieces = [dataclasses.replace(p, strategy=DOCUMENT_STRATEGY) for p in cleanup([whole])]
    counter = ctx.token_counter
    tokens = counter.count_batch([p.text for p in pieces]) if counter else [0] * len(pieces)
    loc = _Locator(doc.blocks)
    versions = plan.code_versions()
    snapshot = plan.snapshot()
    out = []
    for i, (p, n) in enumerate(zip(pieces, tokens, strict=True)):
        meta: dict[str, Any] = {**p.metadata, "plan": snapshot}
        if plan_reasons:
            meta["plan_reasons"] = list(plan_reasons)
        out.append(
            ParentBlock(
                parent_id=record_id("parent", doc.strategy_version, doc.doc_id, i, p.start, p.end, text_hash(p.text)),
                parent_index=i,
                **_span_fields(doc, p, n, loc, versions),
                metadata=meta,
                content_hash=doc.content_hash,
            )
        )
    return out


def _json(obj: Any) -> str:
    return json.dumps(obj or {}, ensure_ascii=False, sort_keys=True, default=str)


def doc_fingerprint(parent_ids: Iterable[str], image_pieces: Sequence[Piece]) -> str:
    """What a document's children depend on besides the plan: its parents and its image
    pieces. Equal fingerprints (same version) mean the previous children can be kept."""
    h = hashlib.sha256()
    for pid in parent_ids:
        h.update(pid.encode())
    for p in image_pieces:
        h.update(b"\x1e" + p.text.encode() + _json(p.metadata).encode() + str((p.start, p.end, p.chunk_type)).encode())
    return h.hexdigest()[:24]


def _parent_at(offset: int, parents: Sequence[ParentBlock]) -> int:
    """The parent whose span holds ``offset``; the last one starting at or before it when
    none does (an image between two parents belongs to the one above), else the first."""
    holder = next((i for i, p in enumerate(parents) if p.start_offset <= offset < p.end_offset), None)
    if holder is not None:
        return holder
    before = [i for i, p in enumerate(parents) if p.start_offset <= offset]
    return before[-1] if before else 0


def _in_reading_order(
    items: list[tuple[Piece, int]], images: Sequence[Piece], parents: Sequence[ParentBlock]
) -> list[tuple[Piece, int]]:
    """Text children (in their order) with each image piece after the last text child that
    starts at or before it (seed 000 §6.3); an image belongs to the parent at its offset."""
    if not images:
        return items
    starts = [p.start for p, _ in items]
    slots: dict[int, list[tuple[Piece, int]]] = {}
    for img in sorted(images, key=lambda p: (p.start, p.block_index or 0)):
        slots.setdefault(bisect_right(starts, img.start), []).append((img, _parent_at(img.start, parents)))
    out = list(slots.get(0, []))
    for i, item in enumerate(items, start=1):
        out.append(item)
        out.extend(slots.get(i, []))
    return out


def chunk_children(
    doc: SourceDocument,
    plan: Plan,
    parents: Sequence[ParentBlock],
    ctx: ChunkContext,
    images: Sequence[Piece] = (),
) -> list[Chunk]:
    """The child chunks of ``doc``: the child pipeline over each parent's own span, the image
    pieces in reading order, every chunk fitted to the model's window, numbered."""
    text = doc.text
    items: list[tuple[Piece, int]] = []  # (piece, parent position)
    for pi, parent in enumerate(parents):
        # Children cut the parent's own span: its overlap prefix repeats the previous
        # parent, whose children already cover it (cutting it again duplicated chunks).
        own = parent.start_offset + (0 if parent.derived else parent.overlap_chars or 0)
        seed = Piece(
            text=text[own : parent.end_offset], start=own, end=parent.end_offset, section_path=parent.section_path
        )
        items.extend((child, pi) for child in run_steps(plan.child, [seed], ctx))
    items = _in_reading_order(items, images, parents)
    fitted: list[tuple[Piece, int, int]] = []  # (piece, parent position, token count)
    for (_, pi), parts in zip(items, fit_each([p for p, _ in items], ctx), strict=True):
        fitted.extend((q, pi, count) for q, count in parts)  # each part keeps its parent
    loc = _Locator(doc.blocks)
    versions = plan.code_versions()
    fingerprint = doc_fingerprint((p.parent_id for p in parents), images)
    out = []
    for n, (p, pi, count) in enumerate(fitted):
        parent = parents[pi]
        th = text_hash(p.text)
        out.append(
            Chunk(
                chunk_id=record_id("chunk", doc.strategy_version, doc.doc_id, n, p.start, p.end, th),
                parent_id=parent.parent_id,
                chunk_index=n,
                chunk_type=p.chunk_type,
                **_span_fields(doc, p, count, loc, versions, parent.section_path),
                metadata=dict(p.metadata),
                image_id=p.metadata.get("image_id"),
                text_hash=th,
                doc_fingerprint=fingerprint,
            )
        )
    return out


def chunk_document(
    doc: SourceDocument,
    plan: Plan,
    ctx: ChunkContext,
    images: Sequence[Piece] = (),
    *,
    plan_reasons: Sequence[str] = (),
) -> ChunkedDocument:
    """Parents and children of one document (what ``corpus preview --plan`` shows)."""
    parents = chunk_parents(doc, plan, ctx, plan_reasons=plan_reasons)
    children = chunk_children(doc, plan, parents, ctx, images)
    return ChunkedDocument(parents, children, dict(ctx.stats))
