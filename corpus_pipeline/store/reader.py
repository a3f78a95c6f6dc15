"""The typed reads of one published snapshot: what every reader of an index reads through.

    read = SnapshotReader(resolve(layout, kb, version))      (or ``reader(layout, kb, v)``)
    read.documents()                 [Document]        the KB's documents as parsed for it
    read.text(doc_id)                DocumentText      a document's canonical text
    read.blocks(doc_id, span=(s, e)) [Block]           its parsed blocks (overlapping a span)
    read.stored_images(doc_id)       [ExtractedImage]  its images as stored
    read.descriptions(doc_id)        [ImageDescription]
    read.parents(ids, docs=...)      [ParentBlock]     by id; ``docs`` opens only their files
    read.children(doc_id)            [Chunk]           a document's child chunks
    read.chunk(chunk_id)             Chunk | None
    read.column(table, columns)      pa.Table          narrow, columnar reads (stats, lists)

Every method returns the records of ``corpus_pipeline.models`` (the tables' schemas derive
from them: ``store.schemas``), reads only the columns it needs and pushes its filters down
to Parquet; a read that knows its documents (``docs=``, a ``doc_id``) opens only the files
that hold them (the partition's manifest lists each file's documents), so what one request
reads does not grow with the KB. The asset names and table names are spelled here and in
``store.snapshots``; a caller names what it wants, never where it lies.

A read of a snapshot that was released meanwhile raises ``SnapshotGone``: resolve again
(``store.snapshots.read_published``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from corpus_pipeline.errors import StoreError
from corpus_pipeline.models import (
    Block,
    Chunk,
    Document,
    DocumentText,
    ExtractedImage,
    ImageDescription,
    ParentBlock,
)
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.schemas import from_table
from corpus_pipeline.store.snapshots import Snapshot, SnapshotGone, SnapshotNotFound, resolve

R = TypeVar("R")

#: The tables a caller names, where each lies (asset, table of the asset) and its record.
TABLES: dict[str, tuple[str, str, type | None]] = {
    "documents": ("documents", "data", Document),
    "texts": ("parsed_blocks", "texts", DocumentText),
    "blocks": ("parsed_blocks", "blocks", Block),
    "images": ("parsed_blocks", "images", ExtractedImage),
    "descriptions": ("image_descriptions", "data", ImageDescription),
    "parents": ("parent_blocks", "data", ParentBlock),
    "children": ("child_chunks", "data", Chunk),
    "embeddings": ("chunk_embeddings", "data", None),
}
_OF: dict[type, str] = {cls: name for name, (_, _, cls) in TABLES.items() if cls is not None}


def _expr(clauses: Iterable[pc.Expression | None]) -> pc.Expression | None:
    out: pc.Expression | None = None
    for c in clauses:
        if c is not None:
            out = c if out is None else out & c
    return out


def _is_in(column: str, values: Collection[str] | None) -> pc.Expression | None:
    if values is None:
        return None
    return pc.field(column).isin(pa.array(sorted(set(values)), pa.string()))


class SnapshotReader:
    """The typed reads of one snapshot (see the module docstring)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    @property
    def kb(self) -> str:
        return self.snapshot.kb

    @property
    def version(self) -> str:
        return self.snapshot.version

    # ------------------------------------------------------------------ generic

    def has(self, table: str) -> bool:
        """Whether the snapshot holds ``table`` (a name of ``TABLES``)."""
        asset, name, _ = TABLES[table]
        return self.snapshot.has(asset, name)

    def count(self, table: str) -> int:
        """How many rows ``table`` has (0 when absent; from the files' footers)."""
        return self.dataset(table).count_rows() if self.has(table) else 0

    def written(self, table: str) -> dict[str, Any]:
        """The run that wrote ``table``'s partition: run id, time, rows ({} when unwritten)."""
        return self.snapshot.manifest(TABLES[table][0])

    def dataset(self, table: str) -> pads.Dataset:
        """``table`` as a lazy pyarrow dataset (DuckDB scans it: ``quality.stats``)."""
        asset, name, _ = TABLES[table]
        return self.snapshot.dataset(asset, name)

    def column(
        self,
        table: str,
        columns: list[str],
        where: pc.Expression | None = None,
        docs: Collection[str] | None = None,
    ) -> pa.Table | None:
        """``columns`` of ``table`` (a name of ``TABLES``) for the rows matching ``where``
        (of ``docs`` only, when given); None when the snapshot does not hold it."""
        return self._read(table, columns, where, docs)

    def _read(
        self,
        table: str,
        columns: list[str] | None,
        where: pc.Expression | None,
        docs: Collection[str] | None = None,
    ) -> pa.Table | None:
        asset, name, _ = TABLES[table]
        if docs is not None and not docs:
            return None
        try:
            return self.snapshot.read(asset, columns, where, name=name, docs=docs)
        except (StoreError, SnapshotGone):
            raise
        except Exception as exc:  # a partial or foreign file: say which, without its path
            raise StoreError(f"cannot read {asset} ({name}) of {self.kb}@{self.version}: {exc}") from exc

    def _records(self, cls: type[R], where: pc.Expression | None, docs: Collection[str] | None = None) -> list[R]:
        table = self._read(_OF[cls], None, where, docs)
        return from_table(table, cls) if table is not None else []

    def count_by_document(self, table: str) -> dict[str, int]:
        """How many rows of ``table`` each document has (by doc_id)."""
        t = self.column(table, ["doc_id"])
        if t is None or t.num_rows == 0:
            return {}
        return dict(Counter(str(d) for d in t.column("doc_id").to_pylist()))

    # ------------------------------------------------------------------ documents

    def documents(self, doc_ids: Collection[str] | None = None) -> list[Document]:
        return self._records(Document, _is_in("doc_id", doc_ids), doc_ids)

    def document(self, doc_id: str) -> Document | None:
        found = self.documents([doc_id])
        return found[0] if found else None

    def text(self, doc_id: str) -> DocumentText | None:
        """A document's canonical text (what every offset points into)."""
        found = self._records(DocumentText, pc.field("doc_id") == doc_id, [doc_id])
        return found[0] if found else None

    def texts_by_path(self) -> dict[str, str] | None:
        """Every parsed document's canonical text by its path; None when not parsed."""
        t = self._read("texts", ["path", "text"], None)
        if t is None:
            return None
        return {r["path"]: r["text"] or "" for r in t.to_pylist()}

    def blocks(
        self, doc_id: str, *, span: tuple[int, int] | None = None, block_index: int | None = None
    ) -> list[Block]:
        """A document's parsed blocks in order: all, those overlapping ``span`` (start, end),
        or the one at ``block_index``."""
        where = [pc.field("doc_id") == doc_id]
        if block_index is not None:
            where.append(pc.field("block_index") == block_index)
        if span is not None:
            where += [pc.field("start_offset") < span[1], pc.field("end_offset") > span[0]]
        return sorted(self._records(Block, _expr(where), [doc_id]), key=lambda b: b.block_index)

    def stored_images(
        self, doc_id: str | None = None, image_ids: Collection[str] | None = None
    ) -> list[ExtractedImage]:
        """Images as parsing stored them (of a document, or by id)."""
        where = _expr([pc.field("doc_id") == doc_id if doc_id else None, _is_in("image_id", image_ids)])
        return self._records(ExtractedImage, where, [doc_id] if doc_id else None)

    def descriptions(self, doc_id: str | None = None, image_id: str | None = None) -> list[ImageDescription]:
        """What the vision step made of images (of a document, or one image)."""
        where = _expr(
            [pc.field("doc_id") == doc_id if doc_id else None, pc.field("image_id") == image_id if image_id else None]
        )
        return self._records(ImageDescription, where, [doc_id] if doc_id else None)

    # ------------------------------------------------------------------ chunks

    def parents(
        self,
        ids: Collection[str] | None = None,
        *,
        doc_id: str | None = None,
        docs: Collection[str] | None = None,
    ) -> list[ParentBlock]:
        """Parent blocks by id, or of a document (in its order). ``docs``: the documents the
        ids belong to, when known (only their files are opened)."""
        where = _expr([_is_in("parent_id", ids), pc.field("doc_id") == doc_id if doc_id else None])
        within = [doc_id] if doc_id else docs
        out = self._records(ParentBlock, where, within)
        return sorted(out, key=lambda p: (p.start_offset, p.parent_index)) if doc_id else out

    def children(
        self,
        doc_id: str | None = None,
        *,
        ids: Collection[str] | None = None,
        chunk_types: Collection[str] | None = None,
        docs: Collection[str] | None = None,
    ) -> list[Chunk]:
        """Child chunks of a document (in reading order), by id, or of some types."""
        where = _expr(
            [
                pc.field("doc_id") == doc_id if doc_id else None,
                _is_in("chunk_id", ids),
                _is_in("chunk_type", chunk_types),
            ]
        )
        out = self._records(Chunk, where, [doc_id] if doc_id else docs)
        return sorted(out, key=lambda c: c.chunk_index) if doc_id else out

    def chunk(self, chunk_id: str) -> Chunk | None:
        found = self.children(ids=[chunk_id])
        return found[0] if found else None

    def chunks_where(self, where: pc.Expression, limit: int) -> list[Chunk]:
        """At most ``limit`` child chunks matching ``where`` (an id prefix, say)."""
        table = self._read("children", None, where)
        return from_table(table.slice(0, limit), Chunk) if table is not None else []


def reader(layout: Layout, kb: str, version: str) -> SnapshotReader:
    """The reader of the snapshot of (kb, version) published now."""
    return SnapshotReader(resolve(layout, kb, version))


def published_readers(layout: Layout, kb: str) -> list[SnapshotReader]:
    """A reader of each published version of ``kb`` (of every version that has files, for
    a KB built before snapshots existed)."""
    out = []
    for v in layout.versions_with_partition("child_chunks", kb):
        try:
            out.append(SnapshotReader(resolve(layout, kb, v)))
        except SnapshotNotFound:
            continue  # (being built, or stopped by its checks: not published)
    return out
