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

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads

import corpus_pipeline.indexing.rows as rows
from corpus_pipeline.chunking.context import ContextFactory
from corpus_pipeline.chunking.document import SourceDocument, chunk_children, chunk_parents, doc_fingerprint
from corpus_pipeline.indexing.describe import descriptions_by_doc
from corpus_pipeline.indexing.parse import blocks_by_doc, image_blocks_by_doc, ok_texts
from corpus_pipeline.indexing.stats import ChunkStats, StageResult
from corpus_pipeline.kbconfig import KnowledgeBase
from corpus_pipeline.models import IMAGE_CHUNK_TYPES, Block, Chunk, DocStatus, DocumentText, ParentBlock, Piece
from corpus_pipeline.progress import ProgressFn, no_progress
from corpus_pipeline.store import schemas

#: ``parsed_blocks`` as a stage gets it: its tables (``texts``, ``blocks``), each read whole,
#: in some columns, or as a dataset a batch reads its documents' rows of (``rows.of_docs``).
Parsed = Mapping[str, pa.Table | pads.Dataset]


def source_document(kb: KnowledgeBase, version: str, text: DocumentText, blocks: Sequence[Block]) -> SourceDocument:
    return SourceDocument(kb.name, version, text.doc_id, text.path, text.format, text.content_hash, text.text, blocks)


def image_pieces_by_doc(
    descriptions: pa.Table | None, parsed: Parsed, doc_ids: Collection[str] | None = None
) -> dict[str, list[Piece]]:
    """IMAGE / TABLE_IMAGE pieces per document (of ``doc_ids`` only, when given: a batch's),
    placed at their image block. Only the documents with images are read of the blocks, and
    only their image blocks are made into records."""
    from corpus_pipeline.vision import image_pieces

    if descriptions is not None and doc_ids is not None:
        descriptions = rows.of_docs(descriptions, doc_ids)
    if descriptions is None or descriptions.num_rows == 0:
        return {}
    by_doc = descriptions_by_doc(descriptions)
    blocks = image_blocks_by_doc(parsed["blocks"], by_doc)
    return {doc_id: image_pieces(descs, blocks.get(doc_id, [])) for doc_id, descs in by_doc.items()}


#: Written into a chunk's metadata when an LLM step fell back for want of a client or a
#: failed call (``chunking``): such a document is chunked again once a client is there.
LLM_RETRY_MARK = '"llm_retry": true'


def _llm_retry_docs(previous: pa.Table | None) -> set[str]:
    """The documents whose previous rows hold LLM fallbacks that may pass (no client then,
    a failed call): when a client is there now, they are chunked again, not reused."""
    return rows.docs_containing(previous, "metadata", LLM_RETRY_MARK)


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


#: The stats a batch counts and a merge adds up (the rest describe the merged table).
_ADDED = (
    "documents", "fallbacks", "recut_chunks", "recut_parts", "llm_calls", "llm_errors", "llm_cache_hits",
    "llm_prompt_tokens", "llm_completion_tokens", "sentences_embedded", "sentences_reused",
)  # fmt: skip


@dataclass(frozen=True)
class ChunkWork:
    """Which documents a chunk stage processes: ``order``, every document of the output
    in its order; ``kept``, those whose previous rows still hold; ``todo``, the others, in
    order (what the stage's batches chunk: ``batches.split(todo, ...)``)."""

    order: list[str]
    kept: frozenset[str]
    todo: list[str]


def parents_to_build(parsed: dict[str, pa.Table], previous: pa.Table | None, *, llm: bool) -> ChunkWork:
    """The parent stage's work: a document keeps its previous parents when its content
    hash and path are theirs (and no LLM fallback waits for a client, ``llm``)."""
    texts = rows.where_equal(parsed["texts"], "status", DocStatus.OK.value)
    order = rows.strings(texts, "doc_id")
    now = zip(order, rows.strings(texts, "content_hash"), rows.strings(texts, "path"), strict=True)
    before = rows.doc_values(previous, "content_hash", "doc_path")
    retry = _llm_retry_docs(previous) if llm else set()
    kept = frozenset(d for d, h, path in now if before.get(d) == {(h, path)} and d not in retry)
    return ChunkWork(order, kept, [d for d in order if d not in kept])


def _parents_by_doc(parents: pa.Table) -> dict[str, list[str]]:
    """Each document's parent ids in ``parent_index`` order, documents in table order."""
    out: dict[str, list[tuple[int, str]]] = {}
    cols = (parents.column(c).to_pylist() for c in ("doc_id", "parent_index", "parent_id"))
    for doc_id, index, pid in zip(*cols, strict=True):
        out.setdefault(doc_id, []).append((index, pid))
    return {d: [pid for _, pid in sorted(ps)] for d, ps in out.items()}


