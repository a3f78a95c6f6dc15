"""Fingerprints of tables, for Dagster data versions."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import pyarrow as pa


def table_fingerprint(table: pa.Table, columns: Sequence[str]) -> str:
    """A short hash of some columns of a table: it changes exactly when those columns'
    contents change (row order included)."""
    h = hashlib.sha256()
    for col in columns:
        _add_values(h, table.column(col))
        h.update(b"\x1e")
    return h.hexdigest()[:16]


class ColumnFingerprint:
    """``table_fingerprint(table, [column])`` of a table handed a run of rows at a time
    (``add`` each run in order; ``hexdigest`` once they are all in): the same value."""

    def __init__(self, column: str) -> None:
        self.column = column
        self._h = hashlib.sha256()

    def add(self, rows: pa.Table) -> None:
        _add_values(self._h, rows.column(self.column))

    def hexdigest(self) -> str:
        h = self._h.copy()
        h.update(b"\x1e")
        return h.hexdigest()[:16]


def _add_values(h: hashlib._Hash, values: pa.ChunkedArray[Any]) -> None:
    for v in values.to_pylist():
        h.update(str(v).encode())
        h.update(b"\x1f")
