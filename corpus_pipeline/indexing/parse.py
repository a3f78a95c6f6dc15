"""Stage 2, parse: each document into its canonical text, blocks and images (the
``parsed_blocks`` asset), reusing the previous parse of unchanged documents."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from upath import UPath

from corpus_pipeline.indexing.discover import documents_of
from corpus_pipeline.indexing.stats import ParseStats, StageResult
from corpus_pipeline.kbconfig import KnowledgeBase, ParsingConfig
from corpus_pipeline.models import Block, DocStatus, Document, DocumentText, ExtractedImage, ParsedDocument
from corpus_pipeline.parsing import PARSER_VERSION
from corpus_pipeline.parsing.worker import ParseJob, parse_many
from corpus_pipeline.progress import ProgressFn, no_progress
from corpus_pipeline.store import schemas


def rows_by_doc(table: pa.Table | None) -> dict[str, list[dict[str, Any]]]:
    """A table's rows grouped by ``doc_id`` (in table order)."""
    out: dict[str, list[dict[str, Any]]] = {}
    if table is not None:
        for r in table.to_pylist():
            out.setdefault(r["doc_id"], []).append(r)
    return out


def stopped_by_other_limits(error: str | None, limits: ParsingConfig) -> bool:
    """Whether a failure names a ``parsing.<key> = <value>`` that is no longer the setting
    (the user raised it, as the message said): such a document is parsed again."""
    for key, value in limits.model_dump().items():
        marker = f"parsing.{key} = "
        if error and marker in error and f"{marker}{value:g}" not in error:
            return True
    return False


def _reusable(kb: KnowledgeBase, prev_texts: dict[str, dict[str, Any]], doc: Document) -> dict[str, Any] | None:
    """The previous parse of ``doc`` when it still holds: same content hash, path and
    parser version, and not stopped by a limit that has changed since."""
    old = prev_texts.get(doc.doc_id)
    if (
        old is not None
        and old["content_hash"] == doc.content_hash
        and old.get("parser_version") == PARSER_VERSION
        and old["path"] == doc.path
        and not doc.error
        and not stopped_by_other_limits(old["error"], kb.config.parsing)
    ):
        return old
    return None


def _previous_texts(previous: dict[str, pa.Table] | None) -> dict[str, dict[str, Any]]:
    return {r["doc_id"]: r for r in previous["texts"].to_pylist()} if previous and "texts" in previous else {}


def documents_to_parse(kb: KnowledgeBase, documents: pa.Table, previous: dict[str, pa.Table] | None) -> list[Document]:
    """The documents a run must parse (in table order): the readable ones whose previous
    parse does not hold. The others are carried over by ``merge_parsed``."""
    prev_texts = _previous_texts(previous)
    return [d for d in documents_of(documents) if not d.error and _reusable(kb, prev_texts, d) is None]


def parse_batch(
    kb: KnowledgeBase,
    docs: Sequence[Document],
    *,
    images_dir: UPath | Path | None = None,
    workers: int = 1,
    progress: ProgressFn = no_progress,
    label: str = "parse",
) -> list[ParsedDocument]:
    """Parse ``docs`` (one batch of ``documents_to_parse``), each in a worker process under
    the KB's ``parsing:`` limits (``parsing.worker``), ``workers`` at a time; in order.
    ``progress`` is told after each document (``label``, done, total, ``documents``)."""
    jobs = [ParseJob(d, kb.path, images_dir, kb.config.parsing) for d in docs]
    out: list[ParsedDocument] = []
    for parsed in parse_many(jobs, workers):
        out.append(parsed)
        progress(label, len(out), len(jobs), "documents")
    if len(out) != len(jobs):
        raise RuntimeError(f"the parser pool returned {len(out)} documents for {len(jobs)}")
    return out


