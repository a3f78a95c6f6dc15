"""Where everything lives: the one path scheme of a ``CORPUS_HOME``.

    $CORPUS_HOME/                              (default ./data)
      kbs/<kb>/                                input: one folder per knowledge base
      warehouse/
        <asset>/kb=<kb>/                       a kb partition (documents, parsed_blocks, ...)
        <asset>/kb=<kb>/strategy_version=<v>/  a kb x strategy_version partition
        lancedb/chunks__<kb>__<v>.lance        the search table of one partition
        versions/<kb>/<v>.json                 each registered version's configuration
        versions/<kb>/ACTIVE, CURRENT          what search reads; what kb.yaml yields now
        versions/<kb>/snapshots/<v>.json       the published snapshot of each version (what readers read)
        state/<kb>/parse.json, index-<v>.json  what was last parsed / built (freshness)
        images/                                extracted images, content-addressed
        staging/<run_id>/                      batches between a run's steps, _kb.json names the KB
                                               (removed by the run; a killed run's by the KB's next
                                               index or drop: store/staging.py)
        cache/                                 embeddings, vision and LLM answers
      dagster/                                 the Dagster instance (unless DAGSTER_HOME is set)

``$CORPUS_WAREHOUSE`` (default ``$CORPUS_HOME/warehouse``) may be an object-store URL
(``s3://bucket/prefix``, ``gs://...``, ``az://...``): the shared part of the warehouse
(partitions, search tables, versions, state, images) then lives there, read and written
through fsspec (``universal_pathlib``), pyarrow and LanceDB's own object-store support,
while what belongs to one machine (``locks/``, ``staging/``, ``cache/``) stays under
``$CORPUS_HOME/warehouse``. Paths of the shared part are ``UPath`` objects (local ones are
``pathlib.Path`` subclasses, so a local warehouse behaves as before).

Every part of the product (the Dagster IO manager, freshness, versions, stats, lineage,
search) asks this class for a path; none builds one itself, so a change here cannot
silently split readers from writers (which would switch off incremental reuse).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from upath import UPath

from corpus_pipeline.errors import ConfigError

KB_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
#: Partition folder names, hive style, so DuckDB / Spark read them with ``hive_partitioning``.
KB_DIM, VERSION_DIM = "kb", "strategy_version"


def corpus_home() -> Path:
    """``$CORPUS_HOME`` (default ``./data``), absolute."""
    return Path(os.environ.get("CORPUS_HOME", "data")).expanduser().resolve()


WAREHOUSE_ENV = "CORPUS_WAREHOUSE"


def is_url(location: str) -> bool:
    """``s3://...``, ``gs://...``, ``memory://...``: a location fsspec resolves (not ``file://``)."""
    scheme, sep, _ = location.partition("://")
    return bool(sep) and scheme not in ("", "file", "local")


def warehouse_location(home: Path, configured: str | None = None) -> UPath:
    """The shared warehouse: ``configured`` (or ``$CORPUS_WAREHOUSE``), else ``home/warehouse``."""
    where = configured if configured is not None else os.environ.get(WAREHOUSE_ENV, "")
    if not where:
        return UPath(home / "warehouse")
    if is_url(where):
        return UPath(where.rstrip("/"))
    return UPath(Path(where.removeprefix("file://")).expanduser().resolve())


def check_kb_name(name: str) -> str:
    """KB names become Dagster partition keys and table names: ASCII slugs only."""
    if not KB_NAME.match(name):
        raise ConfigError(
            f"knowledge base name {name!r} is not allowed: use lower-case letters, digits, '-' "
            "and '_' (at most 64, starting with a letter or digit). Rename the folder under kbs/."
        )
    return name


def search_table_name(kb: str, version: str) -> str:
    """The LanceDB table of one (kb, strategy_version)."""
    return f"chunks__{kb}__{version}"


