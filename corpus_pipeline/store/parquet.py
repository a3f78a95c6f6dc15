"""Parquet partitions: files per document batch, switched by one small pointer.

A partition is a folder (``<asset>/kb=<kb>[/strategy_version=<v>]``, local or on an object
store) holding immutable Parquet files and ``_manifest.json``, the pointer that lists them::

    child_chunks/kb=docs/strategy_version=v2/
      _manifest.json                 {"files": {"data": ["data-3f2a….parquet", ...]}, run id, rows, ...}
      data-3f2a9c0e1b7d4a61.parquet  the rows of one batch of documents
      data-91d0….parquet

A table is cut into batches of whole documents at content-defined boundaries: a batch
ends after a document whose id hashes to 0 modulo ``DOCS_PER_FILE``. So a boundary depends
only on the document before it, and adding, editing or deleting one document changes one
batch (two at most, when the edited document was a boundary), never the KB's. Each file is
named by the hash of its bytes: a batch that did not change is not written again.

The manifest also lists the documents of each file of a table keyed by ``doc_id``
(``docs``): a step that needs a few documents' rows opens only the files that hold them
(``file_docs``), instead of reading every file's ``doc_id`` column to find out.

A write puts the new files beside the old ones, then replaces the manifest (one file, ~30
bytes per document of a table with its document lists, 0.6 MB at 20,000 documents:
an atomic rename locally, a single PUT on an object store), then deletes the files that
neither the new manifest nor a *pinned* one lists. A crash before the manifest leaves the
previous version readable (its files are all still there); one after it leaves only
unlisted files, which the next write removes. The pipeline's own steps read ``_manifest.json``
(the latest write); DuckDB or Spark can still read ``<asset>/*/*/*.parquet`` with
``hive_partitioning`` once no write is in flight.

Everything else reads a *published snapshot* (``store.snapshots``): publishing copies a
partition's manifest, unchanged, to ``_manifests/<hash>.json`` (``pin_manifest``), and a
snapshot names those copies. A pinned manifest's files are never deleted by a write; they
go when the snapshot that named it is superseded twice or retired (``release_manifests``).

Partitions written by earlier releases (``data.parquet``, no ``files`` in the manifest) are
read as before, and replaced by the first write.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import threading
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from upath import UPath

from corpus_pipeline.errors import StoreError
from corpus_pipeline.store.files import local_path, put_bytes

DEFAULT_NAME = "data"
MANIFEST = "_manifest.json"
#: The folder of a partition's pinned manifests: immutable copies named by their bytes' hash.
PINNED = "_manifests"
#: The expected number of documents per file (a boundary after ~1 in this many documents).
DOCS_PER_FILE = 64
#: A batch is cut after this many rows even without a boundary (one huge document stays one file).
MAX_FILE_ROWS = 200_000
#: The columns a table is batched by, the first it has, with how many rows of that key a
#: file holds on average relative to documents: by document; else (``chunk_embeddings``)
#: by chunk, ~16 chunks a document. Tables with neither are written as one file.
BATCH_KEYS = (("doc_id", 1), ("chunk_id", 16))


def _is_boundary(doc_id: str, every: int) -> bool:
    return int.from_bytes(hashlib.blake2b(doc_id.encode("utf-8"), digest_size=8).digest(), "big") % every == 0


def _batch_key(table: pa.Table) -> tuple[str, int] | None:
    """The column a table is cut by (``BATCH_KEYS``) and its rows per key, or None."""
    return next(((col, k) for col, k in BATCH_KEYS if col in table.column_names), None)


def _cut(table: pa.Table, every: int, max_rows: int) -> tuple[list[pa.Table], pa.Table]:
    """``table``'s complete batches, and the rows after the last cut: a run of whole
    documents whose last is not a boundary (or the start of a document the next rows may
    continue), which the next rows of a stream extend (``PartitionWriter``)."""
    key = _batch_key(table)
    assert key is not None
    every *= key[1]
    ids = table.column(key[0]).to_pylist()
    out: list[pa.Table] = []
    start = 0
    for i, doc in enumerate(ids):
        if i + 1 < len(ids) and ids[i + 1] == doc:
            continue  # (not the document's last row)
        if i + 1 < len(ids) and (_is_boundary(str(doc), every) or i + 1 - start >= max_rows):
            out.append(table.slice(start, i + 1 - start))
            start = i + 1
    rest = table.slice(start)
    # The last document of ``table`` may go on in the next rows: it is cut only when they
    # begin another one (or the stream ends, ``PartitionWriter.commit``).
    return out, rest


def batches(table: pa.Table, every: int = DOCS_PER_FILE, max_rows: int = MAX_FILE_ROWS) -> list[pa.Table]:
    """``table`` cut into batches of whole documents (or, without ``doc_id``, of chunks), in
    table order, at content-defined boundaries; one batch for a table with neither column
    or with no rows."""
    if _batch_key(table) is None or table.num_rows == 0:
        return [table]
    done, rest = _cut(table, every, max_rows)
    return [*done, rest] if rest.num_rows else done


def _content_key(table: pa.Table) -> str:
    """A hash of a batch's Arrow IPC form (schema and buffers, a memory copy, no encoding):
    a batch whose key a previous write recorded is that file, not encoded again. Two equal
    batches laid out differently in memory get two keys: then the batch is encoded and its
    bytes' hash names it as before (never a wrong file, at worst one more encoding)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return hashlib.blake2b(memoryview(sink.getvalue()), digest_size=16).hexdigest()


