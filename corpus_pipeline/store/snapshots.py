"""Published snapshots: what every reader of a (kb, strategy_version) reads, switched as one.

A build writes its Parquet partitions one asset at a time and its search table last, so the
partitions of a version change before its table does. Readers therefore never read the
partitions' current manifests: they read a **snapshot**, published by the build's last step
once everything is complete::

    versions/<kb>/snapshots/<v>.json
      {"table_version": 12,                         the search table's Lance version
       "pinned": {"documents": "9f2c….json", …,     each asset's manifest, pinned
                  "child_chunks": "41aa….json"},    (``store.parquet.pin_manifest``)
       "published_at": …}

Publishing pins each partition's manifest (an immutable copy under ``_manifests/``, whose
files no later write deletes), tags the table's version ``published`` (no prune removes a
tagged version; the version the file names until the switch stays tagged too), then
replaces the one file above: the switch, atomic (a rename locally, one PUT on an object
store). A crash anywhere before it leaves every reader on the previous snapshot, whole,
through the next run's writes as well.
After it, what only the replaced snapshot used is released at once: the text of a deleted
or edited document must not stay on disk (``tests/faults/test_deleted.py``). A reader still
in the middle of the replaced snapshot then fails to read a file, finds that the snapshot
moved, and reads again from the new one (``read_published``, ``api.KB.search``): it is
answered from one snapshot or the other, never from both and never with an error.

A KB whose versions were all built before snapshots existed has no snapshot file: its
readers read the current manifests and the latest table (``Snapshot.live``), as before. The
first publish of such a KB publishes its other built versions as they are, so none of them
becomes unreadable.

Every read of a published version goes through a ``Snapshot``: the asset names and the
partition paths are spelled here and in ``store.layout``, nowhere else.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq
from upath import UPath

from corpus_pipeline.errors import StoreError
from corpus_pipeline.store.files import put_text
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.parquet import (
    DEFAULT_NAME,
    listed_dataset,
    pin_manifest,
    read_manifest,
    release_manifests,
    snapshot_listing,
)

#: The partitions of a KB (one parse for every version) and of one version.
KB_ASSETS = ("documents", "parsed_blocks", "image_descriptions")
VERSION_ASSETS = ("parent_blocks", "child_chunks", "chunk_embeddings")
ASSETS = KB_ASSETS + VERSION_ASSETS

T = TypeVar("T")


class SnapshotNotFound(StoreError):
    """The version has no published snapshot (not built yet, failed its checks, or retired)."""


class SnapshotGone(StoreError):
    """A snapshot's files were released while it was read: resolve it again."""


def asset_folder(layout: Layout, asset: str, kb: str, version: str) -> UPath:
    """The partition of ``asset`` a snapshot of (kb, version) reads."""
    if asset not in ASSETS:
        raise ValueError(f"{asset!r} is not an asset a snapshot holds ({', '.join(ASSETS)})")
    return layout.partition_dir(asset, kb, version if asset in VERSION_ASSETS else None)


