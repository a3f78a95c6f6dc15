"""``CorpusResource``: where the KBs and the warehouse are, and the KB configuration of a
partition (the current ``kb.yaml``, or the snapshot that named an older version)."""

from __future__ import annotations

from pathlib import Path

from dagster import ConfigurableResource

from corpus_pipeline.embedding import EmbeddingCache
from corpus_pipeline.kbconfig import KnowledgeBase, resolve_kb
from corpus_pipeline.paths import Layout
from corpus_pipeline.versioning import load_version, register_version, strategy_version


class CorpusResource(ConfigurableResource):
    """``home`` is CORPUS_HOME; empty means the environment variable (default ``./data``)."""

    home: str = ""

    @property
    def layout(self) -> Layout:
        return Layout(Path(self.home).resolve()) if self.home else Layout.from_env()

    def kb(self, name: str) -> KnowledgeBase:
        return resolve_kb(self.layout.kb_dir(name))

    def kb_at_version(self, name: str, version: str) -> KnowledgeBase:
        """The KB configured as it was when ``version`` was registered."""
        kb = self.kb(name)
        if strategy_version(kb) == version:
            register_version(self.layout.versions, kb)
            return kb
        return load_version(self.layout.versions, self.layout.kb_dir(name), version)

    def previous(self, asset: str, kb: str, version: str | None = None):
        """The last materialized output of a partition, or None (first run, or unreadable)."""
        from corpus_pipeline.errors import StoreError
        from corpus_pipeline.store.parquet import read_partition

        try:
            return read_partition(self.layout.partition_dir(asset, kb, version))
        except (StoreError, OSError, ValueError):
            return None

    def embedding_cache(self) -> EmbeddingCache:
        return EmbeddingCache(self.layout.cache / "embeddings.sqlite")
