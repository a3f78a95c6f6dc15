"""Removing what the warehouse holds for a knowledge base (``corpus drop``), and the
extracted images no KB uses any more.

A KB's outputs are its partition folders under every asset (``<asset>/kb=<kb>``), its
search tables (``chunks__<kb>__*``), its registered versions and its freshness state. The
documents under ``kbs/<kb>`` are the user's and are never touched. Images are stored once
per content for every KB, so they are removed by reference: an image that no KB's parsed
documents use is deleted once it is older than a grace period (a parse of another KB
running now may have just stored it and not yet written its table).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from corpus_pipeline.store.files import remove_tree
from corpus_pipeline.store.layout import KB_DIM, Layout
from corpus_pipeline.store.parquet import read_columns

#: Images younger than this are never collected (a parse in progress may own them).
IMAGE_GRACE_SECONDS = 3600.0


@dataclass
class DropReport:
    kb: str
    partitions: list[str] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)
    versions: list[str] = field(default_factory=list)
    images_removed: int = 0


def drop_kb(layout: Layout, kb: str) -> DropReport:
    """Delete every output of ``kb`` (the caller holds its lock)."""
    from corpus_pipeline.store.lance import connect, list_table_names
    from corpus_pipeline.store.versions import known_versions

    report = DropReport(kb)
    report.versions = known_versions(layout, kb)
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
    report.images_removed = collect_images(layout)
    return report


def images_in_use(layout: Layout) -> set[str]:
    """The stored image files that some KB's ``parsed_blocks`` still reference."""
    used: set[str] = set()
    base = layout.asset_dir("parsed_blocks")
    for part in base.glob(f"{KB_DIM}=*") if base.is_dir() else ():
        table = read_columns(part, ["path"], name="images")
        if table is not None:
            used.update(PurePosixPath(p).name for p in table.column("path").to_pylist() if p)
    return used


def collect_images(layout: Layout, *, grace_seconds: float = IMAGE_GRACE_SECONDS) -> int:
    """Delete stored images no KB references and older than ``grace_seconds``; returns how many."""
    root = layout.images
    if not root.is_dir():
        return 0
    used = images_in_use(layout)
    cutoff = time.time() - grace_seconds
    removed = 0
    for f in root.glob("*/*"):
        if f.is_file() and f.name not in used and f.stat().st_mtime < cutoff:
            f.unlink(missing_ok=True)
            removed += 1
    return removed