def merge_parsed(
    kb: KnowledgeBase,
    documents: pa.Table,
    previous: dict[str, pa.Table] | None,
    parsed: Sequence[ParsedDocument],
) -> StageResult:
    """The ``parsed_blocks`` output: every document of ``documents`` in table order, from
    ``parsed`` (the batches' results, any order) or carried over from ``previous``.
    Failures are rows with ``status=FAILED`` and the error."""
    prev_texts = _previous_texts(previous)
    prev_blocks = rows_by_doc(previous.get("blocks")) if previous else {}
    prev_images = rows_by_doc(previous.get("images")) if previous else {}
    fresh = {p.doc_id: p for p in parsed}
    texts: list[dict[str, Any]] = []
    blocks: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    stats = ParseStats()
    for doc in documents_of(documents):
        stats.documents += 1
        old = None if doc.doc_id in fresh else _reusable(kb, prev_texts, doc)
        if old is not None:
            texts.append(old)
            blocks.extend(prev_blocks.get(doc.doc_id, []))
            images.extend(prev_images.get(doc.doc_id, []))
            stats.reused += 1
            if old["status"] != DocStatus.OK.value:
                stats.failed.append({"path": doc.path, "error": old["error"] or "unknown error"})
            continue
        if doc.error:
            result = ParsedDocument(doc.doc_id, DocStatus.FAILED.value, error=doc.error)
        elif doc.doc_id in fresh:
            result = fresh[doc.doc_id]
        else:
            raise RuntimeError(f"{doc.path}: neither parsed by a batch nor reusable from the previous run")
        stats.parsed += 1
        if result.status != DocStatus.OK.value:
            stats.failed.append({"path": doc.path, "error": result.error or "unknown error"})
        text = DocumentText(
            doc.doc_id, doc.path, doc.format, doc.content_hash, result.status, result.error, result.text,
            len(result.blocks), len(result.images), PARSER_VERSION,
        )  # fmt: skip
        texts.extend(schemas.to_rows([text], DocumentText))
        blocks.extend(schemas.to_rows(result.blocks, Block))
        images.extend(schemas.to_rows(result.images, ExtractedImage))
    tables = {
        "texts": pa.Table.from_pylist(texts, schema=schemas.TEXTS),
        "blocks": pa.Table.from_pylist(blocks, schema=schemas.BLOCKS),
        "images": pa.Table.from_pylist(images, schema=schemas.IMAGES),
    }
    stats.blocks = len(blocks)
    stats.block_types = dict(sorted(Counter(b["block_type"] for b in blocks).items()))
    stats.images = len(images)
    return StageResult(tables, stats)


def parse_documents(
    kb: KnowledgeBase,
    documents: pa.Table,
    previous: dict[str, pa.Table] | None = None,
    *,
    images_dir: UPath | Path | None = None,
    workers: int = 1,
    progress: ProgressFn = no_progress,
) -> StageResult:
    """Parse every document in one batch: ``documents_to_parse``, ``parse_batch``,
    ``merge_parsed`` (what the ``parsed_blocks`` asset runs with its batches fanned out).

    With ``previous`` (this partition's last output), a document whose content hash, path
    and parser version are unchanged is not parsed again: its rows are carried over
    (unless a limit that has changed stopped it). ``progress`` is told after each parsed
    document (``parse``, done, total, ``documents``). Tables: ``texts`` (one
    ``DocumentText`` per document), ``blocks``, ``images``.
    """
    todo = documents_to_parse(kb, documents, previous)
    parsed = parse_batch(kb, todo, images_dir=images_dir, workers=workers, progress=progress)
    result = merge_parsed(kb, documents, previous, parsed)
    if not todo:
        progress("parse", 0, 0, "documents")  # (nothing to parse: the stage is done)
    return result


def blocks_by_doc(blocks: pa.Table) -> dict[str, list[Block]]:
    """The parsed blocks of every document, in reading order."""
    out: dict[str, list[Block]] = {}
    for b in schemas.from_table(blocks, Block):
        out.setdefault(b.doc_id, []).append(b)
    for bl in out.values():
        bl.sort(key=lambda b: b.block_index)
    return out


def ok_texts(parsed: dict[str, pa.Table]) -> list[DocumentText]:
    """The documents that parsed, with their canonical text."""
    return [t for t in schemas.from_table(parsed["texts"], DocumentText) if t.status == DocStatus.OK.value]