@dataclass(frozen=True)
class Snapshot:
    """One published state of (kb, version): a pinned manifest per asset and the search
    table's version. Its reads never see a later write."""

    layout: Layout
    kb: str
    version: str
    pinned: Mapping[str, str | None]
    table_version: int | None
    published_at: str | None = None
    #: No snapshot was ever published for this KB (a warehouse of an earlier release): the
    #: current manifests and the latest table are read.
    live: bool = False
    _listings: dict[str, tuple[dict[str, list[UPath]], dict[str, Any]]] = field(
        default_factory=dict, compare=False, repr=False
    )
    #: Per table, the files (their positions) each document has rows in (``_files_holding``).
    _by_doc: dict[str, dict[str, list[int]] | None] = field(default_factory=dict, compare=False, repr=False)

    @property
    def id(self) -> str:
        """Equal for two resolutions of the same published snapshot, different otherwise."""
        if self.live:
            return "live:" + _live_stamp(self.layout, self.kb, self.version)
        body = json.dumps([self.table_version, dict(sorted(self.pinned.items()))], sort_keys=True)
        return hashlib.blake2b(body.encode(), digest_size=8).hexdigest()

    def folder(self, asset: str) -> UPath:
        return asset_folder(self.layout, asset, self.kb, self.version)

    def _listing(self, asset: str) -> tuple[dict[str, list[UPath]], dict[str, Any]]:
        if asset not in self._listings:
            if self.live:
                self._listings[asset] = snapshot_listing(self.folder(asset), None)
            elif self.pinned.get(asset) is None:
                self._listings[asset] = ({}, {})
            else:
                try:
                    self._listings[asset] = snapshot_listing(self.folder(asset), self.pinned[asset])
                except (OSError, StoreError) as exc:  # (its pinned manifest was released)
                    raise SnapshotGone(f"{asset} of {self.kb}@{self.version}: this snapshot was released") from exc
        return self._listings[asset]

    def manifest(self, asset: str) -> dict[str, Any]:
        """The manifest of ``asset`` as published (run id, time, rows, files); {} if unwritten."""
        return self._listing(asset)[1]

    def has(self, asset: str, name: str | None = None) -> bool:
        """Whether ``asset`` was written when the snapshot was published (with table ``name``)."""
        files = self._listing(asset)[0]
        return bool(files) and (name is None or name in files)

    def dataset(self, asset: str, name: str = DEFAULT_NAME, docs: Collection[str] | None = None) -> pads.Dataset:
        """Table ``name`` of ``asset`` as a lazy pyarrow dataset (``StoreError`` when absent);
        with ``docs`` (document ids), only the files that hold rows of those documents, as the
        manifest lists them (every file of a table it does not list them for)."""
        files, manifest = self._listing(asset)
        if docs is not None and name in files:
            files = {**files, name: self._files_holding(asset, name, docs)}
        return listed_dataset(self.folder(asset), name, files, manifest)

    def _files_holding(self, asset: str, name: str, docs: Collection[str]) -> list[UPath]:
        """The files of table ``name`` of ``asset`` that hold rows of ``docs`` (in the
        manifest's order), from the manifest's per-file document lists inverted once per
        snapshot; every file when the manifest does not list them."""
        files, manifest = self._listing(asset)
        key = f"{asset}/{name}"
        if key not in self._by_doc:
            listed: Any = (manifest.get("docs") or {}).get(name)
            index: dict[str, list[int]] | None = {}
            for i, f in enumerate(files[name]):
                ids = listed.get(f.name) if isinstance(listed, dict) else None
                if not isinstance(ids, list) or index is None:
                    index = None  # (a file whose documents are not listed: read every file)
                    break
                for d in ids:
                    index.setdefault(str(d), []).append(i)
            self._by_doc[key] = index
        index = self._by_doc[key]
        if index is None:
            return files[name]
        picked = sorted({i for d in docs for i in index.get(d, ())})
        return [files[name][i] for i in picked]

    def read(
        self,
        asset: str,
        columns: list[str] | None = None,
        filters: list[Any] | pc.Expression | None = None,
        name: str = DEFAULT_NAME,
        docs: Collection[str] | None = None,
    ) -> pa.Table | None:
        """``columns`` of the rows matching ``filters`` (an expression, or pyarrow's list
        form, e.g. ``[("doc_id", "=", d)]``) of table ``name`` of ``asset``; None when it is
        absent. ``docs``: the rows are known to belong to these documents (their ids): only
        the files holding them are opened (``filters`` still decide the rows). ``SnapshotGone``
        when a file of the snapshot was released meanwhile."""
        try:
            if not self.has(asset, name):
                return None
            if isinstance(filters, list):
                expr = pq.filters_to_expression(filters) if filters else None
            else:
                expr = filters
            if docs is not None and not self._files_holding(asset, name, docs):  # (no file holds them)
                schema = self.dataset(asset, name).schema  # (one file's footer)
                return (schema if columns is None else pa.schema([schema.field(c) for c in columns])).empty_table()
            return self.dataset(asset, name, docs).to_table(columns=columns, filter=expr)
        except OSError as exc:  # (pyarrow's IO errors are OSErrors)
            raise SnapshotGone(f"{asset} of {self.kb}@{self.version}: this snapshot was released") from exc

    def rows(
        self,
        asset: str,
        columns: list[str] | None = None,
        filters: list[Any] | pc.Expression | None = None,
        name: str = DEFAULT_NAME,
    ) -> list[dict[str, Any]]:
        """``read`` as dicts ([] when the asset is absent)."""
        table = self.read(asset, columns, filters, name)
        return table.to_pylist() if table is not None else []

    def open_table(self) -> Any:
        """The search table, checked out at the published version (the latest when live)."""
        from corpus_pipeline.store.lance import open_search_table

        tbl = open_search_table(self.layout, self.kb, self.version)
        if self.table_version is not None:
            try:
                tbl.checkout(self.table_version)
            except ValueError as exc:  # "Version N no longer exists"
                raise SnapshotGone(
                    f"the search table of {self.kb}@{self.version} no longer has version {self.table_version}"
                ) from exc
        return tbl


