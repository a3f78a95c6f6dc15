"""The IO manager of the batches between a fanned-out asset's steps (plan → batch →
merge): pickles under ``warehouse/staging/<run_id>/``, which every step of the run reads,
in whichever process or on whichever worker it runs (CORPUS_HOME is shared by all of them).
The merge step removes its run's batches once the asset's output is written. The folder
names its KB (``corpus_pipeline.store.staging``), so that what a killed run left is removed
by the KB's next ``corpus index`` or ``corpus drop``. An input
marked ``STAGED_LAZILY`` gets handles (``StagedBatch``) that its step reads one at a time."""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dagster import ConfigurableIOManager, InputContext, OutputContext

from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.staging import mark_staging, remove_if_done

#: An input whose definition's metadata sets this gets each batch as a ``StagedBatch``, read
#: when the step asks (``embed_merge``: one batch's vectors at a time, not every batch's).
STAGED_LAZILY = "corpus/staged_lazily"


@dataclass(frozen=True)
class StagedBatch:
    """One batch's output on disk, not yet read."""

    path: Path

    def load(self) -> Any:
        with self.path.open("rb") as f:
            return pickle.load(f)


def _name(step_key: str, output: str, mapping_key: str | None) -> str:
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in step_key)
    return f"{safe}__{output}" + (f"__{mapping_key}" if mapping_key else "") + ".pkl"


class BatchIOManager(ConfigurableIOManager):
    """``home`` is CORPUS_HOME; empty means the environment's."""

    home: str = ""

    def _path(self, run_id: str, step_key: str, output: str, mapping_key: str | None) -> Path:
        return Layout.at(self.home).staging_dir(run_id) / _name(step_key, output, mapping_key)

    def handle_output(self, context: OutputContext, obj: Any) -> None:
        path = self._path(context.run_id, context.step_key, context.name, context.mapping_key)
        kb = str(context.partition_key).partition("|")[0] if context.has_partition_key else ""
        mark_staging(path.parent, context.run_id, kb)  # before the batch: a kill after it leaves a named folder
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(obj, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        mark_staging(path.parent, context.run_id, kb)  # (again, if a merge took the folder's last marker meanwhile)

    def load_input(self, context: InputContext) -> Any:
        up = context.upstream_output
        assert up is not None
        staged = StagedBatch(self._path(up.run_id, up.step_key, up.name, up.mapping_key))
        if (context.definition_metadata or {}).get(STAGED_LAZILY):
            if not staged.path.exists():  # (said now, not when the step reads it)
                raise FileNotFoundError(f"{staged.path}: the staged output of step {up.step_key} is missing")
            return staged
        return staged.load()


def remove_staging(home: str, run_id: str, asset: str | None = None) -> None:
    """A run's batches (of one fanned-out ``asset``, or all), once read (idempotent)."""
    folder = Layout.at(home).staging_dir(run_id)
    if asset is None:
        shutil.rmtree(folder, ignore_errors=True)
        return
    for f in folder.glob(f"{asset}.*"):
        f.unlink(missing_ok=True)
    remove_if_done(folder)  # when it was the last (only the marker left)
