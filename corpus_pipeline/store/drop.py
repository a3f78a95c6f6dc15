"""Removing what the warehouse holds for a knowledge base (``corpus drop``), and the
extracted images no KB uses any more.

A KB's outputs are its partition folders under every asset (``<asset>/kb=<kb>``), its
search tables (``chunks__<kb>__*``), its registered versions and its freshness state. The
documents under ``kbs/<kb>`` are the user's and are never touched. What dead runs of the
KB left in ``staging/`` (batches of document text) goes too (``store.staging``).

Images are stored once per content for every KB, so they are removed by reference. After an
index, an image that no KB's parsed documents use is deleted once it is older than a grace
period (a parse of another KB running now may have just stored it, or found it stored and
not rewritten it, and not yet written its table). ``drop_kb`` removes the images that the
dropped KB used and no other KB uses at once, with no grace, when it can make sure that no
parse is running: it takes every other KB's lock without waiting (so no ``corpus index``
of another KB runs meanwhile; one started in those milliseconds is told the KB is busy) and
the caller finds no unfinished Dagster run (a run the daemon launched holds no lock). If
another KB is being indexed, those images are kept (``DropReport.images_kept``): that
index may be storing the very same image, and removing it would leave its documents pointing
at a missing file; the grace rule removes them an hour later (any index that parses, any
``corpus drop``). Images the dropped KB did not use keep the grace period either way (a
``corpus preview`` stores the images of the file it shows without taking any lock).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from upath import UPath

from corpus_pipeline.store.files import remove_tree
from corpus_pipeline.store.layout import KB_DIM, Layout
from corpus_pipeline.store.locks import KBBusyError, kb_lock
from corpus_pipeline.store.parquet import read_columns
from corpus_pipeline.store.staging import remove_dead_staging

#: Images younger than this are never collected (a parse in progress may own them).
IMAGE_GRACE_SECONDS = 3600.0


@dataclass
class DropReport:
    kb: str
    partitions: list[str] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)
    versions: list[str] = field(default_factory=list)
    #: Run ids whose staged batches (left by a dead run) were removed.
    staging: list[str] = field(default_factory=list)
    images_removed: int = 0
    #: Images only this KB used, kept because another KB was being indexed (see the module).
    images_kept: int = 0
    #: Why they were kept: the KBs or runs that were writing.
    images_kept_for: list[str] = field(default_factory=list)


def drop_kb(layout: Layout, kb: str, *, live_runs: Callable[[], Collection[str]] = tuple) -> DropReport:
    """Delete every output of ``kb`` (the caller holds its lock). ``live_runs``: the ids
    of the runs that may be running now (the Dagster instance's unfinished runs, whatever
    their KB): their staging is kept, and while there is one, the KB's images keep their
    grace period."""
    from corpus_pipeline.store.lance import connect, list_table_names
    from corpus_pipeline.store.versions import known_versions

    report = DropReport(kb)
    report.versions = known_versions(layout, kb)
    own_images = images_of(layout, kb)  # (read before its partitions go)
    if layout.warehouse.is_dir():
        for asset_dir in sorted((p for p in layout.warehouse.iterdir() if p.is_dir()), key=lambda p: p.name):
            part = asset_dir / f"{KB_DIM}={kb}"
            if part.is_dir():
                remove_tree(part)
                report.partitions.append(f"{asset_dir.name}/{part.name}")
            for left in asset_dir.glob(f".*-{KB_DIM}={kb}-*"):  # leftovers of an earlier release's killed writes
                remove_tree(left)
    if layout.lancedb.is_dir():
        db = connect(layout)
        prefix = f"chunks__{kb}__"
        for name in list_table_names(db):
            if name.startswith(prefix):
                db.drop_table(name)
                report.tables.append(name)
    remove_tree(layout.version_dir(kb))
    remove_tree(layout.state_dir(kb))
    report.staging = remove_dead_staging(layout, kb, live=set(live_runs()))
    with _other_writers_held(layout, kb) as busy:
        running = sorted(live_runs())
        writers = busy + [f"run {r}" for r in running]
        at_once = own_images if not writers else set()
        report.images_removed = collect_images(layout, at_once=at_once)
    if writers and own_images:
        unused = own_images - images_in_use(layout)
        report.images_kept = sum(1 for f in _stored_images(layout) if f.name in unused)
        report.images_kept_for = writers if report.images_kept else []
    return report


@contextlib.contextmanager
def _other_writers_held(layout: Layout, kb: str) -> Iterator[list[str]]:
    """Hold the lock of every KB but ``kb`` that no one else holds; yields the KBs whose
    lock another process holds (being indexed, or dropped, now)."""
    busy: list[str] = []
    with contextlib.ExitStack() as stack:
        for name in layout.list_kbs():
            if name == kb:
                continue
            try:
                stack.enter_context(kb_lock(layout, name))
            except KBBusyError:
                busy.append(f"KB {name!r}")
        yield busy


def _image_names(part: UPath) -> set[str]:
    table = read_columns(part, ["path"], name="images")
    return set() if table is None else {PurePosixPath(p).name for p in table.column("path").to_pylist() if p}


def images_of(layout: Layout, kb: str) -> set[str]:
    """The stored image files that ``kb``'s ``parsed_blocks`` reference."""
    part = layout.partition_dir("parsed_blocks", kb)
    return _image_names(part) if part.is_dir() else set()


def images_in_use(layout: Layout) -> set[str]:
    """The stored image files that some KB's ``parsed_blocks`` still reference."""
    used: set[str] = set()
    base = layout.asset_dir("parsed_blocks")
    for part in base.glob(f"{KB_DIM}=*") if base.is_dir() else ():
        used |= _image_names(part)
    return used


def _stored_images(layout: Layout) -> Iterator[UPath]:
    root = layout.images
    if root.is_dir():
        yield from (f for f in root.glob("*/*") if f.is_file())


def collect_images(layout: Layout, *, grace_seconds: float = IMAGE_GRACE_SECONDS, at_once: Collection[str] = ()) -> int:
    """Delete stored images no KB references and older than ``grace_seconds`` (those named
    in ``at_once``: whatever their age); returns how many."""
    used = images_in_use(layout)
    cutoff = time.time() - grace_seconds
    removed = 0
    for f in _stored_images(layout):
        if f.name not in used and (f.name in at_once or f.stat().st_mtime < cutoff):
            f.unlink(missing_ok=True)
            removed += 1
    return removed