def _live_stamp(layout: Layout, kb: str, version: str) -> str:
    parts = []
    for p in (
        layout.search_table_dir(kb, version) / "_versions",
        asset_folder(layout, "child_chunks", kb, version) / "_manifest.json",
        asset_folder(layout, "parent_blocks", kb, version) / "_manifest.json",
    ):
        try:
            st = p.stat()
            parts.append(f"{st.st_mtime_ns}.{st.st_size}")
        except OSError:
            parts.append("-")
    return ":".join(parts)


# ---------------------------------------------------------------------------------------------- resolving


def _payload(layout: Layout, kb: str, version: str) -> dict[str, Any] | None:
    try:
        data = json.loads(layout.snapshot_file(kb, version).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise StoreError(f"{layout.snapshot_file(kb, version)} is not valid JSON ({exc}); index {kb!r} again") from exc
    return data if isinstance(data, dict) else None


def published_versions(layout: Layout, kb: str) -> list[str]:
    """The versions of ``kb`` with a published snapshot."""
    d = layout.snapshot_dir(kb)
    return sorted(p.name.removesuffix(".json") for p in d.iterdir() if p.name.endswith(".json")) if d.is_dir() else []


def is_published(layout: Layout, kb: str, version: str) -> bool:
    """Whether (kb, version) can be read: it has a snapshot, or the KB predates snapshots."""
    return layout.snapshot_file(kb, version).exists() or not published_versions(layout, kb)


def _from(layout: Layout, kb: str, version: str, data: Mapping[str, Any]) -> Snapshot:
    pinned = data.get("pinned") or {}
    tv = data.get("table_version")
    return Snapshot(
        layout,
        kb,
        version,
        {str(a): (str(n) if n else None) for a, n in pinned.items()},
        int(tv) if tv is not None else None,
        data.get("published_at"),
    )


def resolve(layout: Layout, kb: str, version: str) -> Snapshot:
    """The published snapshot of (kb, version): what a request reads from start to end.
    ``SnapshotNotFound`` when the version is not published (a KB with no snapshot at all,
    from an earlier release, reads its current files: ``Snapshot.live``)."""
    data = _payload(layout, kb, version)
    if data is not None:
        return _from(layout, kb, version, data)
    if published_versions(layout, kb):
        raise SnapshotNotFound(
            f"version {version!r} of knowledge base {kb!r} is not published (not built yet, stopped by its "
            f"quality checks, or retired); run `corpus index --kb {kb}`, or pick one of `corpus versions --kb {kb}`."
        )
    return Snapshot(layout, kb, version, {}, None, live=True)


def read_published(layout: Layout, kb: str, version: str, read: Callable[[Snapshot], T]) -> T:
    """``read`` over the published snapshot of (kb, version); when it fails because that
    snapshot was replaced or retired meanwhile (its files released), once more over the
    snapshot published now (``SnapshotNotFound`` when the version is gone)."""
    snap = resolve(layout, kb, version)
    try:
        return read(snap)
    except Exception:
        again = resolve(layout, kb, version)  # (SnapshotNotFound when the version was retired)
        if again.id == snap.id:
            raise
        return read(again)


# ---------------------------------------------------------------------------------------------- publishing


def _pins(layout: Layout, kb: str, version: str) -> dict[str, str | None]:
    return {a: pin_manifest(asset_folder(layout, a, kb, version)) for a in ASSETS}


def publish(layout: Layout, kb: str, version: str) -> Snapshot:
    """Publish what is written now for (kb, version) as its snapshot: pin every asset's
    manifest and the search table's version, switch the snapshot file, then release what
    no snapshot kept needs. The caller holds the KB's write lock (``store.locks``)."""
    from corpus_pipeline.store.lance import open_search_table, pin_table_version, prune_history

    if not published_versions(layout, kb):
        _publish_earlier_builds(layout, kb, version)
    tbl = open_search_table(layout, kb, version)
    table_version = int(tbl.version)
    pinned = _pins(layout, kb, version)
    old = _payload(layout, kb, version)
    snapshot = {"pinned": pinned, "table_version": table_version}
    if old is not None and {k: old.get(k) for k in snapshot} == snapshot:
        return _from(layout, kb, version, old)  # (nothing changed: the same snapshot)
    payload = {
        "kb": kb,
        "strategy_version": version,
        "published_at": datetime.now(UTC).isoformat(timespec="microseconds"),
        **snapshot,
    }
    # Both table versions are protected while the file switches from one to the other.
    pin_table_version(tbl, table_version, keep=(old or {}).get("table_version"))
    put_text(layout.snapshot_file(kb, version), json.dumps(payload, indent=2, sort_keys=True))
    collect(layout, kb)
    pin_table_version(tbl, table_version)
    prune_history(tbl)
    return _from(layout, kb, version, payload)


def move_table(layout: Layout, kb: str, version: str, table_version: int) -> None:
    """Point the published snapshot of (kb, version) at ``table_version`` of its search table,
    the same rows rewritten (maintenance: compaction, index merges); the pinned manifests stay.
    The caller checked that nothing but maintenance wrote the table since it was published."""
    from corpus_pipeline.store.lance import open_search_table, pin_table_version, prune_history

    old = _payload(layout, kb, version)
    if old is None or old.get("table_version") in (None, table_version):
        return
    payload = {
        **old,
        "table_version": table_version,
        "published_at": datetime.now(UTC).isoformat(timespec="microseconds"),
    }
    tbl = open_search_table(layout, kb, version)
    pin_table_version(tbl, table_version, keep=old.get("table_version"))
    put_text(layout.snapshot_file(kb, version), json.dumps(payload, indent=2, sort_keys=True))
    pin_table_version(tbl, table_version)
    prune_history(tbl)


def published_table_version(layout: Layout, kb: str, version: str) -> int | None:
    """The search table version the published snapshot of (kb, version) names."""
    tv = (_payload(layout, kb, version) or {}).get("table_version")
    return int(tv) if tv is not None else None


def _publish_earlier_builds(layout: Layout, kb: str, building: str) -> None:
    """A KB's first publish: its other versions built by an earlier release (a search table
    and child chunks) are published as they are, so they stay readable."""
    from corpus_pipeline.store.lance import open_search_table, pin_table_version

    for v in layout.versions_with_partition("child_chunks", kb):
        if v == building or not layout.search_table_dir(kb, v).is_dir():
            continue
        if not read_manifest(asset_folder(layout, "child_chunks", kb, v)):
            continue
        tbl = open_search_table(layout, kb, v)
        payload = {
            "kb": kb,
            "strategy_version": v,
            "published_at": datetime.now(UTC).isoformat(timespec="microseconds"),
            "pinned": _pins(layout, kb, v),
            "table_version": int(tbl.version),
        }
        pin_table_version(tbl, int(tbl.version))
        put_text(layout.snapshot_file(kb, v), json.dumps(payload, indent=2, sort_keys=True))


def unpublish(layout: Layout, kb: str, version: str) -> None:
    """Withdraw the snapshot of a version being retired (its readers then re-resolve)."""
    layout.snapshot_file(kb, version).unlink(missing_ok=True)


def collect(layout: Layout, kb: str) -> int:
    """Release the pinned manifests no published snapshot of ``kb`` names, and the files
    only they listed; returns how many files were deleted."""
    keep: dict[tuple[str, str | None], set[str]] = {}
    for v in published_versions(layout, kb):
        for asset, name in ((_payload(layout, kb, v) or {}).get("pinned") or {}).items():
            if name and asset in ASSETS:
                keep.setdefault((asset, v if asset in VERSION_ASSETS else None), set()).add(str(name))
    removed = 0
    for asset in KB_ASSETS:
        folder = layout.partition_dir(asset, kb)
        if folder.is_dir():
            removed += release_manifests(folder, keep.get((asset, None), set()))
    for asset in VERSION_ASSETS:
        for v in layout.versions_with_partition(asset, kb):
            removed += release_manifests(layout.partition_dir(asset, kb, v), keep.get((asset, v), set()))
    return removed
