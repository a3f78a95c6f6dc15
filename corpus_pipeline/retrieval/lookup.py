"""Parent blocks and image texts, read as a search needs them.

A search elevates at most ``candidate_top_k`` children to their parents and lays images into
at most ``final_top_k`` parents, so it needs a few dozen parents and the images of a few
documents, never the version's all. ``Lookup`` reads those (through ``store.reader``: only
the Parquet files that hold the hits' documents, only the rows asked for, and image texts
only for documents that have images) and keeps the most recently used in a bounded cache, so
the memory of an open KB does not grow with its number of parents or images. A version with
at most ``CACHED_PARENTS`` parents (~60 MB of them) is read whole when the searcher opens, as
every version was before: a small KB pays no read per search. What a snapshot holds never changes: a cached parent stays true for the
searcher's life (a new snapshot opens a new searcher).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from upath import UPath

from corpus_pipeline.errors import StoreError
from corpus_pipeline.models import IMAGE_CHUNK_TYPES
from corpus_pipeline.retrieval.elevation import ChildHit, Parent, ParentResult
from corpus_pipeline.retrieval.evidence import ImageText
from corpus_pipeline.store.parquet import read_columns
from corpus_pipeline.store.reader import SnapshotReader
from corpus_pipeline.store.snapshots import Snapshot

PARENT_COLUMNS = ["parent_id", "text", "doc_path", "section_path", "start_offset", "end_offset", "overlap_chars"]
IMAGE_COLUMNS = [
    "doc_id", "doc_path", "chunk_index", "chunk_type", "text", "start_offset", "end_offset", "overlap_chars", "metadata",
]  # fmt: skip
#: Parents and documents' image lists kept between searches (the most recently used); a
#: version with at most this many parents has all of them read when a searcher opens.
CACHED_PARENTS = 8192
CACHED_DOCUMENTS = 1024


class Recent:
    """At most ``cap`` entries, the least recently used dropped first; thread-safe (a
    batch in, a batch out: what ``functools.lru_cache`` cannot do)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._d: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get_many(self, keys: Iterable[Any]) -> dict[Any, Any]:
        with self._lock:
            out = {}
            for k in keys:
                if k in self._d:
                    self._d.move_to_end(k)
                    out[k] = self._d[k]
            return out

    def put_many(self, items: Mapping[Any, Any]) -> None:
        with self._lock:
            for k, v in items.items():
                self._d[k] = v
                self._d.move_to_end(k)
            while len(self._d) > self.cap:
                self._d.popitem(last=False)

    def __len__(self) -> int:
        return len(self._d)


def _parent(r: Mapping[str, Any]) -> Parent:
    return Parent(
        r["parent_id"],
        r["text"] or "",
        r["doc_path"] or "",
        r["section_path"] or "",
        int(r["start_offset"]),
        int(r["end_offset"]),
        int(r["overlap_chars"] or 0),
    )


def image_texts(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[ImageText]]:
    """The text of each image of IMAGE / TABLE_IMAGE child rows, by document path (the
    pieces of a long image text cut into several chunks joined again)."""
    joined: dict[tuple[str, str], list[Any]] = {}
    for r in sorted(rows, key=lambda r: (r["doc_path"], r["chunk_index"])):
        try:
            image_id = str(json.loads(r["metadata"] or "{}").get("image_id") or "")
        except ValueError:
            image_id = ""
        key = (r["doc_path"], image_id or f"{r['start_offset']}:{r['end_offset']}")
        text = r["text"] or ""
        if key in joined:
            joined[key][2] += text[int(r["overlap_chars"] or 0) :]
        else:
            joined[key] = [int(r["start_offset"]), int(r["end_offset"]), text]
    out: dict[str, list[ImageText]] = {}
    for (doc, _), (start, end, text) in joined.items():
        out.setdefault(doc, []).append(ImageText(start, end, text))
    return out


def _docs_of(hits: Iterable[ChildHit]) -> set[str] | None:
    """The documents of ``hits`` (None when one does not say: every file is opened)."""
    docs = {h.doc_id for h in hits}
    return None if "" in docs else docs


