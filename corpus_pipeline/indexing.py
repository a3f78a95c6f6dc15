"""The indexing steps, as plain functions over Arrow tables: what each Dagster asset calls.

    discover_documents   kb                                   -> documents
    parse_documents      documents                            -> {blocks, texts, images}
    build_parent_blocks  documents, parsed, plan per document -> parent_blocks
    build_child_chunks   parent_blocks, parsed, descriptions  -> child_chunks
    embed_chunks         child_chunks                         -> chunk_embeddings
    write_search_index   child_chunks, chunk_embeddings       -> LanceDB table

Every id is deterministic (same input and version -> same id) so re-runs are idempotent.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from corpus_pipeline.chunking.base import ChunkContext
from corpus_pipeline.chunking.pipeline import cleanup, run_steps
from corpus_pipeline.chunking.plan import Plan
from corpus_pipeline.embedding import EmbeddingCache, embed_with_cache, load_embedder, text_hash
from corpus_pipeline.kbconfig import KnowledgeBase
from corpus_pipeline.models import Block, DocStatus, Document, ParsedDocument, Piece
from corpus_pipeline.parsing import discover, parse_document
from corpus_pipeline.store import schemas
from corpus_pipeline.tokens import token_counter_for

#: Bump when the chunk tables built here change for the same input and strategy versions
#: (columns, ids, image chunk rules): built versions are then stale and rebuilt.
CHUNK_TABLE_VERSION = "3"  # 2: image text cut at the model's token limit; 3: children skip parent overlap


def _hid(*parts: object) -> str:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:24]


def _json(obj: Any) -> str:
    return json.dumps(obj or {}, ensure_ascii=False, sort_keys=True, default=str)


def _table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=schema)


# --------------------------------------------------------------------------- documents


def discover_documents(kb: KnowledgeBase) -> pa.Table:
    rows = []
    for found in discover(kb):
        d = found.document
        rows.append(
            {
                "kb": d.kb,
                "doc_id": d.doc_id,
                "path": d.path,
                "format": d.format,
                "size_bytes": d.size_bytes,
                "content_hash": d.content_hash,
                "plan": d.plan,
                "override": d.override,
                "error": found.error,
            }
        )
    return _table(rows, schemas.DOCUMENTS)


def documents_from_table(table: pa.Table) -> list[tuple[Document, str | None]]:
    out = []
    for r in table.to_pylist():
        err = r.pop("error")
        out.append((Document(**r), err))
    return out


# --------------------------------------------------------------------------- parsing


@dataclass
class ParseStats:
    parsed: int = 0  # documents parsed in this run
    reused: int = 0  # documents whose previous parse was kept (same content hash and parser)
    failed: list[dict[str, str]] = field(default_factory=list)


def _rows_by_doc(table: pa.Table | None) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    if table is not None:
        for r in table.to_pylist():
            out.setdefault(r["doc_id"], []).append(r)
    return out


def parse_documents(
    kb: KnowledgeBase,
    documents: pa.Table,
    previous: dict[str, pa.Table] | None = None,
    *,
    images_dir: Path | None = None,
) -> tuple[dict[str, pa.Table], ParseStats]:
    """Parse every document; failures are rows with ``status=FAILED`` and the error.

    With ``previous`` (this partition's last output), a document whose content hash and
    parser version are unchanged is not parsed again: its rows are carried over.
    """
    from corpus_pipeline.parsing import PARSER_VERSION

    prev_texts = {r["doc_id"]: r for r in previous["texts"].to_pylist()} if previous and "texts" in previous else {}
    prev_blocks = _rows_by_doc(previous.get("blocks")) if previous else {}
    prev_images = _rows_by_doc(previous.get("images")) if previous else {}
    blocks: list[dict[str, Any]] = []
    texts: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    stats = ParseStats()
    for doc, refused in documents_from_table(documents):
        old = prev_texts.get(doc.doc_id)
        if (
            old is not None
            and old["content_hash"] == doc.content_hash
            and old.get("parser_version") == PARSER_VERSION
            and old["path"] == doc.path
            and not refused
        ):
            texts.append(old)
            blocks.extend(prev_blocks.get(doc.doc_id, []))
            images.extend(prev_images.get(doc.doc_id, []))
            stats.reused += 1
            if old["status"] != DocStatus.OK.value:
                stats.failed.append({"path": doc.path, "error": old["error"] or "unknown error"})
            continue
        if refused:
            parsed = ParsedDocument(doc.doc_id, DocStatus.FAILED.value, error=refused)
        else:
            parsed = parse_document(doc, kb.path, images_dir=images_dir)
        stats.parsed += 1
        if parsed.status != DocStatus.OK.value:
            stats.failed.append({"path": doc.path, "error": parsed.error or "unknown error"})
        texts.append(
            {
                "doc_id": doc.doc_id,
                "path": doc.path,
                "format": doc.format,
                "content_hash": doc.content_hash,
                "status": parsed.status,
                "error": parsed.error,
                "text": parsed.text,
                "block_count": len(parsed.blocks),
                "image_count": len(parsed.images),
                "parser_version": PARSER_VERSION,
            }
        )
        for b in parsed.blocks:
            blocks.append(
                {
                    "doc_id": b.doc_id,
                    "block_index": b.block_index,
                    "block_type": b.block_type,
                    "text": b.text,
                    "start_offset": b.start_offset,
                    "end_offset": b.end_offset,
                    "level": b.level,
                    "page_num": b.page_num,
                    "section_path": b.section_path,
                    "image_id": b.image_id,
                    "metadata": _json(b.metadata),
                }
            )
        for im in parsed.images:
            images.append(
                {
                    "image_id": im.image_id,
                    "doc_id": im.doc_id,
                    "block_index": im.block_index,
                    "page_num": im.page_num,
                    "mime_type": im.mime_type,
                    "width": im.width,
                    "height": im.height,
                    "path": im.path,
                    "context_before": im.context_before,
                    "context_after": im.context_after,
                    "source_ref": im.source_ref,
                }
            )
    return (
        {
            "blocks": _table(blocks, schemas.BLOCKS),
            "texts": _table(texts, schemas.TEXTS),
            "images": _table(images, schemas.IMAGES),
        },
        stats,
    )


def _blocks_by_doc(blocks: pa.Table) -> dict[str, list[Block]]:
    out: dict[str, list[Block]] = {}
    for r in blocks.to_pylist():
        r["metadata"] = json.loads(r["metadata"] or "{}")
        out.setdefault(r["doc_id"], []).append(Block(**r))
    for bl in out.values():
        bl.sort(key=lambda b: b.block_index)
    return out


class _Locator:
    """Finds the block at a text offset: its index, page and section path."""

    def __init__(self, blocks: Sequence[Block]) -> None:
        self.blocks = list(blocks)
        self.starts = [b.start_offset for b in self.blocks]

    def at(self, offset: int) -> Block | None:
        i = bisect_right(self.starts, offset) - 1
        if i < 0:
            return self.blocks[0] if self.blocks else None
        return self.blocks[i]


# --------------------------------------------------------------------------- images


@dataclass
class DescribeStats:
    images: int = 0
    by_status: dict[str, int] = field(default_factory=dict)


def describe_kb_images(
    kb: KnowledgeBase, parsed: dict[str, pa.Table], cache_dir: Path | None
) -> tuple[pa.Table, DescribeStats]:
    """Describe every extracted image (vision model, OCR fallback, or skipped with why).
    Results are cached by image hash, so unchanged images cost nothing on a re-run."""
    from corpus_pipeline.models import ExtractedImage
    from corpus_pipeline.vision import describe_images, vision_settings

    images = [ExtractedImage(**r) for r in parsed["images"].to_pylist()]
    descs = describe_images(images, vision_settings(kb.config.vision), cache_dir) if images else []
    rows = []
    stats = DescribeStats(images=len(images))
    for d in descs:
        stats.by_status[d.status] = stats.by_status.get(d.status, 0) + 1
        rows.append(
            {
                "image_id": d.image_id,
                "doc_id": d.doc_id,
                "block_index": d.block_index,
                "page_num": d.page_num,
                "status": d.status,
                "image_type": d.image_type,
                "description": d.description,
                "keywords": list(d.keywords),
                "embedding_text": d.embedding_text,
                "ocr_text": d.ocr_text,
                "degraded": d.degraded,
                "degrade_reason": d.degrade_reason,
                "skip_reason": d.skip_reason,
                "model": d.model,
                "error": d.error,
                "metadata": _json(d.metadata),
            }
        )
    return _table(rows, schemas.IMAGE_DESCRIPTIONS), stats


def image_pieces_by_doc(
    descriptions: pa.Table, parsed: dict[str, pa.Table], token_counter: Any = None
) -> dict[str, list[Piece]]:
    """IMAGE / TABLE_IMAGE pieces per document, placed at their image block.

    An image's text (a description, or OCR of a screenshot) can be longer than the
    embedding model reads; it is cut at the model's token limit rather than silently
    truncated by the model, and the piece records ``truncated_from_tokens``.
    """
    from corpus_pipeline.models import ImageDescription
    from corpus_pipeline.vision import image_pieces

    blocks = _blocks_by_doc(parsed["blocks"])
    by_doc: dict[str, list[ImageDescription]] = {}
    for r in descriptions.to_pylist():
        r["keywords"] = tuple(r["keywords"] or ())
        r["metadata"] = json.loads(r["metadata"] or "{}")
        by_doc.setdefault(r["doc_id"], []).append(ImageDescription(**r))
    out = {doc_id: image_pieces(descs, blocks.get(doc_id, [])) for doc_id, descs in by_doc.items()}
    if token_counter is not None:
        out = {doc_id: [_fit_tokens(p, token_counter) for p in pieces] for doc_id, pieces in out.items()}
    return out


def _fit_tokens(p: Piece, counter: Any) -> Piece:
    limit = counter.max_tokens
    starts = counter.token_starts(p.text)
    if len(starts) <= limit:
        return p
    cut = p.text[: starts[limit]].rstrip()
    meta = {**(p.metadata or {}), "truncated_from_tokens": len(starts)}
    return dataclasses.replace(p, text=cut, metadata=meta)


# --------------------------------------------------------------------------- chunking


@dataclass
class ChunkStats:
    documents: int = 0  # documents chunked in this run
    reused: int = 0  # documents whose previous rows were kept
    rows: int = 0
    fallbacks: int = 0
    # LLM use (PROPOSITION, LLM): requests sent, of which failed; answered from the cache;
    # tokens the endpoint reported for the calls made in this run (cached answers cost none)
    llm_calls: int = 0
    llm_errors: int = 0
    llm_cache_hits: int = 0
    llm_prompt_tokens: int = 0
    llm_completion_tokens: int = 0

    def add_llm_usage(self, llm: Any) -> None:
        if llm is not None:
            u = llm.usage
            self.llm_calls, self.llm_errors, self.llm_cache_hits = u.calls, u.errors + u.skipped, u.cache_hits
            self.llm_prompt_tokens, self.llm_completion_tokens = u.prompt_tokens, u.completion_tokens


def _llm_for(kb: KnowledgeBase, llm_defaults: Any, cache_dir: Path | None) -> Any:
    """The LLM client of the KB (kb.yaml ``llm:`` > ``llm_defaults`` from the resource > the
    environment), caching under ``cache_dir`` (default: $CORPUS_HOME's); None when no plan
    calls an LLM or no model is configured."""
    from corpus_pipeline.llm import kb_calls_llm, open_llm
    from corpus_pipeline.paths import Layout

    if not kb_calls_llm(kb):
        return None
    return open_llm(kb.config.llm, resource=llm_defaults, cache_dir=cache_dir or Layout.from_env().cache)


def _llm_retry(llm: Any, rows: Sequence[dict[str, Any]]) -> bool:
    """Whether a document's previous rows hold LLM fallbacks that may pass (no client then,
    a failed call) while a client is there now: then it is chunked again, not reused."""
    return llm is not None and any('"llm_retry": true' in (r.get("metadata") or "") for r in rows)


def _span_row(
    kb: str, version: str, doc: dict[str, Any], p: Piece, loc: _Locator, tokens: int, versions: dict[str, str]
) -> dict[str, Any]:
    block = loc.at(p.start)
    section = p.section_path or (block.section_path if block else "")
    return {
        "kb": kb,
        "strategy_version": version,
        "doc_id": doc["doc_id"],
        "doc_path": doc["path"],
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
        "metadata": _json(p.metadata),
    }


def _versions(plan: Plan) -> dict[str, str]:
    return {s.strategy: s.build().version for s in plan.parent + plan.child}


def _ok_docs(parsed: dict[str, pa.Table]) -> list[dict[str, Any]]:
    return [r for r in parsed["texts"].to_pylist() if r["status"] == DocStatus.OK.value]


def build_parent_blocks(
    kb: KnowledgeBase,
    version: str,
    parsed: dict[str, pa.Table],
    previous: pa.Table | None = None,
    *,
    llm_defaults: Any = None,
    cache_dir: Path | None = None,
) -> tuple[pa.Table, ChunkStats]:
    """Run each document's parent pipeline (its plan: an override or the KB's).

    With ``previous`` (this partition's last output; same version, so same settings), a
    document whose content hash is unchanged keeps its parent rows.
    """
    counter = token_counter_for(kb.config.embedding.model)
    blocks = _blocks_by_doc(parsed["blocks"])
    prev = _rows_by_doc(previous)
    rows: list[dict[str, Any]] = []
    stats = ChunkStats()
    llm = _llm_for(kb, llm_defaults, cache_dir)
    for doc in _ok_docs(parsed):
        old = prev.get(doc["doc_id"])
        if (
            old
            and all(r["content_hash"] == doc["content_hash"] and r["doc_path"] == doc["path"] for r in old)
            and not _llm_retry(llm, old)
        ):
            rows.extend(sorted(old, key=lambda r: r["parent_index"]))
            stats.reused += 1
            continue
        text = doc["text"]
        doc_blocks = blocks.get(doc["doc_id"], [])
        plan, reasons = kb.plan_for_document(doc["path"], text, doc["format"], doc_blocks, counter)
        ctx = ChunkContext(text=text, token_counter=counter, blocks=doc_blocks, llm=llm)
        whole = Piece(text=text, start=0, end=len(text))
        if plan.parent:
            pieces = run_steps(plan.parent, [whole], ctx)
        else:  # a CHILD-only plan: the whole document is the one parent
            pieces = [dataclasses.replace(p, strategy="DOCUMENT") for p in cleanup([whole])]
        toks = counter.count_batch([p.text for p in pieces])
        loc = _Locator(doc_blocks)
        versions = _versions(plan)
        for i, (p, t) in enumerate(zip(pieces, toks)):
            row = _span_row(kb.name, version, doc, p, loc, t, versions)
            row["parent_index"] = i
            row["parent_id"] = _hid("parent", version, doc["doc_id"], i, p.start, p.end, text_hash(p.text))
            row["metadata"] = _json(
                {**(p.metadata or {}), "plan": plan.snapshot(), **({"plan_reasons": reasons} if reasons else {})}
            )
            row["content_hash"] = doc["content_hash"]
            rows.append(row)
        stats.documents += 1
        stats.fallbacks += ctx.stats.get("fallbacks", 0)
    stats.rows = len(rows)
    stats.add_llm_usage(llm)
    return _table(rows, schemas.PARENT_BLOCKS), stats


def _doc_fingerprint(parent_ids: Iterable[str], image_pieces: Sequence[Piece]) -> str:
    h = hashlib.sha256()
    for pid in parent_ids:
        h.update(pid.encode())
    for p in image_pieces:
        h.update(b"\x1e" + p.text.encode() + _json(p.metadata).encode() + str((p.start, p.end, p.chunk_type)).encode())
    return h.hexdigest()[:24]


def build_child_chunks(
    kb: KnowledgeBase,
    version: str,
    parents: pa.Table,
    parsed: dict[str, pa.Table],
    image_pieces: dict[str, list[Piece]] | None = None,
    previous: pa.Table | None = None,
    *,
    llm_defaults: Any = None,
    cache_dir: Path | None = None,
) -> tuple[pa.Table, ChunkStats]:
    """Run the child pipeline over every parent; add image chunks at their position.

    Children are numbered per document in reading order (images placed by their offset);
    each points to the parent it lies in. A document whose parents and image descriptions
    are unchanged since ``previous`` keeps its child rows.
    """
    from corpus_pipeline.vision import merge_in_reading_order, parent_at

    counter = token_counter_for(kb.config.embedding.model)
    blocks = _blocks_by_doc(parsed["blocks"])
    docs = {d["doc_id"]: d for d in _ok_docs(parsed)}
    by_doc = _rows_by_doc(parents)
    prev = _rows_by_doc(previous)
    rows: list[dict[str, Any]] = []
    stats = ChunkStats()
    llm = _llm_for(kb, llm_defaults, cache_dir)
    for doc_id, prow in by_doc.items():
        doc = docs.get(doc_id)
        if doc is None:
            continue
        prow.sort(key=lambda r: r["parent_index"])
        doc_images = (image_pieces or {}).get(doc_id, [])
        fingerprint = _doc_fingerprint((r["parent_id"] for r in prow), doc_images)
        old = prev.get(doc_id)
        if old and all(r.get("doc_fingerprint") == fingerprint for r in old) and not _llm_retry(llm, old):
            rows.extend(sorted(old, key=lambda r: r["chunk_index"]))
            stats.reused += 1
            continue
        doc_blocks = blocks.get(doc_id, [])
        plan, _ = kb.plan_for_document(doc["path"], doc["text"], doc["format"], doc_blocks, counter)
        ctx = ChunkContext(text=doc["text"], token_counter=counter, blocks=doc_blocks, llm=llm)
        loc = _Locator(doc_blocks)
        versions = _versions(plan)
        items: list[tuple[Piece, dict[str, Any]]] = []
        for pr in prow:
            # Children cut the parent's own span: its overlap prefix repeats the previous
            # parent, whose children already cover it (cutting it again duplicated chunks).
            own = pr["start_offset"] + (0 if pr["derived"] else pr["overlap_chars"] or 0)
            seed = Piece(
                text=doc["text"][own : pr["end_offset"]],
                start=own,
                end=pr["end_offset"],
                section_path=pr["section_path"] or "",
            )
            for child in run_steps(plan.child, [seed], ctx):
                items.append((child, pr))
        if doc_images:
            # Seed 000 §6.3: image chunks join the text chunks in reading order; each belongs
            # to the parent block at its position.
            owner = {id(p): pr for p, pr in items}
            merged = merge_in_reading_order([p for p, _ in items], doc_images)
            items = [(p, owner.get(id(p)) or prow[parent_at(p.start, _Spans(prow)) or 0]) for p in merged]
        toks = counter.count_batch([p.text for p, _ in items])
        for n, ((p, pr), t) in enumerate(zip(items, toks)):
            row = _span_row(kb.name, version, doc, p, loc, t, versions)
            th = text_hash(p.text)
            row.update(
                chunk_id=_hid("chunk", version, doc_id, n, p.start, p.end, th),
                parent_id=pr["parent_id"],
                chunk_index=n,
                chunk_type=p.chunk_type,
                image_id=(p.metadata or {}).get("image_id"),
                text_hash=th,
                doc_fingerprint=fingerprint,
            )
            if row["section_path"] == "" and pr["section_path"]:
                row["section_path"] = pr["section_path"]
            rows.append(row)
        stats.documents += 1
        stats.fallbacks += ctx.stats.get("fallbacks", 0)
    stats.rows = len(rows)
    stats.add_llm_usage(llm)
    return _table(rows, schemas.CHILD_CHUNKS), stats


class _Spans(list):
    """Parent rows seen as objects with start_offset / end_offset (for ``parent_at``)."""

    def __init__(self, rows: Sequence[dict[str, Any]]) -> None:
        super().__init__(_Span(r["start_offset"], r["end_offset"]) for r in rows)


@dataclass(frozen=True)
class _Span:
    start_offset: int
    end_offset: int


# --------------------------------------------------------------------------- embeddings


@dataclass
class EmbedStats:
    embedded: int = 0
    reused: int = 0
    dimension: int = 0


def embed_chunks(
    children: pa.Table, model: str, *, batch_size: int, cache: EmbeddingCache | None
) -> tuple[pa.Table, EmbedStats]:
    texts = children.column("text").to_pylist()
    vecs, embedded, reused = embed_with_cache(texts, lambda: load_embedder(model, batch_size), cache, model_name=model)
    dim = int(vecs.shape[1])
    flat = pa.array(vecs.reshape(-1), type=pa.float32())
    table = pa.table(
        {
            "chunk_id": children.column("chunk_id"),
            "model": pa.array([model] * len(texts), pa.string()),
            "text_hash": children.column("text_hash"),
            "vector": pa.FixedSizeListArray.from_arrays(flat, dim),
        },
        schema=schemas.embeddings_schema(dim),
    )
    return table, EmbedStats(embedded, reused, dim)


def vectors_of(embeddings: pa.Table) -> np.ndarray:
    col = embeddings.column("vector").combine_chunks()
    dim = col.type.list_size
    return np.asarray(col.flatten().to_numpy(zero_copy_only=False), dtype=np.float32).reshape(-1, dim)


def write_search_index(db_path: Path, kb: str, version: str, children: pa.Table, embeddings: pa.Table) -> int:
    from corpus_pipeline.store.lance import write_search_table

    if children.column("chunk_id").to_pylist() != embeddings.column("chunk_id").to_pylist():
        # Align by id (they are produced in the same order, but never trust that silently).
        order = {cid: i for i, cid in enumerate(embeddings.column("chunk_id").to_pylist())}
        idx = [order[c] for c in children.column("chunk_id").to_pylist()]
        embeddings = embeddings.take(idx)
    return write_search_table(db_path, kb, version, children, vectors_of(embeddings))


def table_fingerprint(table: pa.Table, columns: Sequence[str]) -> str:
    """A short hash of some columns of a table, for Dagster data versions: it changes
    exactly when those columns' contents change (row order included)."""
    h = hashlib.sha256()
    for col in columns:
        for v in table.column(col).to_pylist():
            h.update(str(v).encode())
            h.update(b"\x1f")
        h.update(b"\x1e")
    return h.hexdigest()[:16]
