"""Parquet partitions written atomically: a crash leaves the previous good output readable.

A partition is a folder (``<asset>/kb=<kb>[/strategy_version=<v>]``) holding one
``data.parquet``, or several named tables for assets with more than one (``blocks``,
``texts``, ``images``). The new files are written into a temporary sibling folder, which
then replaces the old one with two renames.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from corpus_pipeline.errors import StoreError

DEFAULT_NAME = "data"


MANIFEST = "_manifest.json"


def write_partition(
    folder: Path, tables: pa.Table | Mapping[str, pa.Table], manifest: Mapping[str, object] | None = None
) -> list[Path]:
    """Replace ``folder`` with the given table(s); returns the written file paths.

    ``manifest`` (for example the Dagster run id that wrote it) is stored beside the
    tables as ``_manifest.json`` with the row counts and the time, for lineage.
    """
    if isinstance(tables, pa.Table):
        tables = {DEFAULT_NAME: tables}
    folder.parent.mkdir(parents=True, exist_ok=True)
    _remove_leftovers(folder)
    tmp = folder.parent / f".tmp-{folder.name}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        for name, table in tables.items():
            pq.write_table(table, tmp / f"{name}.parquet", compression="zstd")
        info = {
            **dict(manifest or {}),
            "written_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "rows": {name: t.num_rows for name, t in tables.items()},
        }
        (tmp / MANIFEST).write_text(json.dumps(info, indent=2, sort_keys=True, default=str), encoding="utf-8")
        for f in tmp.iterdir():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
        old = None
        if folder.exists():
            old = folder.parent / f".old-{folder.name}-{uuid.uuid4().hex[:8]}"
            os.rename(folder, old)
        os.rename(tmp, folder)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return sorted(folder.glob("*.parquet"))


def _remove_leftovers(folder: Path) -> None:
    """What a write killed half way left beside the partition: ``.tmp-*`` folders (never
    read) and, once the partition itself is in place, ``.old-*`` ones. Only this KB's writer
    writes here (``store.locks``), so none of them is in use."""
    if not folder.is_dir():
        _recover(folder)
    for pattern in (f".tmp-{folder.name}-*", f".old-{folder.name}-*" if folder.is_dir() else None):
        for left in folder.parent.glob(pattern) if pattern else ():
            shutil.rmtree(left, ignore_errors=True)


def read_partition(folder: Path, name: str | None = None) -> pa.Table | dict[str, pa.Table]:
    """The table of a partition (``name`` to pick one of several); all of them as a dict
    when the partition holds several and no name is given."""
    if not folder.is_dir():
        _recover(folder)
    if not folder.is_dir():
        raise StoreError(f"partition {folder} has not been materialized yet")
    files = sorted(folder.glob("*.parquet"))
    if name is not None:
        f = folder / f"{name}.parquet"
        if not f.exists():
            raise StoreError(f"partition {folder} has no table {name!r}")
        return pq.read_table(f)
    if len(files) == 1 and files[0].stem == DEFAULT_NAME:
        return pq.read_table(files[0])
    return {f.stem: pq.read_table(f) for f in files}


def _recover(folder: Path) -> None:
    """A crash between the two renames of ``write_partition`` leaves only ``.old-*``:
    put the previous good output back."""
    if not folder.parent.is_dir():
        return
    olds = sorted(folder.parent.glob(f".old-{folder.name}-*"), key=lambda p: p.stat().st_mtime)
    if olds:
        os.rename(olds[-1], folder)


def read_manifest(folder: Path) -> dict[str, object]:
    """What wrote a partition (run id, asset, partition, time, rows); {} if unknown."""
    f = folder / MANIFEST
    return json.loads(f.read_text(encoding="utf-8")) if f.exists() else {}
