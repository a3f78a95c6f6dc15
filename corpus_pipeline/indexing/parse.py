"""Stage 2, parse: each document into its canonical text, blocks and images (the
``parsed_blocks`` asset), reusing the previous parse of unchanged documents."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads
from upath import UPath

import corpus_pipeline.indexing.rows as rows
from corpus_pipeline.doc_formats import version_of
from corpus_pipeline.errors import StoreError
from corpus_pipeline.indexing.discover import documents_of
from corpus_pipeline.indexing.stats import ParseStats, StageResult
from corpus_pipeline.kbconfig import KnowledgeBase, ParsingConfig
from corpus_pipeline.models import Block, BlockType, DocStatus, Document, DocumentText, ExtractedImage, ParsedDocument
from corpus_pipeline.parsing import PARSER_VERSION
from corpus_pipeline.parsing.worker import ParseJob, parse_many
from corpus_pipeline.progress import ProgressFn, no_progress
from corpus_pipeline.store import schemas


def stopped_by_other_limits(error: str | None, limits: ParsingConfig) -> bool:
    """Whether a failure names a ``parsing.<key> = <value>`` that is no longer the setting
    (the user raised it, as the message said): such a document is parsed again."""
    for key, value in limits.model_dump().items():
        marker = f"parsing.{key} = "
        if error and marker in error and f"{marker}{value:g}" not in error:
            return True
    return False


#: The columns of a previous ``texts`` row that decide whether its parse still holds.
_REUSE_COLUMNS = ("doc_id", "path", "content_hash", "status", "error", "parser_version")


def _reusable(kb: KnowledgeBase, prev_texts: dict[str, dict[str, Any]], doc: Document) -> dict[str, Any] | None:
    """The previous parse of ``doc`` (its ``_REUSE_COLUMNS``) when it still holds: same
    content hash, path and parser version, and not stopped by a limit changed since."""
    old = prev_texts.get(doc.doc_id)
    if (
        old is not None
        and old["content_hash"] == doc.content_hash
        and old.get("parser_version") == version_of(doc.format)
        and old["path"] == doc.path
        and not doc.error
        and not stopped_by_other_limits(old["error"], kb.config.parsing)
    ):
        return old
    return None


def _previous_texts(previous: Mapping[str, pa.Table | pads.Dataset] | None) -> dict[str, dict[str, Any]]:
    """The previous run's ``_REUSE_COLUMNS`` by document (not its texts: they are carried
    over as Arrow rows, ``indexing.rows``; of a dataset, only those columns are read)."""
    if not previous or "texts" not in previous:
        return {}
    texts = previous["texts"]
    cols = [c for c in _REUSE_COLUMNS if c in texts.schema.names]
    table = texts.to_table(columns=cols) if isinstance(texts, pads.Dataset) else texts.select(cols)
    return {r["doc_id"]: r for r in table.to_pylist()}


def previous_parse_state(folder: UPath | Path) -> dict[str, pa.Table] | None:
    """What ``documents_to_parse`` needs of a ``parsed_blocks`` partition's last output: its
    ``texts`` table's ``_REUSE_COLUMNS`` (not the texts, blocks and images: ~300 MB of
    Arrow at 20k documents); None when there is none or it cannot be read (then every
    document is parsed)."""
    from corpus_pipeline.store.parquet import dataset, has_partition

    try:
        if not has_partition(folder, "texts"):
            return None
        ds = dataset(folder, "texts")
        columns = [c for c in _REUSE_COLUMNS if c in ds.schema.names]
        return {"texts": ds.to_table(columns=columns)}
    except (OSError, ValueError, StoreError):  # (unreadable: everything is parsed)
        return None


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


#: The tables of a ``parsed_blocks`` partition (and of a batch's parse).
PARSED_TABLES = {"texts": schemas.TEXTS, "blocks": schemas.BLOCKS, "images": schemas.IMAGES}


def parsed_rows(docs: Sequence[Document], parsed: Sequence[ParsedDocument]) -> dict[str, pa.Table]:
    """``parsed`` (the parses of ``docs``, one batch) as the partition's rows: ``texts`` (one
    ``DocumentText`` each), ``blocks``, ``images``. What a batch step hands to
    ``merge_parsed``: Arrow, not Python objects, so the merge of a large KB holds every
    document's rows compactly, a batch's objects only while that batch is converted."""
    by_id = {d.doc_id: d for d in docs}
    new_rows: dict[str, list[dict[str, Any]]] = {name: [] for name in PARSED_TABLES}
    for result in parsed:
        doc = by_id[result.doc_id]
        text = DocumentText(
            doc.doc_id, doc.path, doc.format, doc.content_hash, result.status, result.error, result.text,
            len(result.blocks), len(result.images), version_of(doc.format) or PARSER_VERSION,
            result.title or "", dict(result.metadata),
        )  # fmt: skip
        new_rows["texts"].extend(schemas.to_rows([text], DocumentText))
        new_rows["blocks"].extend(schemas.to_rows(result.blocks, Block))
        new_rows["images"].extend(schemas.to_rows(result.images, ExtractedImage))
    return {name: pa.Table.from_pylist(new_rows[name], schema=schema) for name, schema in PARSED_TABLES.items()}


#: A batch's rows for the merge (``parsed_rows``), or a callable that reads them (a staged
#: batch, read when its documents' turn comes).
ParsedBatch = Mapping[str, pa.Table] | Callable[[], Mapping[str, pa.Table]]


def merge_parsed(
    kb: KnowledgeBase,
    documents: pa.Table,
    previous: Mapping[str, pa.Table | pads.Dataset] | None,
    parsed: Sequence[ParsedBatch],
) -> StageResult:
    """The ``parsed_blocks`` output as whole tables: ``ParseMerge``'s groups concatenated."""
    merge = ParseMerge(kb, documents, previous, parsed)
    pieces: dict[str, list[pa.Table]] = {name: [] for name in PARSED_TABLES}
    for group in merge.groups():
        for name, table in group.items():
            pieces[name].append(table)
    tables = {name: pa.concat_tables(pieces[name]) for name in PARSED_TABLES}
    return StageResult(tables, merge.stats)


