"""What each stage did, as typed records: the assets put them in Dagster metadata and in the
partition's manifest; ``corpus index`` reads them back from the manifest (``read_stats``),
never from strings in run events.

    DiscoverStats   documents found, refused, by format, skipped entries (path, reason)
    ParseStats      parsed, reused, failed (path, error), blocks, images
    DescribeStats   images, by status
    ChunkStats      documents chunked / reused, rows, fallbacks, re-cut chunks, LLM use
    EmbedStats      texts embedded / reused from the cache, dimension
    PublishStats    rows in the search table, activated, retired versions

``StageResult`` is what a stage returns to its asset: the table(s), the stats, and the
quality checks' outcomes once they ran; the IO manager writes all three.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import pyarrow as pa
from upath import UPath

if TYPE_CHECKING:
    from corpus_pipeline.store.parquet import PartitionWriter

S = TypeVar("S", bound="StageStats")


@dataclass
class StageStats:
    """Base of every stage's stats: plain fields, JSON round trip."""

    stage: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls: type[S], data: Mapping[str, Any] | None) -> S:
        """From ``to_dict``'s output; unknown keys ignored, missing ones default (manifests
        written by older code)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in (data or {}).items() if k in names})

    def metadata(self) -> dict[str, Any]:
        """Flat values for Dagster metadata (lists and mappings stay as they are)."""
        return self.to_dict()


@dataclass
class DiscoverStats(StageStats):
    stage: ClassVar[str] = "discover"
    documents: int = 0
    refused: int = 0  # refused before parsing (too large, ...)
    formats: dict[str, int] = field(default_factory=dict)
    # entries not taken as documents, with why: {path, reason} (symlinks, unreadable files,
    # unsupported formats; at most parsing.discovery.MAX_SKIPPED_LISTED), and their count
    skipped: list[dict[str, str]] = field(default_factory=list)
    skipped_count: int = 0


@dataclass
class ParseStats(StageStats):
    stage: ClassVar[str] = "parse"
    documents: int = 0
    parsed: int = 0  # documents parsed in this run
    reused: int = 0  # documents whose previous parse was kept (same content hash and parser)
    failed: list[dict[str, str]] = field(default_factory=list)  # {path, error}
    blocks: int = 0
    block_types: dict[str, int] = field(default_factory=dict)
    images: int = 0


@dataclass
class DescribeStats(StageStats):
    stage: ClassVar[str] = "describe"
    images: int = 0
    by_status: dict[str, int] = field(default_factory=dict)


@dataclass
class ChunkStats(StageStats):
    stage: ClassVar[str] = "chunk"
    documents: int = 0  # documents chunked in this run
    reused: int = 0  # documents whose previous rows were kept
    rows: int = 0
    image_chunks: int = 0
    fallbacks: int = 0  # chunks a step's fallback made
    recut_chunks: int = 0  # chunks over the model's window, cut again (children)
    recut_parts: int = 0  # the parts they became
    max_chars: int = 0
    max_tokens: int = 0
    # LLM use (PROPOSITION, LLM): requests sent, of which failed; answered from the cache;
    # tokens the endpoint reported for the calls made in this run (cached answers cost none)
    llm_calls: int = 0
    llm_errors: int = 0
    llm_cache_hits: int = 0
    llm_prompt_tokens: int = 0
    llm_completion_tokens: int = 0
    # sentences SEMANTIC embedded (by embeddings), and answered from the vector cache
    sentences_embedded: int = 0
    sentences_reused: int = 0


@dataclass
class EmbedStats(StageStats):
    stage: ClassVar[str] = "embed"
    model: str = ""
    embedded: int = 0  # texts the model embedded in this run
    reused: int = 0  # texts whose vectors came from the cache
    dimension: int = 0


@dataclass
class PublishStats(StageStats):
    stage: ClassVar[str] = "publish"
    rows: int = 0
    table: str = ""
    #: how the search table was written: create, replace (whole), merge (changed documents' rows), unchanged
    write: str = ""
    rows_written: int = 0
    rows_deleted: int = 0
    docs_changed: int = 0
    activated: bool = False
    active_version: str | None = None
    retired_versions: list[str] = field(default_factory=list)


@dataclass
class StageResult:
    """A stage's output for its asset: the table (or named tables), its stats, and the
    quality checks' outcomes (``CheckOutcome.to_dict()``) once they ran. ``tables`` may be
    a ``store.parquet.PartitionWriter`` the stage streamed its rows into (into the
    partition's folder): the IO manager then only commits it."""

    tables: pa.Table | dict[str, pa.Table] | PartitionWriter
    stats: StageStats
    checks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def table(self) -> pa.Table:
        """The stage's one table (stages that make several use ``named``)."""
        if isinstance(self.tables, dict):
            raise TypeError(f"the {self.stats.stage} stage made several tables: {', '.join(self.tables)}")
        if not isinstance(self.tables, pa.Table):
            raise TypeError(f"the {self.stats.stage} stage streamed its rows into its partition: read them there")
        return self.tables

    def named(self, name: str) -> pa.Table:
        if not isinstance(self.tables, dict):
            raise TypeError(f"the {self.stats.stage} stage made one table (or streamed it), not {name!r}")
        return self.tables[name]

    def manifest(self) -> dict[str, Any]:
        return {"stage": self.stats.stage, "stats": self.stats.to_dict(), "checks": list(self.checks)}


def read_stats(folder: UPath | Path, cls: type[S]) -> S | None:
    """The stats a stage recorded in a partition's manifest, or None (not built, or built
    before stats were recorded)."""
    from corpus_pipeline.store.parquet import read_manifest

    m = read_manifest(folder)
    if "stats" not in m:
        return None
    stats = m.get("stats")
    return cls.from_dict(stats if isinstance(stats, Mapping) else {})


def read_checks(folder: UPath | Path) -> list[dict[str, Any]]:
    """The quality checks' outcomes recorded with a partition ([] when none)."""
    from corpus_pipeline.store.parquet import read_manifest

    checks = read_manifest(folder).get("checks")
    return [c for c in checks if isinstance(c, dict)] if isinstance(checks, list) else []