def _encode(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()


def write_partition(
    folder: UPath | Path,
    tables: pa.Table | Mapping[str, pa.Table],
    manifest: Mapping[str, object] | None = None,
    *,
    docs_per_file: int | None = None,
) -> list[UPath]:
    """Make ``tables`` the partition's content; returns the partition's Parquet files.

    ``manifest`` (for example the Dagster run id that wrote it) is stored in
    ``_manifest.json`` with the file lists, the row counts, the time and ``written``: how
    many files (and bytes) this write actually wrote, the rest being unchanged batches.
    ``docs_per_file``: the expected documents per file (``DOCS_PER_FILE``).
    """
    writer = PartitionWriter(folder, docs_per_file=docs_per_file)
    for name, table in ({DEFAULT_NAME: tables} if isinstance(tables, pa.Table) else tables).items():
        writer.add(table, name)
    return writer.commit(manifest)


class PartitionWriter:
    """A partition written as a stream: ``add`` a table's rows in order, any number of
    pieces (a merge's groups of documents), then ``commit``. The files are the same as
    ``write_partition`` of the whole table (the batches are cut at the same boundaries), each
    written as soon as it is complete: what is held is the rows after the last cut, not the
    table. Nothing is visible until ``commit`` replaces the manifest; a writer dropped before
    it leaves the previous version as it was (and files its next write removes)."""

    def __init__(self, folder: UPath | Path, *, docs_per_file: int | None = None) -> None:
        self.folder = UPath(folder)
        self.every = docs_per_file or DOCS_PER_FILE
        _recover(self.folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._present = {p.name for p in _list(self.folder)}
        self._known = read_manifest(self.folder).get("keys") or {}
        self._keys: dict[str, str] = {}
        self.files: dict[str, list[str]] = {}
        self._docs: dict[str, dict[str, list[str]]] = {}
        self.rows: dict[str, int] = {}
        self.schemas: dict[str, pa.Schema] = {}
        self._rest: dict[str, pa.Table] = {}
        self._written = [0, 0]  # files, bytes

    def add(self, table: pa.Table, name: str = DEFAULT_NAME) -> None:
        """Append ``table``'s rows to table ``name`` (its schema that of the first piece)."""
        schema = self.schemas.setdefault(name, table.schema)
        self.files.setdefault(name, [])
        self.rows[name] = self.rows.get(name, 0) + table.num_rows
        if _batch_key(table) is None:  # (one file: held until the end)
            rest = self._rest.get(name)
            self._rest[name] = table if rest is None else pa.concat_tables([rest, table.cast(schema)])
            return
        rest = self._rest.get(name)
        joined = table if rest is None or rest.num_rows == 0 else pa.concat_tables([rest, table.cast(schema)])
        done, self._rest[name] = _cut(joined, self.every, MAX_FILE_ROWS)
        for batch in done:
            self._put(name, batch)

    def _put(self, name: str, batch: pa.Table) -> None:
        key = f"{name}:{_content_key(batch)}"
        fname = str(self._known.get(key, ""))
        if fname not in self._present:
            data = _encode(batch)
            fname = f"{name}-{hashlib.blake2b(data, digest_size=8).hexdigest()}.parquet"
            if fname not in self._present:
                put_bytes(self.folder / fname, data)
                self._present.add(fname)
                self._written[0] += 1
                self._written[1] += len(data)
        # (else an unchanged batch: not encoded, not written)
        self.files[name].append(fname)  # (twice if two batches are byte-identical: read twice, as written)
        self._keys[key] = fname
        if "doc_id" in batch.column_names:
            self._docs.setdefault(name, {})[fname] = [str(d) for d in pc.unique(batch.column("doc_id")).to_pylist()]

    def commit(self, manifest: Mapping[str, object] | None = None) -> list[UPath]:
        """Write the last batches, then the manifest (the switch), then delete the files it
        does not list; returns the partition's files."""
        for name, rest in self._rest.items():
            if rest.num_rows or not self.files[name]:  # (an empty table is one empty file)
                self._put(name, rest if rest.num_rows else self.schemas[name].empty_table())
        self._rest = {}
        info = {
            **dict(manifest or {}),
            "written_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "rows": dict(self.rows),
            "files": self.files,
            "docs": self._docs,
            "keys": self._keys,
            "written": {"files": self._written[0], "bytes": self._written[1]},
        }
        put_bytes(self.folder / MANIFEST, json.dumps(info, indent=2, sort_keys=True, default=str).encode("utf-8"))
        listed = {f for names in self.files.values() for f in names} | pinned_files(self.folder)
        for p in _list(self.folder):
            if p.name not in listed:
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
        _remove_leftovers(self.folder)
        return [self.folder / f for names in self.files.values() for f in names]


def _list(folder: UPath) -> list[UPath]:
    """The Parquet files (and temporary files) in a partition folder."""
    if not folder.is_dir():
        return []
    return [p for p in folder.iterdir() if p.name.endswith(".parquet") or p.name.startswith(".tmp-")]


def _remove_leftovers(folder: UPath) -> None:
    """What a write of an earlier release killed half way left beside a local partition:
    ``.tmp-*`` and ``.old-*`` folders (only this KB's writer writes here, ``store.locks``)."""
    local = local_path(folder)
    if local is None or not local.parent.is_dir():
        return
    for pattern in (f".tmp-{local.name}-*", f".old-{local.name}-*"):
        for left in local.parent.glob(pattern):
            shutil.rmtree(left, ignore_errors=True)


def _recover(folder: UPath | Path) -> None:
    """A crash of an earlier release between its two folder renames left only ``.old-*``:
    put the previous good output back."""
    local = local_path(folder)
    if local is None or local.is_dir() or not local.parent.is_dir():
        return
    olds = sorted(local.parent.glob(f".old-{local.name}-*"), key=lambda p: p.stat().st_mtime)
    if olds:
        os.rename(olds[-1], local)


def pin_manifest(folder: UPath | Path) -> str | None:
    """Pin the partition's current manifest: copy it, byte for byte, to
    ``_manifests/<hash>.json`` (once) and return that name; None when the partition has not
    been written. Its files are then kept by every write until ``release_manifests``."""
    folder = UPath(folder)
    try:
        data = (folder / MANIFEST).read_bytes()
    except FileNotFoundError:
        return None
    name = f"{hashlib.blake2b(data, digest_size=16).hexdigest()}.json"
    target = folder / PINNED / name
    if not target.exists():
        put_bytes(target, data)
    return name


def pinned_manifests(folder: UPath | Path) -> list[str]:
    """The names of the partition's pinned manifests."""
    d = UPath(folder) / PINNED
    return sorted(p.name for p in d.iterdir() if p.name.endswith(".json")) if d.is_dir() else []


def pinned_manifest(folder: UPath | Path, name: str) -> dict[str, Any]:
    """A pinned manifest (``StoreError`` when it was released: its snapshot is gone)."""
    path = UPath(folder) / PINNED / name
    key = str(path)
    with _PINNED_LOCK:
        cached = _PINNED_CACHE.get(key)
    if cached is not None:
        return cached
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StoreError(f"snapshot manifest {name} of {UPath(folder).name} was released") from None
    if not isinstance(value, dict):
        raise StoreError(f"snapshot manifest {name} of {UPath(folder).name} is not a JSON object")
    with _PINNED_LOCK:  # (the server's threads share it)
        _PINNED_CACHE[key] = value  # (immutable: named by its bytes' hash)
        while len(_PINNED_CACHE) > _PINNED_CACHE_MAX:
            _PINNED_CACHE.pop(next(iter(_PINNED_CACHE)))
    return value


_PINNED_CACHE: dict[str, dict[str, Any]] = {}
_PINNED_CACHE_MAX = 64
_PINNED_LOCK = threading.Lock()


def pinned_files(folder: UPath | Path) -> set[str]:
    """The files every pinned manifest of the partition lists (a write keeps them)."""
    out: set[str] = set()
    for name in pinned_manifests(folder):
        with contextlib.suppress(StoreError):  # (released meanwhile)
            for paths in _files_of(UPath(folder), pinned_manifest(folder, name)).values():
                out.update(p.name for p in paths)
    return out


def release_manifests(folder: UPath | Path, keep: set[str]) -> int:
    """Unpin every manifest of the partition not in ``keep``, then delete the files that
    neither ``_manifest.json`` nor a manifest still pinned lists; returns how many files
    were deleted. The caller holds the KB's write lock (``store.locks``)."""
    folder = UPath(folder)
    for name in pinned_manifests(folder):
        if name not in keep:
            with contextlib.suppress(FileNotFoundError):
                (folder / PINNED / name).unlink()
            with _PINNED_LOCK:
                _PINNED_CACHE.pop(str(folder / PINNED / name), None)
    listed = {p.name for names in _files_of(folder, read_manifest(folder)).values() for p in names}
    if not listed and not (folder / MANIFEST).exists():
        return 0  # (never written, or an earlier release's layout: nothing to compare with)
    listed |= pinned_files(folder)
    removed = 0
    for p in _list(folder):
        if p.name not in listed:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
                removed += 1
    return removed


def snapshot_listing(folder: UPath | Path, pinned: str | None) -> tuple[dict[str, list[UPath]], dict[str, Any]]:
    """The files and manifest of a partition as a snapshot sees it: its pinned manifest
    ``pinned``, or (None: a warehouse published before snapshots) the current one."""
    folder = UPath(folder)
    if pinned is None:
        return _listing(folder)
    m = pinned_manifest(folder, pinned)
    return _files_of(folder, m), m


def listed_dataset(
    folder: UPath | Path, name: str, files: dict[str, list[UPath]], manifest: dict[str, Any] | None = None
) -> pads.Dataset:
    """Table ``name`` of a partition whose listing (``snapshot_listing``) was already read."""
    return _dataset(UPath(folder), name, files, manifest)


def partition_files(folder: UPath | Path) -> dict[str, list[UPath]]:
    """The current Parquet files of a partition, by table name, as its manifest lists them
    ({} when the partition has not been written)."""
    return _listing(UPath(folder))[0]


def _listing(folder: UPath) -> tuple[dict[str, list[UPath]], dict[str, Any]]:
    """``partition_files`` and the manifest they were read from (one read)."""
    _recover(folder)
    m = read_manifest(folder)
    return _files_of(folder, m), m


def _files_of(folder: UPath, m: dict[str, Any]) -> dict[str, list[UPath]]:
    listed = m.get("files")
    if isinstance(listed, dict):
        return {str(name): [folder / str(f) for f in names] for name, names in listed.items()}
    # an earlier release's partition: one <name>.parquet per table
    return {p.name.removesuffix(".parquet"): [p] for p in sorted(_list(folder), key=lambda p: p.name)}


def has_partition(folder: UPath | Path, name: str | None = None) -> bool:
    """Whether the partition has been written (and holds table ``name``, if given)."""
    files = partition_files(folder)
    return bool(files) and (name is None or name in files)


def _filesystem(folder: UPath) -> tuple[pafs.FileSystem, str]:
    """A pyarrow filesystem for ``folder`` and the folder's path in it."""
    local = local_path(folder)
    if local is not None:
        return pafs.LocalFileSystem(), str(local)
    handler = pafs.FSSpecHandler(folder.fs)  # type: ignore[abstract]  # (the stubs miss its methods)
    return pafs.PyFileSystem(handler), folder.path


def dataset(folder: UPath | Path, name: str = DEFAULT_NAME) -> pads.Dataset:
    """Table ``name`` of a partition as a pyarrow dataset (lazy: filters and projections
    read only what they need; DuckDB queries it with ``con.register``)."""
    files, manifest = _listing(UPath(folder))
    return _dataset(UPath(folder), name, files, manifest)


def _dataset(
    folder: UPath, name: str, files: dict[str, list[UPath]], manifest: dict[str, Any] | None = None
) -> pads.Dataset:
    """``dataset`` of the manifest's ``files`` already read (one manifest read per call);
    the documents of each file, when ``manifest`` lists them, remembered (``file_docs``)."""
    if name not in files:
        if not files:
            raise StoreError(f"partition {folder} has not been materialized yet")
        raise StoreError(f"partition {folder} has no table {name!r} (it has {', '.join(sorted(files))})")
    fs, base = _filesystem(folder)
    paths = [f"{base}/{p.name}" for p in files[name]]
    listed = (manifest or {}).get("docs")
    by_file = listed.get(name) if isinstance(listed, dict) else None
    if isinstance(by_file, dict):
        _remember_docs({f"{base}/{f}": ids for f, ids in by_file.items() if isinstance(ids, list)})
    return pads.dataset(paths, filesystem=fs, format="parquet")


#: The documents of each Parquet file whose manifest listed them, by the file's path in its
#: filesystem. A file is never rewritten under its name (it is named by its bytes' hash), so
#: what is remembered stays true; the oldest entries go past ``_FILE_DOCS_MAX`` files.
_FILE_DOCS: dict[str, frozenset[str]] = {}
_FILE_DOCS_MAX = 100_000


def _remember_docs(by_path: Mapping[str, list[str]]) -> None:
    for path, ids in by_path.items():
        _FILE_DOCS.pop(path, None)
        _FILE_DOCS[path] = frozenset(str(d) for d in ids)
    while len(_FILE_DOCS) > _FILE_DOCS_MAX:
        _FILE_DOCS.pop(next(iter(_FILE_DOCS)))


def file_docs(path: str) -> frozenset[str] | None:
    """The documents of the Parquet file at ``path`` (a dataset fragment's path), as its
    partition's manifest listed them when the dataset was opened (``dataset``); None when
    not known (a partition written by an earlier release: read its ``doc_id`` column)."""
    return _FILE_DOCS.get(path)


def read_partition(folder: UPath | Path, name: str | None = None) -> pa.Table | dict[str, pa.Table]:
    """The table of a partition (``name`` to pick one of several); all of them as a dict
    when the partition holds several and no name is given."""
    folder = UPath(folder)
    files = partition_files(folder)
    if not files:
        raise StoreError(f"partition {folder} has not been materialized yet")
    if name is not None:
        return _read(_dataset(folder, name, files))
    if list(files) == [DEFAULT_NAME]:
        return _read(_dataset(folder, DEFAULT_NAME, files))
    return {n: _read(_dataset(folder, n, files)) for n in files}


def read_table(folder: UPath | Path, name: str = DEFAULT_NAME, **kwargs: Any) -> pa.Table:
    """One table of a partition; ``kwargs`` (``columns=``, ``filter=``) go to the dataset scan."""
    return _read(dataset(folder, name), **kwargs)


def _read(ds: pads.Dataset, **kwargs: Any) -> pa.Table:
    table = ds.to_table(**kwargs)
    if not kwargs and table.num_rows == 0:
        return ds.schema.empty_table()
    return table


def read_manifest(folder: UPath | Path) -> dict[str, Any]:
    """What wrote a partition (run id, asset, partition, time, rows, files); {} if unknown."""
    f = UPath(folder) / MANIFEST
    try:
        value = json.loads(f.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    return value if isinstance(value, dict) else {}


def read_columns(
    location: UPath | Path, columns: list[str] | None = None, filters: list[Any] | None = None, name: str = DEFAULT_NAME
) -> pa.Table | None:
    """``columns`` of the rows that match ``filters`` (pyarrow's list form, e.g.
    ``[("doc_id", "=", d)]``) of a partition folder's table ``name``, or of one Parquet file;
    None when there is no such partition or file."""
    location = UPath(location)
    expr = pq.filters_to_expression(filters) if filters else None
    if location.name.endswith(".parquet"):
        if not location.exists():
            return None
        local = local_path(location)
        if local is not None:
            return pq.read_table(local, columns=columns, filters=expr)
        with location.open("rb") as f:
            return pq.read_table(f, columns=columns, filters=expr)
    files = partition_files(location)
    if name not in files:
        return None
    return _dataset(location, name, files).to_table(columns=columns, filter=expr)


def iter_slices(ds: pads.Dataset, columns: list[str], rows: int) -> Iterator[pa.Table]:
    """``columns`` of a dataset's rows in order, as tables of ``rows`` rows (the last one
    shorter), read file by file: what is held is one slice and one file's read-ahead, not
    the table. Two datasets of the same row order cut the same way line up slice by slice."""
    pending: list[pa.RecordBatch] = []
    held = 0
    for fragment in ds.get_fragments():  # in the manifest's order
        for batch in fragment.to_batches(columns=columns, batch_size=rows, use_threads=False):
            pending.append(batch)
            held += batch.num_rows
            while held >= rows:
                table = pa.Table.from_batches(pending)
                yield table.slice(0, rows)
                rest = table.slice(rows)
                pending, held = rest.to_batches(), rest.num_rows
    if held:
        yield pa.Table.from_batches(pending)
