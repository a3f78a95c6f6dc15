"""Where things live: ``$CORPUS_HOME`` (default ``./data``) holds ``kbs/`` (input, one folder
per knowledge base) and ``warehouse/`` (every output; ignored by git)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from corpus_pipeline.errors import ConfigError

KB_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


def corpus_home() -> Path:
    return Path(os.environ.get("CORPUS_HOME", "data")).expanduser().resolve()


def check_kb_name(name: str) -> str:
    """KB names become Dagster partition keys and table names: ASCII slugs only."""
    if not KB_NAME.match(name):
        raise ConfigError(
            f"knowledge base name {name!r} is not allowed: use lower-case letters, digits, '-' "
            "and '_' (at most 64, starting with a letter or digit). Rename the folder under kbs/."
        )
    return name


@dataclass(frozen=True)
class Layout:
    """The folders under one CORPUS_HOME."""

    home: Path

    @classmethod
    def from_env(cls) -> Layout:
        return cls(corpus_home())

    @property
    def kbs(self) -> Path:
        return self.home / "kbs"

    @property
    def warehouse(self) -> Path:
        return self.home / "warehouse"

    @property
    def lancedb(self) -> Path:
        return self.warehouse / "lancedb"

    @property
    def cache(self) -> Path:
        return self.warehouse / "cache"

    @property
    def images(self) -> Path:
        return self.warehouse / "images"

    @property
    def versions(self) -> Path:
        return self.warehouse / "versions"

    @property
    def dagster_home(self) -> Path:
        return self.home / "dagster"

    def kb_dir(self, kb: str) -> Path:
        return self.kbs / check_kb_name(kb)

    def table_dir(self, asset: str) -> Path:
        return self.warehouse / asset

    def partition_dir(self, asset: str, kb: str, version: str | None = None) -> Path:
        d = self.table_dir(asset) / f"kb={kb}"
        return d / f"strategy_version={version}" if version is not None else d

    def list_kbs(self) -> list[str]:
        if not self.kbs.is_dir():
            return []
        return sorted(p.name for p in self.kbs.iterdir() if p.is_dir() and not p.name.startswith("."))
