"""The indexing engine the ``corpus`` CLI installs (``corpus_pipeline.indexer.use_indexer``)."""

from __future__ import annotations

from typing import Any

from corpus_pipeline.store.layout import Layout


def dagster_indexer(layout: Layout, planned: Any, **kwargs: Any) -> list[Any]:
    """Dagster's indexer (``assets.runner.index_planned``), imported when an index runs,
    not when the CLI starts."""
    from assets.runner import index_planned  # Dagster is imported only here

    return index_planned(layout, planned, **kwargs)
