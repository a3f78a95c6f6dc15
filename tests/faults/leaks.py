"""Where a piece of text is stored under a folder: every file's bytes (pickles, JSON and
sqlite caches, the Dagster instance, logs, Lance data files), Parquet files decoded (their
pages may be compressed), and every version of every Lance dataset decoded (a table's old
versions keep the fragments of rows since deleted)."""

from __future__ import annotations

import json
from pathlib import Path


def _lance_versions_containing(dataset_dir: Path, needle: str) -> list[str]:
    import lance

    hits = []
    try:
        versions = [v["version"] for v in lance.dataset(str(dataset_dir)).versions()]
    except Exception:  # not a readable dataset: its files are still read as bytes
        return hits
    for v in versions:
        table = lance.dataset(str(dataset_dir), version=v).to_table()
        keep = [c for c in table.column_names if c != "vector"]
        if needle in json.dumps(table.select(keep).to_pylist(), default=str):
            hits.append(f"{dataset_dir.name}@v{v}")
    return hits


def files_containing(root: Path, needle: str) -> list[str]:
    """Every file under ``root`` (and every Lance dataset version) that holds ``needle``."""
    import pyarrow.parquet as pq

    raw = needle.encode("utf-8")
    hits = []
    for f in sorted(root.rglob("*")):
        if not f.is_file():
            continue
        decoded = json.dumps(pq.read_table(f).to_pylist(), default=str) if f.suffix == ".parquet" else ""
        if raw in f.read_bytes() or needle in decoded:
            hits.append(str(f.relative_to(root)))
    for d in sorted(p for p in root.rglob("*.lance") if p.is_dir()):
        hits += [f"{d.parent.relative_to(root)}/{h}" for h in _lance_versions_containing(d, needle)]
    return hits