@dataclass(frozen=True)
class Layout:
    """The folders and files under one CORPUS_HOME (and its warehouse, maybe remote)."""

    home: Path
    #: The shared warehouse; ``home/warehouse`` (or ``$CORPUS_WAREHOUSE``) when not given.
    warehouse_at: UPath | None = None

    @classmethod
    def from_env(cls) -> Layout:
        return cls.at(None)

    @classmethod
    def at(cls, home: str | os.PathLike[str] | None, warehouse: str | None = None) -> Layout:
        """The layout of ``home`` (the environment's when it is empty or None) and of
        ``warehouse`` (``$CORPUS_WAREHOUSE``, else ``home/warehouse``, when None)."""
        root = Path(home).expanduser().resolve() if home else corpus_home()
        return cls(root, warehouse_location(root, warehouse))

    @property
    def remote(self) -> bool:
        """Whether the shared warehouse is on an object store."""
        return not isinstance(self.warehouse, Path)

    # ------------------------------------------------------------------ top level

    @property
    def kbs(self) -> Path:
        return self.home / "kbs"

    @property
    def warehouse(self) -> UPath:
        """The shared warehouse: partitions, search tables, versions, state, images."""
        return self.warehouse_at if self.warehouse_at is not None else warehouse_location(self.home)

    @property
    def local(self) -> Path:
        """What belongs to this machine: locks, staging, caches (``home/warehouse``)."""
        return self.home / "warehouse"

    @property
    def lancedb(self) -> UPath:
        return self.warehouse / "lancedb"

    @property
    def cache(self) -> Path:
        return self.local / "cache"

    @property
    def embedding_cache_file(self) -> Path:
        return self.cache / "embeddings.sqlite"

    @property
    def images(self) -> UPath:
        return self.warehouse / "images"

    @property
    def staging(self) -> Path:
        """Batches in flight between the steps of one run (``staging/<run_id>/``)."""
        return self.local / "staging"

    def staging_dir(self, run_id: str) -> Path:
        return self.staging / run_id

    @property
    def versions(self) -> UPath:
        return self.warehouse / "versions"

    @property
    def state(self) -> UPath:
        return self.warehouse / "state"

    @property
    def locks(self) -> Path:
        return self.local / "locks"

    @property
    def dagster_home(self) -> Path:
        return self.home / "dagster"

    # ------------------------------------------------------------------ knowledge bases

    def kb_dir(self, kb: str) -> Path:
        return self.kbs / check_kb_name(kb)

    def list_kbs(self) -> list[str]:
        if not self.kbs.is_dir():
            return []
        return sorted(p.name for p in self.kbs.iterdir() if p.is_dir() and not p.name.startswith("."))

    # ------------------------------------------------------------------ partitions

    def asset_dir(self, asset: str) -> UPath:
        return self.warehouse / asset

    def partition_dir(self, asset: str, kb: str, version: str | None = None) -> UPath:
        """``<asset>/kb=<kb>`` or ``<asset>/kb=<kb>/strategy_version=<version>``."""
        d = self.asset_dir(asset) / f"{KB_DIM}={kb}"
        return d / f"{VERSION_DIM}={version}" if version is not None else d

    def eval_report_file(self, kb: str, version: str) -> UPath:
        """The ``retrieval_eval`` report of (kb, version)."""
        return self.partition_dir("retrieval_eval", kb, version) / "report.json"

    def versions_with_partition(self, asset: str, kb: str) -> list[str]:
        """The strategy versions of ``kb`` that have a folder for ``asset``."""
        base = self.asset_dir(asset) / f"{KB_DIM}={kb}"
        if not base.is_dir():
            return []
        prefix = f"{VERSION_DIM}="
        return sorted(d.name[len(prefix) :] for d in base.iterdir() if d.is_dir() and d.name.startswith(prefix))

    # ------------------------------------------------------------------ search tables

    def search_table_dir(self, kb: str, version: str) -> UPath:
        return self.lancedb / f"{search_table_name(kb, version)}.lance"

    # ------------------------------------------------------------------ versions and state

    def version_dir(self, kb: str) -> UPath:
        return self.versions / kb

    def version_file(self, kb: str, version: str) -> UPath:
        return self.versions / kb / f"{version}.json"

    def active_file(self, kb: str) -> UPath:
        return self.versions / kb / "ACTIVE"

    def current_file(self, kb: str) -> UPath:
        return self.versions / kb / "CURRENT"

    def snapshot_dir(self, kb: str) -> UPath:
        return self.versions / kb / "snapshots"

    def snapshot_file(self, kb: str, version: str) -> UPath:
        """The published snapshot of (kb, version): the one file every reader starts from."""
        return self.snapshot_dir(kb) / f"{version}.json"

    def state_dir(self, kb: str) -> UPath:
        return self.state / kb

    def parse_state_file(self, kb: str) -> UPath:
        return self.state_dir(kb) / "parse.json"

    def index_state_file(self, kb: str, version: str) -> UPath:
        return self.state_dir(kb) / f"index-{version}.json"
