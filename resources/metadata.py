"""The standard ``dagster/*`` metadata of a table written by this code location."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from dagster import MetadataValue, TableColumn, TableColumnConstraints, TableSchema


def column_schema(schema: pa.Schema) -> TableSchema:
    """A Dagster ``TableSchema`` of an Arrow schema (type names as Arrow prints them)."""
    return TableSchema(
        columns=[
            TableColumn(name=f.name, type=str(f.type), constraints=TableColumnConstraints(nullable=f.nullable))
            for f in schema
        ]
    )


def table_metadata(schema: pa.Schema, rows: int) -> dict[str, Any]:
    """``dagster/row_count`` and ``dagster/column_schema`` of one table."""
    return {
        "dagster/row_count": MetadataValue.int(rows),
        "dagster/column_schema": MetadataValue.table_schema(column_schema(schema)),
    }
