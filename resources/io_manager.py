"""Parquet per partition, in the warehouse's one path scheme (``store.layout``).

An asset returns an Arrow table, a dict of named tables, or a ``StageResult`` (tables plus
the stage's typed stats and quality outcomes, which go into the partition's manifest);
writes are atomic (``corpus_pipeline.store.parquet``). An input of a ``kb``-partitioned asset
read by a ``kb × strategy_version`` asset resolves to the ``kb`` partition via the
partition mapping.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads
from dagster import (
    ConfigurableIOManager,
    DagsterInvariantViolationError,
    InputContext,
    MetadataValue,
    MultiPartitionKey,
    OutputContext,
)
from upath import UPath

from corpus_pipeline.indexing.stats import StageResult
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.memory import give_back
from corpus_pipeline.store.parquet import (
    DEFAULT_NAME,
    PartitionWriter,
    dataset,
    read_manifest,
    read_partition,
    read_table,
    write_partition,
)
from resources.metadata import column_schema

#: The key of an input's metadata that names the tables (and columns) it reads:
#: ``{table: None (every column) | [columns] | LAZY}``; ``data`` names a one-table partition's.
READ = "corpus/read"
#: A table ``READ`` names with this value is handed as a ``pyarrow.dataset.Dataset``, nothing
#: read yet: a batch step reads only its documents' rows (``indexing.rows.of_docs``).
LAZY = "lazy"


def partition_folder(layout: Layout, asset: str, key: str | MultiPartitionKey) -> UPath:
    """The folder of a Dagster partition key: ``kb`` or ``kb|strategy_version``."""
    if isinstance(key, MultiPartitionKey):
        dims = key.keys_by_dimension
        return layout.partition_dir(asset, dims["kb"], dims["strategy_version"])
    if "|" in key:  # a multi-partition key passed as its string form
        kb, version = key.split("|", 1)
        return layout.partition_dir(asset, kb, version)
    return layout.partition_dir(asset, key)


def written_metadata(
    folder: UPath, tables: pa.Table | dict[str, pa.Table] | PartitionWriter, files: list[str]
) -> dict[str, Any]:
    """What a written partition adds to its materialization: the folder as a clickable path,
    the files, and ``dagster/column_schema`` of its table (of the first one, e.g. ``texts``,
    when it has several; the others' schemas as ``column_schema/<name>``). The row count
    (``dagster/row_count``) is the asset's own output metadata, which names its main table."""
    meta: dict[str, Any] = {"path": MetadataValue.path(str(folder)), "files": MetadataValue.json(files)}
    written = read_manifest(folder).get("written")
    if isinstance(written, dict):  # what this write wrote; the other files were unchanged batches
        meta["files_written"] = MetadataValue.int(int(written.get("files", 0)))
        meta["bytes_written"] = MetadataValue.int(int(written.get("bytes", 0)))
    if isinstance(tables, PartitionWriter):
        schemas, rows = dict(tables.schemas), dict(tables.rows)
    else:
        named = {DEFAULT_NAME: tables} if isinstance(tables, pa.Table) else dict(tables)
        schemas, rows = {n: t.schema for n, t in named.items()}, {n: t.num_rows for n, t in named.items()}
    for i, (name, schema) in enumerate(schemas.items()):
        key = "dagster/column_schema" if i == 0 else f"column_schema/{name}"
        meta[key] = MetadataValue.table_schema(column_schema(schema))
    if len(rows) > 1:
        meta["rows"] = MetadataValue.json(rows)
    return meta


def _typing_type(context: InputContext) -> Any:
    """The Python type the input is annotated with (None when the context has none: a
    context built by hand in a test)."""
    try:
        return context.dagster_type.typing_type
    except DagsterInvariantViolationError:
        return None


class PartitionedParquetIOManager(ConfigurableIOManager):
    """``home`` is CORPUS_HOME; empty means the environment's."""

    home: str = ""

    @property
    def layout(self) -> Layout:
        return Layout.at(self.home)

    def _path(self, context: OutputContext | InputContext) -> UPath:
        return partition_folder(self.layout, context.asset_key.path[-1], context.asset_partition_key)

    def handle_output(self, context: OutputContext, obj: Any) -> None:
        if obj is None:
            return
        manifest: dict[str, Any] = {
            "asset": context.asset_key.to_user_string(),
            "partition": str(context.asset_partition_key),
            "run_id": context.run_id,
        }
        tables = obj
        if isinstance(obj, StageResult):
            manifest.update(obj.manifest())
            tables = obj.tables
        folder = self._path(context)
        if isinstance(tables, PartitionWriter):  # (streamed by the step: only the switch is left)
            if str(tables.folder) != str(folder):
                raise DagsterInvariantViolationError(
                    f"{context.asset_key.to_user_string()} streamed its rows into {tables.folder}, "
                    f"but its partition is {folder}: the step and the IO manager see different warehouses"
                )
            files = tables.commit(manifest)
        else:
            files = write_partition(folder, tables, manifest)
        context.add_output_metadata(written_metadata(folder, tables, [f.name for f in files]))
        give_back()  # (the step is done with its partition's tables: see store.memory)

    def load_input(self, context: InputContext) -> Any:
        """The partition's tables; an input whose definition says ``READ`` in its metadata
        (``{table: [columns] or None or LAZY}``) gets only those tables (and columns, or the
        table as a dataset): a step that needs a partition's images is not handed every
        document's text, a batch reads its documents' rows only. An input annotated
        ``pyarrow.dataset.Dataset`` gets the partition's table as a dataset, nothing read yet:
        a step that streams it (``search_index``) never holds it whole."""
        give_back()  # (what the steps before this one freed: see store.memory)
        folder = self._path(context)
        if _typing_type(context) is pads.Dataset:
            return dataset(folder)  # an input annotated ``pyarrow.dataset.Dataset``: read lazily, by its step
        wanted = (context.definition_metadata or {}).get(READ)
        if not wanted:
            return read_partition(folder)
        out = {
            name: dataset(folder, name)
            if cols == LAZY
            else read_table(folder, name, **({"columns": cols} if cols else {}))
            for name, cols in wanted.items()
        }
        return out[DEFAULT_NAME] if list(out) == [DEFAULT_NAME] else out