class ParseMerge:
    """The ``parsed_blocks`` output, a group of ``size`` documents of ``documents`` at a
    time in table order: each document's rows from the batches (``parsed_rows`` of a slice
    of ``documents_to_parse``, in order; each read once, when its first document is due:
    ``rows.batch_groups``), or carried over from ``previous`` (tables, or the partition's
    datasets, of which only the kept documents' files are read), or, for a document
    discovery could not read, a failed row made here. What is held is one group's rows and
    the rest of the last batch read, never the partition. ``stats`` is complete once
    ``groups`` is exhausted; failures are rows with ``status=FAILED`` and the error."""

    def __init__(
        self,
        kb: KnowledgeBase,
        documents: pa.Table,
        previous: Mapping[str, pa.Table | pads.Dataset] | None,
        batches: Sequence[ParsedBatch],
        size: int = rows.CHECK_GROUP_DOCS,
    ) -> None:
        self.kb, self.documents, self.previous, self.batches, self.size = kb, documents, previous, batches, size
        self.stats = ParseStats()

    def groups(self) -> Iterator[dict[str, pa.Table]]:
        """Each group's ``texts``, ``blocks`` and ``images`` (one group, empty, when there
        are no documents)."""
        prev_texts = _previous_texts(self.previous)
        docs = {d.doc_id: d for d in documents_of(self.documents)}
        reusable = {i: old for i, d in docs.items() if (old := _reusable(self.kb, prev_texts, d)) is not None}
        read = ((batch() if callable(batch) else batch) for batch in self.batches)
        todo = [i for i, d in docs.items() if i not in reusable and not d.error]  # (``documents_to_parse``)
        block_types: Counter[str] = Counter()
        for ids, due in rows.batch_groups(list(docs), read, "texts", todo, self.size):
            fresh_texts = pa.concat_tables(due["texts"]) if due.get("texts") else schemas.TEXTS.empty_table()
            fresh = dict(
                zip(
                    rows.strings(fresh_texts, "doc_id"),
                    zip(fresh_texts.column("status").to_pylist(), fresh_texts.column("error").to_pylist(), strict=True),
                    strict=True,
                )
            )
            kept = [i for i in ids if i not in fresh and i in reusable]
            unread = [docs[i] for i in ids if i not in fresh and i not in reusable and docs[i].error]
            self._count(ids, docs, fresh, reusable)
            made = (
                parsed_rows(unread, [ParsedDocument(d.doc_id, DocStatus.FAILED.value, error=d.error) for d in unread])
                if unread
                else {}
            )
            group = {}
            for name, schema in PARSED_TABLES.items():
                carried = (
                    [rows.of_docs(self.previous[name], kept)]
                    if self.previous and name in self.previous and kept
                    else []
                )
                extra = [made[name]] if name in made else []
                group[name] = rows.in_doc_order([*carried, *due.get(name, []), *extra], ids, schema)
            self.stats.blocks += group["blocks"].num_rows
            self.stats.images += group["images"].num_rows
            block_types.update(rows.strings(group["blocks"], "block_type"))
            self.stats.block_types = dict(sorted(block_types.items()))
            yield group

    def _count(
        self,
        ids: Sequence[str],
        docs: Mapping[str, Document],
        fresh: Mapping[str, tuple[Any, Any]],
        reusable: Mapping[str, dict[str, Any]],
    ) -> None:
        """A group's documents in the stats, in table order."""
        stats = self.stats
        for doc_id in ids:
            doc = docs[doc_id]
            stats.documents += 1
            if doc_id not in fresh and doc_id in reusable:
                old = reusable[doc_id]
                stats.reused += 1
                if old["status"] != DocStatus.OK.value:
                    stats.failed.append({"path": doc.path, "error": old["error"] or "unknown error"})
                continue
            if doc_id in fresh:
                status, error = fresh[doc_id]
            elif doc.error:
                status, error = DocStatus.FAILED.value, doc.error
            else:
                raise RuntimeError(f"{doc.path}: neither parsed by a batch nor reusable from the previous run")
            stats.parsed += 1
            if status != DocStatus.OK.value:
                stats.failed.append({"path": doc.path, "error": error or "unknown error"})


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
    ``parsed_rows``, ``merge_parsed`` (what the ``parsed_blocks`` asset runs with its batches fanned out).

    With ``previous`` (this partition's last output), a document whose content hash, path
    and parser version are unchanged is not parsed again: its rows are carried over
    (unless a limit that has changed stopped it). ``progress`` is told after each parsed
    document (``parse``, done, total, ``documents``). Tables: ``texts`` (one
    ``DocumentText`` per document), ``blocks``, ``images``.
    """
    todo = documents_to_parse(kb, documents, previous)
    parsed = parse_batch(kb, todo, images_dir=images_dir, workers=workers, progress=progress)
    result = merge_parsed(kb, documents, previous, [parsed_rows(todo, parsed)])
    if not todo:
        progress("parse", 0, 0, "documents")  # (nothing to parse: the stage is done)
    return result


def blocks_by_doc(blocks: pa.Table | pads.Dataset, doc_ids: Collection[str] | None = None) -> dict[str, list[Block]]:
    """The parsed blocks of every document (of ``doc_ids`` only, when given: of a dataset,
    only theirs are read), in reading order."""
    out: dict[str, list[Block]] = {}
    for b in schemas.from_table(rows.whole(blocks) if doc_ids is None else rows.of_docs(blocks, doc_ids), Block):
        out.setdefault(b.doc_id, []).append(b)
    for bl in out.values():
        bl.sort(key=lambda b: b.block_index)
    return out


def image_blocks_by_doc(blocks: pa.Table | pads.Dataset, doc_ids: Collection[str]) -> dict[str, list[Block]]:
    """The IMAGE blocks of ``doc_ids`` (of a dataset, only those documents' rows are read;
    their other blocks are never made into records)."""
    found = rows.where_equal(rows.of_docs(blocks, doc_ids), "block_type", BlockType.IMAGE.value)
    out: dict[str, list[Block]] = {}
    for b in schemas.from_table(found, Block):
        out.setdefault(b.doc_id, []).append(b)
    return out


def ok_texts(
    parsed: Mapping[str, pa.Table | pads.Dataset], doc_ids: Collection[str] | None = None
) -> list[DocumentText]:
    """The documents that parsed (of ``doc_ids`` only, when given: of a dataset, only theirs
    are read), with their canonical text, in table order."""
    texts = rows.whole(parsed["texts"]) if doc_ids is None else rows.of_docs(parsed["texts"], doc_ids)
    return schemas.from_table(rows.where_equal(texts, "status", DocStatus.OK.value), DocumentText)
