"""Stage 2, parse: each document into its canonical text, blocks and images (the
``parsed_blocks`` asset), reusing the previous parse of unchanged documents."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa

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


def parse_documents(
    kb: KnowledgeBase,
    documents: pa.Table,
    previous: dict[str, pa.Table] | None = None,
    *,
    images_dir: Path | None = None,
    workers: int = 1,
    progress: ProgressFn = no_progress,
) -> StageResult:
    """Parse every document; failures are rows with ``status=FAILED`` and the error.

    Each document is parsed in a worker process under the KB's ``parsing:`` limits
    (``parsing.worker``), ``workers`` at a time. With ``previous`` (this partition's last
    output), a document whose content hash, path and parser version are unchanged is not
    parsed again: its rows are carried over (unless a limit that has changed stopped it).
    ``progress`` is told after each document (``parse``, done, total, ``documents``).
    Tables: ``texts`` (one ``DocumentText`` per document), ``blocks``, ``images``.
    """
    prev_texts = {r["doc_id"]: r for r in previous["texts"].to_pylist()} if previous and "texts" in previous else {}
    prev_blocks = rows_by_doc(previous.get("blocks")) if previous else {}
    prev_images = rows_by_doc(previous.get("images")) if previous else {}
    texts: list[dict[str, Any]] = []
    blocks: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    stats = ParseStats()
    limits = kb.config.parsing
    docs = documents_of(documents)

    def reusable(doc: Document) -> dict[str, Any] | None:
        old = prev_texts.get(doc.doc_id)
        if (
            old is not None
            and old["content_hash"] == doc.content_hash
            and old.get("parser_version") == PARSER_VERSION
            and old["path"] == doc.path
            and not doc.error
            and not stopped_by_other_limits(old["error"], limits)
        ):
            return old
        return None

    jobs = [ParseJob(d, kb.path, images_dir, limits) for d in docs if not d.error and reusable(d) is None]
    results = parse_many(jobs, workers)
    for doc in docs:
        if stats.documents:
            progress("parse", stats.documents, len(docs), "documents")  # the one before is done
        stats.documents += 1
        old = reusable(doc)
        if old is not None:
            texts.append(old)
            blocks.extend(prev_blocks.get(doc.doc_id, []))
            images.extend(prev_images.get(doc.doc_id, []))
            stats.reused += 1
            if old["status"] != DocStatus.OK.value:
                stats.failed.append({"path": doc.path, "error": old["error"] or "unknown error"})
            continue
        if doc.error:
            parsed = ParsedDocument(doc.doc_id, DocStatus.FAILED.value, error=doc.error)
        else:
            parsed = next(results)
        stats.parsed += 1
        if parsed.status != DocStatus.OK.value:
            stats.failed.append({"path": doc.path, "error": parsed.error or "unknown error"})
        text = DocumentText(
            doc.doc_id, doc.path, doc.format, doc.content_hash, parsed.status, parsed.error, parsed.text,
            len(parsed.blocks), len(parsed.images), PARSER_VERSION,
        )  # fmt: skip
        texts.extend(schemas.to_rows([text], DocumentText))
        blocks.extend(schemas.to_rows(parsed.blocks, Block))
        images.extend(schemas.to_rows(parsed.images, ExtractedImage))
    if next(results, None) is not None:  # runs the generator to its end: the workers go back to the pool
        raise RuntimeError("the parser pool returned more documents than it was given")
    progress("parse", len(docs), len(docs), "documents")
    tables = {
        "texts": pa.Table.from_pylist(texts, schema=schemas.TEXTS),
        "blocks": pa.Table.from_pylist(blocks, schema=schemas.BLOCKS),
        "images": pa.Table.from_pylist(images, schema=schemas.IMAGES),
    }
    stats.blocks = len(blocks)
    stats.block_types = dict(sorted(Counter(b["block_type"] for b in blocks).items()))
    stats.images = len(images)
    return StageResult(tables, stats)


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
