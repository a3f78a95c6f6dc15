"""Parquet per partition, in the warehouse's one path scheme (``store.layout``).

An asset returns an Arrow table, a dict of named tables, or a ``StageResult`` (tables plus
the stage's typed stats and quality outcomes, which go into the partition's manifest);
writes are atomic (``corpus_pipeline.store.parquet``). An input of a ``kb``-partitioned asset
read by a ``kb × strategy_version`` asset resolves to the ``kb`` partition via the
partition mapping.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dagster import ConfigurableIOManager, InputContext, MultiPartitionKey, OutputContext

from corpus_pipeline.indexing.stats import StageResult
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.parquet import read_partition, write_partition


def partition_folder(layout: Layout, asset: str, key: str | MultiPartitionKey) -> Path:
    """The folder of a Dagster partition key: ``kb`` or ``kb|strategy_version``."""
    if isinstance(key, MultiPartitionKey):
        dims = key.keys_by_dimension
        return layout.partition_dir(asset, dims["kb"], dims["strategy_version"])
    if "|" in key:  # a multi-partition key passed as its string form
        kb, version = key.split("|", 1)
        return layout.partition_dir(asset, kb, version)
    return layout.partition_dir(asset, key)


class PartitionedParquetIOManager(ConfigurableIOManager):
    """``home`` is CORPUS_HOME; empty means the environment's."""

    home: str = ""

    @property
    def layout(self) -> Layout:
        return Layout.at(self.home)

    def _path(self, context: OutputContext | InputContext) -> Path:
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
        files = write_partition(folder, tables, manifest)
        context.add_output_metadata({"path": str(folder), "files": [f.name for f in files]})

    def load_input(self, context: InputContext) -> Any:
        return read_partition(self._path(context))