def children_to_build(
    parents: pa.Table,
    parsed: dict[str, pa.Table],
    image_pieces: dict[str, list[Piece]],
    previous: pa.Table | None,
    *,
    llm: bool,
) -> ChunkWork:
    """The child stage's work: a document keeps its previous children when its parents
    and image pieces are theirs (``doc_fingerprint``) and no LLM fallback waits (``llm``)."""
    ok = set(rows.strings(rows.where_equal(parsed["texts"], "status", DocStatus.OK.value), "doc_id"))
    parent_ids = {d: ids for d, ids in _parents_by_doc(parents).items() if d in ok}
    before = rows.doc_values(previous, "doc_fingerprint")
    retry = _llm_retry_docs(previous) if llm else set()
    kept = frozenset(
        d
        for d, ids in parent_ids.items()
        if before.get(d) == {(doc_fingerprint(ids, image_pieces.get(d, [])),)} and d not in retry
    )
    order = list(parent_ids)
    return ChunkWork(order, kept, [d for d in order if d not in kept])


def parent_batch(
    kb: KnowledgeBase,
    version: str,
    parsed: Parsed,
    doc_ids: Sequence[str],
    tools: ContextFactory,
    *,
    progress: ProgressFn = no_progress,
) -> StageResult:
    """The parents of ``doc_ids`` (one batch of ``parents_to_build``'s todo), each by its
    plan (an override's or the KB's), a group of documents at a time; ``progress`` is told
    after each document (``parents``, done, total, ``documents``)."""
    parts, stats, done = [], ChunkStats(), 0
    parsed = rows.narrowed(parsed, doc_ids)
    for group in rows.groups(doc_ids):
        blocks = blocks_by_doc(parsed["blocks"], group)
        new_rows: list[dict[str, Any]] = []
        for text in ok_texts(parsed, group):
            if done:
                progress("parents", done, len(doc_ids), "documents")
            doc_blocks = blocks.get(text.doc_id, [])
            plan, reasons = kb.plan_for_document(text.path, text.text, text.format, doc_blocks, tools.token_counter)
            ctx = tools.context(text.text, doc_blocks)
            parents = chunk_parents(source_document(kb, version, text, doc_blocks), plan, ctx, plan_reasons=reasons)
            tools.absorb(ctx)
            new_rows.extend(schemas.to_rows(parents, ParentBlock))
            stats.documents += 1
            done += 1
        parts.append(pa.Table.from_pylist(new_rows, schema=schemas.PARENT_BLOCKS))
    progress("parents", len(doc_ids), len(doc_ids), "documents")
    _finish(stats, tools)
    return StageResult(rows.in_doc_order(parts, doc_ids, schemas.PARENT_BLOCKS), stats)


def child_batch(
    kb: KnowledgeBase,
    version: str,
    parents: pa.Table | pads.Dataset,
    parsed: Parsed,
    image_pieces: dict[str, list[Piece]],
    doc_ids: Sequence[str],
    tools: ContextFactory,
    *,
    progress: ProgressFn = no_progress,
) -> StageResult:
    """The children of ``doc_ids`` (one batch of ``children_to_build``'s todo): the child
    pipeline over each parent, with the document's image chunks; ``progress`` is told after
    each document (``children``, done, total, ``documents``)."""
    parts, stats, done = [], ChunkStats(), 0
    parsed = rows.narrowed(parsed, doc_ids)
    parents = rows.narrow(parents, doc_ids)
    for group in rows.groups(doc_ids):
        texts = {t.doc_id: t for t in ok_texts(parsed, group)}
        blocks = blocks_by_doc(parsed["blocks"], group)
        group_parents: dict[str, list[ParentBlock]] = {}
        for p in schemas.from_table(rows.of_docs(parents, group), ParentBlock):
            group_parents.setdefault(p.doc_id, []).append(p)
        new_rows: list[dict[str, Any]] = []
        for doc_id in group:
            if done:
                progress("children", done, len(doc_ids), "documents")
            text = texts[doc_id]
            doc_parents = sorted(group_parents.get(doc_id, []), key=lambda p: p.parent_index)
            doc_blocks = blocks.get(doc_id, [])
            plan, _ = kb.plan_for_document(text.path, text.text, text.format, doc_blocks, tools.token_counter)
            ctx = tools.context(text.text, doc_blocks)
            images = image_pieces.get(doc_id, [])
            children = chunk_children(source_document(kb, version, text, doc_blocks), plan, doc_parents, ctx, images)
            tools.absorb(ctx)
            new_rows.extend(schemas.to_rows(children, Chunk))
            stats.documents += 1
            done += 1
        parts.append(pa.Table.from_pylist(new_rows, schema=schemas.CHILD_CHUNKS))
    progress("children", len(doc_ids), len(doc_ids), "documents")
    _finish(stats, tools)
    return StageResult(rows.in_doc_order(parts, doc_ids, schemas.CHILD_CHUNKS), stats)


