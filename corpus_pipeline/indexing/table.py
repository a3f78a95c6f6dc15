"""Fingerprints of tables, for Dagster data versions."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import pyarrow as pa


def table_fingerprint(table: pa.Table, columns: Sequence[str]) -> str:
    """A short hash of some columns of a table: it changes exactly when those columns'
    contents change (row order included)."""
    h = hashlib.sha256()
    for col in columns:
        for v in table.column(col).to_pylist():
            h.update(str(v).encode())
            h.update(b"\x1f")
        h.update(b"\x1e")
    return h.hexdigest()[:16]