class Lookup:
    """The parents and image texts of one snapshot (or of one Parquet file of parents, for
    benchmarks): all of them, read when it opens, when the version has at most
    ``CACHED_PARENTS`` parents (a small KB searches as fast as before, in bounded memory);
    else read on demand and cached (bounded)."""

    def __init__(self, snapshot: Snapshot | None, parents_file: UPath | Path | None = None) -> None:
        self.read = SnapshotReader(snapshot) if snapshot is not None else None
        self.parents_file = parents_file
        self._parents = Recent(CACHED_PARENTS)
        self._images = Recent(CACHED_DOCUMENTS)
        #: how many parents the version has; whether every one (and every image) is cached
        self.total = 0
        self.complete = False
        #: the documents that have images (on demand: only theirs are looked for)
        self._with_images: set[str] | None = None

    @property
    def name(self) -> str:
        if self.parents_file is not None:
            return str(self.parents_file)
        return f"{self.read.kb}@{self.read.version}" if self.read is not None else "nothing"

    def open(self) -> Lookup:
        """Count the parents; a small version's parents and image texts read whole."""
        try:
            self.total = self._count()
            if self.total <= CACHED_PARENTS:
                self._parents.put_many({p.parent_id: p for p in self._fetch_parents(None, None)})
                images = self._fetch_images(None, None)
                if len(images) <= CACHED_DOCUMENTS:
                    self._images.put_many(images)
                    self.complete = True
                    return self
            if self.read is not None:
                table = self.read.column("texts", ["doc_id"], pc.field("image_count") > 0)
                self._with_images = {str(d) for d in table.column("doc_id").to_pylist()} if table is not None else set()
        except StoreError:
            raise
        except Exception as exc:  # a partial or foreign file: say which
            raise StoreError(f"cannot read parent blocks of {self.name}: {exc}") from exc
        return self

    def _count(self) -> int:
        if self.parents_file is not None:
            path = UPath(self.parents_file)
            if not path.exists():
                return 0
            with path.open("rb") as f:
                return int(pq.ParquetFile(f).metadata.num_rows)
        if self.read is None or not self.read.has("parents"):
            return 0
        rows = (self.read.written("parents").get("rows") or {}).get("data")
        return int(rows) if isinstance(rows, int) else self.read.count("parents")

    def has_parents(self) -> bool:
        """Whether there are any parent blocks at all."""
        return self.total > 0

    def parents_of(self, hits: Sequence[ChildHit]) -> dict[str, Parent]:
        """The parent of each of ``hits`` that exists, by id."""
        return self.parents({h.parent_id for h in hits}, hits)

    def parents(self, ids: Collection[str], hits: Sequence[ChildHit] = ()) -> dict[str, Parent]:
        """The parents of ``ids`` that exist, by id; ``hits`` (children of them) say which
        documents hold them (without, every file of the table is opened)."""
        found = self._parents.get_many(set(ids))
        missing = set(ids) - found.keys()
        if missing and not self.complete:
            docs = _docs_of(h for h in hits if h.parent_id in missing) if hits else None
            fetched = {p.parent_id: p for p in self._fetch_parents(missing, docs)}
            self._parents.put_many(fetched)
            found.update(fetched)
        return found

    def _fetch_parents(self, ids: Collection[str] | None, docs: set[str] | None) -> list[Parent]:
        try:
            if self.parents_file is not None:
                where = [("parent_id", "in", sorted(ids))] if ids is not None else None
                table = read_columns(self.parents_file, PARENT_COLUMNS, where)
            elif self.read is not None:
                expr = pc.field("parent_id").isin(pa.array(sorted(ids), pa.string())) if ids is not None else None
                table = self.read.column("parents", PARENT_COLUMNS, expr, docs)
            else:
                return []
        except StoreError:
            raise
        except Exception as exc:  # a partial or foreign file: say which
            raise StoreError(f"cannot read parent blocks of {self.name}: {exc}") from exc
        return [_parent(r) for r in table.to_pylist()] if table is not None else []

    def images_of(self, results: Sequence[ParentResult]) -> dict[str, list[ImageText]]:
        """The image texts of the documents of ``results``, by document path."""
        if self.read is None:
            return {}
        paths = {r.doc_path for r in results}
        found = self._images.get_many(paths)
        missing = paths - found.keys()
        if missing and not self.complete:
            hits = [h for r in results if r.doc_path in missing for h in r.hits]
            docs = _docs_of(hits)
            if docs is not None and self._with_images is not None:
                docs &= self._with_images  # (a document without images has no image text to read)
            fetched: dict[str, list[ImageText]] = {p: [] for p in missing}
            if docs is None or docs:
                fetched.update(self._fetch_images(missing, docs))
            self._images.put_many(fetched)
            found.update(fetched)
        return {p: v for p, v in found.items() if v}

    def _fetch_images(self, paths: Collection[str] | None, docs: set[str] | None) -> dict[str, list[ImageText]]:
        if self.read is None:
            return {}
        where = pc.field("chunk_type").isin(pa.array(sorted(IMAGE_CHUNK_TYPES), pa.string()))
        if paths is not None:
            where = where & pc.field("doc_path").isin(pa.array(sorted(paths), pa.string()))
        try:
            table = self.read.column("children", IMAGE_COLUMNS, where, docs)
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"cannot read child chunks of {self.name}: {exc}") from exc
        return image_texts(table.to_pylist() if table is not None else [])

    def cached(self) -> tuple[int, int]:
        """(parents, documents' image lists) held now."""
        return len(self._parents), len(self._images)