def merge_chunks(
    work: ChunkWork, previous: pa.Table | pads.Dataset | None, batches: Sequence[Batch], schema: pa.Schema
) -> StageResult:
    """A chunk stage's output as one table: ``ChunkMerge``'s groups concatenated."""
    merge = ChunkMerge(work, previous, batches, schema)
    tables = [table for _docs, table in merge.groups()]
    return StageResult(pa.concat_tables(tables) if tables else schema.empty_table(), merge.stats)


#: A batch's output for a merge: its ``StageResult``, or a callable that reads it (a staged
#: batch, read when its documents' turn comes).
Batch = StageResult | Callable[[], StageResult]


class ChunkMerge:
    """A chunk stage's output, a group of ``size`` documents of ``work.order`` at a time, in
    document order: the kept documents' previous rows (of ``previous``, a table or the
    partition's dataset, of which only those documents' files are read) and the batches'
    rows. The batches are contiguous slices of ``work.todo`` in order, so each is read once,
    when the first of its documents is due; what is held is one group's batch rows and the
    rest of the last batch read, never the partition. ``stats`` (the batches' counts added up, the sizes those of every
    row) is complete once ``groups`` is exhausted."""

    def __init__(
        self,
        work: ChunkWork,
        previous: pa.Table | pads.Dataset | None,
        batches: Sequence[Batch],
        schema: pa.Schema,
        size: int = rows.CHECK_GROUP_DOCS,
    ) -> None:
        self.work, self.previous, self.batches, self.schema, self.size = work, previous, batches, schema, size
        self.stats = ChunkStats(reused=len(work.kept))

    def groups(self) -> Iterator[tuple[list[str], pa.Table]]:
        """(the group's documents, their rows) for every group of ``rows.by_document_groups``
        (one, empty, when there are no documents); rows of documents not in the order are
        dropped (``rows.batch_groups``)."""
        kept = self.work.kept
        read = ({"rows": self._read(batch)} for batch in self.batches)
        for docs, due in rows.batch_groups(self.work.order, read, "rows", self.work.todo, self.size):
            parts = []
            if self.previous is not None and kept:
                parts.append(rows.of_docs(self.previous, [d for d in docs if d in kept]))
            group = rows.in_doc_order([*parts, *due.get("rows", [])], docs, self.schema)
            self._count(group)
            yield docs, group

    def _read(self, batch: Batch) -> pa.Table:
        result = batch() if callable(batch) else batch
        for name in _ADDED:
            setattr(self.stats, name, getattr(self.stats, name) + getattr(result.stats, name))
        return result.table

    def _count(self, group: pa.Table) -> None:
        s = self.stats
        s.rows += group.num_rows
        s.max_chars = max(s.max_chars, rows.column_max(group, "char_count"))
        s.max_tokens = max(s.max_tokens, rows.column_max(group, "token_count"))
        if "chunk_type" in group.column_names:
            s.image_chunks += rows.count_in(group, "chunk_type", IMAGE_CHUNK_TYPES)


def build_parent_blocks(
    kb: KnowledgeBase,
    version: str,
    parsed: dict[str, pa.Table],
    previous: pa.Table | None,
    tools: ContextFactory,
    *,
    progress: ProgressFn = no_progress,
) -> StageResult:
    """Every document's parents in one batch: ``parents_to_build``, ``parent_batch``,
    ``merge_chunks`` (what the ``parent_blocks`` asset runs with its batches fanned out).
    A document whose content and path are those of its previous parents keeps them."""
    work = parents_to_build(parsed, previous, llm=tools.llm is not None)
    batch = parent_batch(kb, version, parsed, work.todo, tools, progress=progress)
    return merge_chunks(work, previous, [batch], schemas.PARENT_BLOCKS)


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
    """Every document's children in one batch: ``children_to_build``, ``child_batch``,
    ``merge_chunks`` (what the ``child_chunks`` asset runs with its batches fanned out).
    A document whose parents and image pieces are unchanged keeps its children."""
    work = children_to_build(parents, parsed, image_pieces, previous, llm=tools.llm is not None)
    batch = child_batch(kb, version, parents, parsed, image_pieces, work.todo, tools, progress=progress)
    return merge_chunks(work, previous, [batch], schemas.CHILD_CHUNKS)
