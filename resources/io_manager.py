"""Parquet per partition, hive-style: ``<warehouse>/<asset>/kb=<kb>[/strategy_version=<v>]``.

Outputs are Arrow tables (or a dict of named tables); writes are atomic
(``corpus_pipeline.store.parquet``). An input of a ``kb``-partitioned asset read by a
``kb × strategy_version`` asset resolves to the ``kb`` partition via the partition mapping.
"""

from __future__ import annotations

from pathlib import Path

from dagster import ConfigurableIOManager, InputContext, MultiPartitionKey, OutputContext

from corpus_pipeline.paths import Layout
from corpus_pipeline.store.parquet import read_partition, write_partition


def _partition_dir(warehouse: Path, asset: str, key: str | MultiPartitionKey) -> Path:
    if isinstance(key, MultiPartitionKey):
        dims = key.keys_by_dimension
        return warehouse / asset / f"kb={dims['kb']}" / f"strategy_version={dims['strategy_version']}"
    if "|" in key:  # a multi-partition key passed as its string form
        kb, version = key.split("|", 1)
        return warehouse / asset / f"kb={kb}" / f"strategy_version={version}"
    return warehouse / asset / f"kb={key}"


class PartitionedParquetIOManager(ConfigurableIOManager):
    """``warehouse`` empty means ``$CORPUS_HOME/warehouse``."""

    warehouse: str = ""

    @property
    def _root(self) -> Path:
        return Path(self.warehouse).resolve() if self.warehouse else Layout.from_env().warehouse

    def _path(self, context: OutputContext | InputContext) -> Path:
        asset = context.asset_key.path[-1]
        return _partition_dir(self._root, asset, context.asset_partition_key)

    def handle_output(self, context: OutputContext, obj) -> None:
        if obj is None:
            return
        manifest = {
            "asset": context.asset_key.to_user_string(),
            "partition": str(context.asset_partition_key),
            "run_id": context.run_id,
        }
        files = write_partition(self._path(context), obj, manifest)
        context.add_output_metadata({"path": str(self._path(context)), "files": [f.name for f in files]})

    def load_input(self, context: InputContext):
        return read_partition(self._path(context))
