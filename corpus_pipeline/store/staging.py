"""The staging of a run (``staging/<run_id>/``: the batches between its steps) and what
dead runs left there.

A run removes its own staging as its merges read it, and ``corpus index`` removes what is
left when the run ends, failed or not. A run killed with ``kill -9`` (or its machine lost)
leaves its folder: pickles of document text, which must not outlive the documents. So
every staging folder names its KB in a marker file (``_kb.json``, written before its first
batch), and the next writer of that KB removes the folders its dead runs left
(``remove_dead_staging``): ``corpus index`` of the KB and ``corpus drop`` of it, both
holding the KB's lock, which no other process writing the KB can hold at the same time.

A folder is kept when its run is named live by the caller (the Dagster instance's
unfinished runs, e.g. a run of the KB that the daemon launched), when it names another KB,
or when it has no marker (nothing says whose it is).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Collection
from datetime import UTC, datetime
from pathlib import Path

from corpus_pipeline.store.layout import Layout

#: The file of a staging folder that names its KB (not a batch: no asset name starts with '_').
MARKER = "_kb.json"


def mark_staging(folder: Path, run_id: str, kb: str) -> None:
    """Make ``folder`` (``Layout.staging_dir(run_id)``) and name its KB in it, unless it
    already does (a stat per call: called before and after each batch is written)."""
    marker = folder / MARKER
    if marker.exists():
        return
    folder.mkdir(parents=True, exist_ok=True)
    info = {"kb": kb, "run_id": run_id, "pid": os.getpid(), "since": datetime.now(UTC).isoformat(timespec="seconds")}
    tmp = folder / f".{MARKER}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(info), encoding="utf-8")
    os.replace(tmp, marker)


def staging_kb(folder: Path) -> str | None:
    """The KB a staging folder belongs to (None: no readable marker)."""
    try:
        data = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    kb = data.get("kb") if isinstance(data, dict) else None
    return kb if isinstance(kb, str) and kb else None


def only_marker_left(folder: Path) -> bool:
    """Whether ``folder`` holds nothing but its marker (every batch read and removed)."""
    try:
        return {p.name for p in folder.iterdir()} <= {MARKER}
    except OSError:
        return False


def remove_if_done(folder: Path) -> None:
    """Remove ``folder`` when only its marker is left (idempotent; a batch written meanwhile
    by another step keeps the folder, and that step writes the marker again)."""
    if only_marker_left(folder):
        (folder / MARKER).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            folder.rmdir()


def remove_dead_staging(layout: Layout, kb: str, *, live: Collection[str] = ()) -> list[str]:
    """Remove the staging folders of ``kb``'s runs other than those in ``live``; returns
    their run ids. The caller holds ``kb``'s lock, and ``live`` has every run of ``kb`` that
    may still be running (a run the Dagster daemon launched holds no lock)."""
    removed: list[str] = []
    if not layout.staging.is_dir():
        return removed
    for folder in sorted(layout.staging.iterdir()):
        if not folder.is_dir() or folder.name in live or staging_kb(folder) != kb:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder.name)
    return removed
