"""Lineage of one chunk: where it came from, which plan cut it, which run wrote it.

``trace_chunk(layout, chunk_id)`` finds the chunk in the child chunks of every published
snapshot (``store.snapshots``; a unique prefix of at least 8 characters also works) and
gathers, from that one snapshot only (no Dagster):

    chunk          the row (text, offsets, sizes, strategy, type, section, page)
    parent         its parent block
    blocks         the parsed blocks its span overlaps (type, page, section, offsets)
    document       path, format, content hash, pages, offsets and the source excerpt with
                   the chunk's span highlighted (checked against the canonical text)
    plan           the document's plan (the KB's or the matching override) with every
                   step's configuration, as registered for the strategy version
    fallbacks      fallbacks and special cuts recorded in the chunk's and parent's metadata
                   (and an image chunk's description status)
    run            the Dagster run that wrote the chunk (run id, time), and the runs of
                   the parent blocks, embeddings and parse it depends on
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pyarrow.compute as pc

from corpus_pipeline.errors import StoreError
from corpus_pipeline.models import Chunk
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.reader import SnapshotReader, published_readers
from corpus_pipeline.store.snapshots import SnapshotGone
from corpus_pipeline.store.versions import active_version, version_info

HIGHLIGHT = ("«", "»")  # around the chunk's span in ``excerpt.highlighted``
_FLAG_KEYS = ("hard_cut", "forced_split", "merged_small", "split_reason", "degraded", "degrade_reason")
_MIN_PREFIX = 8


def _snapshots(layout: Layout) -> list[SnapshotReader]:
    """The published snapshot of every (kb, version) with child chunks."""
    return [r for kb in layout.list_kbs() for r in published_readers(layout, kb) if r.has("children")]


def find_chunk(layout: Layout, chunk_id: str) -> tuple[Chunk, SnapshotReader]:
    """The child chunk ``chunk_id`` and the published snapshot it was found in."""
    snaps = _snapshots(layout)
    if not snaps:
        raise StoreError("no published child chunks yet; index a knowledge base first (`corpus index`).")
    chunk_id = chunk_id.strip()
    rows = _matching(snaps, pc.field("chunk_id") == chunk_id)
    if not rows and len(chunk_id) >= _MIN_PREFIX:
        rows = _matching(snaps, pc.starts_with(pc.field("chunk_id"), chunk_id))
        if len(rows) > 1:
            ids = ", ".join(c.chunk_id for c, _ in rows[:5])
            raise StoreError(f"chunk id prefix {chunk_id!r} is ambiguous: {ids}{', …' if len(rows) > 5 else ''}")
    if not rows:
        raise StoreError(
            f"chunk {chunk_id!r} was not found in the {len(snaps)} published version(s). Chunk ids come from "
            "`corpus search --json` (hits[].chunk_id); the chunks of a document edited or deleted since, and "
            "of a retired version, are gone."
        )
    return rows[0]


def _matching(snaps: list[SnapshotReader], expr: pc.Expression, limit: int = 6) -> list[tuple[Chunk, SnapshotReader]]:
    out: list[tuple[Chunk, SnapshotReader]] = []
    for read in snaps:
        try:
            found = read.chunks_where(expr, limit)
        except SnapshotGone:
            continue  # (a snapshot released meanwhile: the newer one is in the list)
        out += [(c, read) for c in found]
        if len(out) >= limit:
            break
    return out


def _run_of(read: SnapshotReader, table: str) -> dict[str, Any] | None:
    m = read.written(table)
    if not m:
        return None
    return {k: m.get(k) for k in ("run_id", "written_at", "asset", "partition") if m.get(k) is not None}


def _record(record: Any, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    """A record as JSON-ready data, its fields in order (``metadata`` parsed)."""
    return {f.name: getattr(record, f.name) for f in dataclasses.fields(record) if f.name not in drop}


def _plan_for(layout: Layout, kb: str, version: str, doc: dict[str, Any] | None) -> dict[str, Any]:
    f = layout.version_file(kb, version)
    info = version_info(layout, kb, version)
    inputs = info.get("inputs") or {}
    override = (doc or {}).get("override")
    plan = inputs.get("plan") or {}
    if override:
        plan = next((o.get("plan") or {} for o in inputs.get("overrides") or [] if o.get("match") == override), plan)
    return {
        "snapshot": plan.get("snapshot") or (doc or {}).get("plan"),
        "override": override,
        "parent": plan.get("parent"),
        "child": plan.get("child"),
        "embedding_model": inputs.get("embedding_model"),
        "strategy_code_versions": inputs.get("strategy_code_versions"),
        "registered": f.exists(),
    }


def _fallbacks(level: str, meta: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if any(k.startswith("fallback") for k in meta):
        out.append(
            {
                "level": level,
                "from": meta.get("fallback_from"),
                "to": meta.get("fallback_to"),
                "reason": meta.get("fallback_reason"),
            }
        )
    flags = {k: meta[k] for k in _FLAG_KEYS if meta.get(k) not in (None, False, "")}
    if flags:
        out.append({"level": level, "flags": flags})
    return out


def _excerpt(text: str, start: int, end: int, overlap: int, context: int) -> dict[str, Any]:
    a, b = max(0, start - context), min(len(text), end + context)
    before, span, after = text[a:start], text[start:end], text[end:b]
    return {
        "start_offset": start,
        "end_offset": end,
        "context_start": a,
        "context_end": b,
        "before": before,
        "span": span,
        "after": after,
        "overlap_chars": overlap,
        "highlighted": ("…" if a > 0 else "")
        + before
        + HIGHLIGHT[0]
        + span
        + HIGHLIGHT[1]
        + after
        + ("…" if b < len(text) else ""),
    }


def trace_chunk(layout: Layout, chunk_id: str, *, context_chars: int = 200) -> dict[str, Any]:
    """Everything known about one chunk's origin, as plain JSON-ready data, all of it from
    the one snapshot the chunk was found in (once more when that snapshot was released
    while it was read)."""
    try:
        return _trace(layout, chunk_id, context_chars)
    except SnapshotGone:
        return _trace(layout, chunk_id, context_chars)


def _trace(layout: Layout, chunk_id: str, context_chars: int) -> dict[str, Any]:
    found, read = find_chunk(layout, chunk_id)
    kb, version = read.kb, read.version
    row = _record(found)
    chunk_meta = found.metadata
    chunk = {k: v for k, v in row.items() if k != "metadata"}
    chunk["metadata"] = chunk_meta
    doc_id = found.doc_id
    parents = read.parents([found.parent_id], docs=[doc_id])
    parent = _record(parents[0]) if parents else None
    document_record = read.document(doc_id)
    doc = _record(document_record) if document_record is not None else None
    text_record = read.text(doc_id)
    blocks: list[dict[str, Any]] = []
    if read.has("blocks"):
        if found.derived and found.block_index is not None:
            parsed = read.blocks(doc_id, block_index=found.block_index)
        else:
            parsed = read.blocks(doc_id, span=(found.start_offset, found.end_offset))
        cols = ["block_index", "block_type", "page_num", "section_path", "level", "start_offset", "end_offset"]
        for b in parsed:
            blocks.append({**{c: getattr(b, c) for c in cols}, "image_id": b.image_id, "text_start": b.text[:160]})
    image = None
    if found.image_id:
        described = read.descriptions(doc_id, found.image_id)
        image = _record(described[0]) if described else None

    notes: list[str] = []
    canonical = text_record.text if text_record is not None else None
    document: dict[str, Any] = {"doc_id": doc_id, "path": row.get("doc_path")}
    if doc:
        document.update(
            {
                "path": doc["path"],
                "absolute_path": str(layout.kb_dir(kb) / doc["path"]),
                "format": doc.get("format"),
                "size_bytes": doc.get("size_bytes"),
                "content_hash": doc.get("content_hash"),
            }
        )
    pages = sorted({b["page_num"] for b in blocks if b.get("page_num") is not None})
    document["page_num"] = row.get("page_num")
    document["pages"] = pages
    document["start_offset"], document["end_offset"] = row["start_offset"], row["end_offset"]
    document["section_path"] = row.get("section_path")
    if canonical is not None:
        document["excerpt"] = _excerpt(
            canonical, row["start_offset"], row["end_offset"], row.get("overlap_chars") or 0, context_chars
        )
        if not row.get("derived"):
            ok = canonical[row["start_offset"] : row["end_offset"]] == row["text"]
            document["offsets_verified"] = ok
            if not ok:
                notes.append(
                    "the chunk's text no longer equals canonical_text[start:end]: the document was parsed again "
                    "after this version was chunked (a version built before published snapshots), so the "
                    "excerpt and blocks come from the newer parse."
                )
    else:
        notes.append("the document's canonical text is not in parsed_blocks any more (removed or failed to parse).")
    if parent and doc and parent.get("content_hash") and doc.get("content_hash") != parent.get("content_hash"):
        notes.append("the document's file changed since this version was chunked (content hash differs).")

    fallbacks = _fallbacks("child", chunk_meta)
    parent_out = None
    if parent:
        pmeta = parent.get("metadata") or {}
        fallbacks += _fallbacks("parent", pmeta)
        parent_out = {k: v for k, v in parent.items() if k not in ("metadata", "kb", "strategy_version")}
        parent_out["metadata"] = pmeta
    else:
        notes.append(f"parent block {row['parent_id']} is not in parent_blocks of {kb}@{version}.")
    if image:
        fallbacks.append(
            {
                "level": "image",
                "status": image.get("status"),
                "degraded": bool(image.get("degraded")),
                "reason": image.get("degrade_reason"),
                "model": image.get("model"),
            }
        )

    runs = {
        asset: _run_of(read, table)
        for asset, table in (
            ("child_chunks", "children"),
            ("parent_blocks", "parents"),
            ("chunk_embeddings", "embeddings"),
            ("parsed_blocks", "blocks"),
            ("documents", "documents"),
        )
    }
    if runs["child_chunks"] is None:
        notes.append("the child_chunks partition has no _manifest.json (written before runs were recorded).")
    return {
        "chunk_id": row["chunk_id"],
        "kb": kb,
        "strategy_version": version,
        "active": active_version(layout, kb) == version,
        "chunk": chunk,
        "parent": parent_out,
        "blocks": blocks,
        "document": document,
        "plan": _plan_for(layout, kb, version, doc),
        "strategy": {"name": row.get("strategy"), "code_version": row.get("strategy_code_version")},
        "fallbacks": fallbacks,
        "run": runs["child_chunks"],
        "runs": runs,
        "notes": notes,
    }
