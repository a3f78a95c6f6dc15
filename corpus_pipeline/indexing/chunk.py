"""Stage 4, chunk: parent blocks and child chunks of a KB at one strategy version (the
``parent_blocks`` and ``child_chunks`` assets).

Both run ``corpus_pipeline.chunking.document``, the one parent/child algorithm that
``corpus preview`` runs too, with the tools of ``chunking.context.ContextFactory``; this
module only chooses which documents to chunk (incremental reuse) and turns the records
into tables. A document keeps its previous rows when nothing it depends on changed: for
parents its content (same version, so same settings), for children its parents and its
image descriptions (``doc_fingerprint``). A document whose previous rows hold LLM
fallbacks that may pass (``llm_retry``) is chunked again once an LLM client is there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from corpus_pipeline.chunking.context import ContextFactory
from corpus_pipeline.chunking.document import SourceDocument, chunk_children, chunk_parents, doc_fingerprint
from corpus_pipeline.indexing.describe import descriptions_by_doc
from corpus_pipeline.indexing.parse import blocks_by_doc, ok_texts, rows_by_doc
from corpus_pipeline.indexing.stats import ChunkStats, StageResult
from corpus_pipeline.kbconfig import KnowledgeBase
from corpus_pipeline.models import IMAGE_CHUNK_TYPES, Block, Chunk, DocumentText, ParentBlock, Piece
from corpus_pipeline.progress import ProgressFn, no_progress
from corpus_pipeline.store import schemas


def source_document(kb: KnowledgeBase, version: str, text: DocumentText, blocks: Sequence[Block]) -> SourceDocument:
    return SourceDocument(kb.name, version, text.doc_id, text.path, text.format, text.content_hash, text.text, blocks)


def image_pieces_by_doc(descriptions: pa.Table | None, parsed: dict[str, pa.Table]) -> dict[str, list[Piece]]:
    """IMAGE / TABLE_IMAGE pieces per document, placed at their image block."""
    from corpus_pipeline.vision import image_pieces

    if descriptions is None:
        return {}
    blocks = blocks_by_doc(parsed["blocks"])
    return {
        doc_id: image_pieces(descs, blocks.get(doc_id, []))
        for doc_id, descs in descriptions_by_doc(descriptions).items()
    }


def _llm_retry(tools: ContextFactory, rows: Sequence[dict[str, Any]]) -> bool:
    """Whether a document's previous rows hold LLM fallbacks that may pass (no client then,
    a failed call) while a client is there now: then it is chunked again, not reused."""
    return tools.llm is not None and any('"llm_retry": true' in (r.get("metadata") or "") for r in rows)


def _finish(stats: ChunkStats, tools: ContextFactory) -> None:
    stats.fallbacks += tools.stats.get("fallbacks", 0)
    stats.recut_chunks += tools.stats.get("recut_chunks", 0)
    stats.recut_parts += tools.stats.get("recut_parts", 0)
    if tools.llm is not None:
        u = tools.llm.usage
        stats.llm_calls, stats.llm_errors, stats.llm_cache_hits = u.calls, u.errors + u.skipped, u.cache_hits
        stats.llm_prompt_tokens, stats.llm_completion_tokens = u.prompt_tokens, u.completion_tokens
    emb = tools.embedder
    if emb is not None:
        stats.sentences_embedded = int(getattr(emb, "embedded", 0))
        stats.sentences_reused = int(getattr(emb, "reused", 0))


def _sizes(stats: ChunkStats, table: pa.Table) -> None:
    stats.rows = table.num_rows
    chars = [int(c or 0) for c in table.column("char_count").to_pylist()]
    tokens = [int(t or 0) for t in table.column("token_count").to_pylist()]
    stats.max_chars = max(chars, default=0)
    stats.max_tokens = max(tokens, default=0)


def build_parent_blocks(
    kb: KnowledgeBase,
    version: str,
    parsed: dict[str, pa.Table],
    previous: pa.Table | None,
    tools: ContextFactory,
    *,
    progress: ProgressFn = no_progress,
) -> StageResult:
    """Run each document's parent pipeline (its plan: an override's or the KB's);
    ``progress`` is told after each document (``parents``, done, total, ``documents``)."""
    blocks = blocks_by_doc(parsed["blocks"])
    prev = rows_by_doc(previous)
    rows: list[dict[str, Any]] = []
    stats = ChunkStats()
    texts = ok_texts(parsed)
    for i, text in enumerate(texts):
        if i:
            progress("parents", i, len(texts), "documents")
        old = prev.get(text.doc_id)
        if (
            old
            and all(r["content_hash"] == text.content_hash and r["doc_path"] == text.path for r in old)
            and not _llm_retry(tools, old)
        ):
            rows.extend(sorted(old, key=lambda r: r["parent_index"]))
            stats.reused += 1
            continue
        doc_blocks = blocks.get(text.doc_id, [])
        plan, reasons = kb.plan_for_document(text.path, text.text, text.format, doc_blocks, tools.token_counter)
        ctx = tools.context(text.text, doc_blocks)
        parents = chunk_parents(source_document(kb, version, text, doc_blocks), plan, ctx, plan_reasons=reasons)
        tools.absorb(ctx)
        rows.extend(schemas.to_rows(parents, ParentBlock))
        stats.documents += 1
    progress("parents", len(texts), len(texts), "documents")
    table = pa.Table.from_pylist(rows, schema=schemas.PARENT_BLOCKS)
    _sizes(stats, table)
    _finish(stats, tools)
    return StageResult(table, stats)


def build_child_chunks(
    kb: KnowledgeBase,
    version: str,
    parents: pa.Table,
    parsed: dict[str, pa.Table],
    image_pieces: dict[str, list[Piece]],
    previous: pa.Table | None,
    tools: ContextFactory,
    *,
    progress: ProgressFn = no_progress,
) -> StageResult:
    """Run the child pipeline over every parent, with each document's image chunks;
    ``progress`` is told after each document (``children``, done, total, ``documents``)."""
    blocks = blocks_by_doc(parsed["blocks"])
    texts = {t.doc_id: t for t in ok_texts(parsed)}
    parents_by_doc: dict[str, list[ParentBlock]] = {}
    for p in schemas.from_table(parents, ParentBlock):
        parents_by_doc.setdefault(p.doc_id, []).append(p)
    prev = rows_by_doc(previous)
    rows: list[dict[str, Any]] = []
    stats = ChunkStats()
    for i, (doc_id, doc_parents) in enumerate(parents_by_doc.items()):
        if i:
            progress("children", i, len(parents_by_doc), "documents")
        text = texts.get(doc_id)
        if text is None:
            continue
        doc_parents.sort(key=lambda p: p.parent_index)
        images = image_pieces.get(doc_id, [])
        old = prev.get(doc_id)
        fingerprint = doc_fingerprint((p.parent_id for p in doc_parents), images)
        if old and all(r.get("doc_fingerprint") == fingerprint for r in old) and not _llm_retry(tools, old):
            rows.extend(sorted(old, key=lambda r: r["chunk_index"]))
            stats.reused += 1
            continue
        doc_blocks = blocks.get(doc_id, [])
        plan, _ = kb.plan_for_document(text.path, text.text, text.format, doc_blocks, tools.token_counter)
        ctx = tools.context(text.text, doc_blocks)
        children = chunk_children(source_document(kb, version, text, doc_blocks), plan, doc_parents, ctx, images)
        tools.absorb(ctx)
        rows.extend(schemas.to_rows(children, Chunk))
        stats.documents += 1
    progress("children", len(parents_by_doc), len(parents_by_doc), "documents")
    table = pa.Table.from_pylist(rows, schema=schemas.CHILD_CHUNKS)
    _sizes(stats, table)
    stats.image_chunks = sum(1 for t in table.column("chunk_type").to_pylist() if t in IMAGE_CHUNK_TYPES)
    _finish(stats, tools)
    return StageResult(table, stats)
