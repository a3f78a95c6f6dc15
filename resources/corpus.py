"""``CorpusResource``: where the KBs and the warehouse are, a partition's KB configuration
(kb.yaml for the per-KB assets, the registered snapshot for versioned ones) and the
chunking tools of a KB."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dagster import ConfigurableResource

from corpus_pipeline.chunking.context import ContextFactory
from corpus_pipeline.embedding import EmbeddingCache
from corpus_pipeline.kbconfig import KnowledgeBase, resolve_kb
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.parquet import DEFAULT_NAME
from corpus_pipeline.store.versions import build_kb

if TYPE_CHECKING:
    from corpus_pipeline.indexing.batches import BatchRule


class CorpusResource(ConfigurableResource):  # type: ignore[type-arg]  # (Dagster's generic parameter is the resource's own type)
    """``home`` is CORPUS_HOME; empty means the environment variable (default ``./data``)."""

    home: str = ""
    #: How many batches a fanned-out stage is cut into at most per worker (0: $CORPUS_WORKERS, else 1).
    workers: int = 0
    #: The smallest batch of documents to parse / texts to embed (0: ``indexing.batches``' rule).
    min_batch_documents: int = 0
    min_batch_texts: int = 0

    @property
    def batch_workers(self) -> int:
        from corpus_pipeline.indexing.batches import workers_from_env

        return self.workers if self.workers > 0 else workers_from_env()

    def batch_rule(self, stage: str) -> BatchRule:
        """How ``stage`` (``parse``, ``describe``, ``chunk`` or ``embed``) cuts its work
        (``indexing.batches``)."""
        from corpus_pipeline.indexing import batches

        minimum = {"embed": self.min_batch_texts, "describe": 0}.get(stage, self.min_batch_documents)
        return batches.rule(stage, minimum)

    @property
    def layout(self) -> Layout:
        return Layout.at(self.home)

    def kb(self, name: str) -> KnowledgeBase:
        """The KB as kb.yaml configures it now (for the per-KB assets: parsing)."""
        return resolve_kb(self.layout.kb_dir(name))

    def kb_at_version(self, name: str, version: str) -> KnowledgeBase:
        """The KB a build of ``version`` uses: its registered strategies; what the version
        does not hash (endpoints, keys, batch sizes, thresholds) as kb.yaml says now, while
        kb.yaml still yields the version (``build_kb``)."""
        return build_kb(self.layout, name, version)

    def previous(self, asset: str, kb: str, version: str | None = None, columns: list[str] | None = None) -> Any:
        """The last materialized output of a partition, or None (first run, or unreadable);
        with ``columns``, only those it has (a plan's keys, not every row's text)."""
        from corpus_pipeline.errors import StoreError
        from corpus_pipeline.store.parquet import dataset, read_partition

        folder = self.layout.partition_dir(asset, kb, version)
        try:
            if columns is None:
                return read_partition(folder)
            ds = dataset(folder)
            return ds.to_table(columns=[c for c in columns if c in ds.schema.names])
        except (StoreError, OSError, ValueError):
            return None

    def previous_dataset(self, asset: str, kb: str, version: str | None = None) -> Any:
        """The last materialized output of a partition as a Parquet dataset, nothing read
        yet, or None (first run, or unreadable): for a step that reads it a file at a time."""
        found = self.previous_datasets(asset, kb, version)
        return found.get(DEFAULT_NAME) if found else None

    def previous_datasets(
        self, asset: str, kb: str, version: str | None = None, names: Sequence[str] = (DEFAULT_NAME,)
    ) -> dict[str, Any] | None:
        """``previous_dataset`` of a partition of several tables (``names``: ``parsed_blocks``'
        texts, blocks and images), or None when one of them is missing or unreadable."""
        from corpus_pipeline.errors import StoreError
        from corpus_pipeline.store.parquet import dataset, has_partition

        folder = self.layout.partition_dir(asset, kb, version)
        try:
            if not all(has_partition(folder, name) for name in names):
                return None
            return {name: dataset(folder, name) for name in names}
        except (StoreError, OSError, ValueError):
            return None

    def embedding_cache(self) -> EmbeddingCache:
        return EmbeddingCache(self.layout.embedding_cache_file)

    def tools(self, kb: KnowledgeBase, llm_defaults: dict[str, Any] | None = None) -> ContextFactory:
        """The chunking tools of ``kb`` (token counter, cached embedder, LLM client), the
        same factory ``corpus preview`` uses."""
        return ContextFactory.for_kb(kb, cache_dir=self.layout.cache, llm_defaults=llm_defaults)
