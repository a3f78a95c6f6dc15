"""corpus_pipeline: index folders of documents for retrieval, and search them.

    import corpus_pipeline
    kb = corpus_pipeline.open_kb("product-manual-en", home="data")
    kb.search("Which port does the web console listen on?").results

See ``corpus_pipeline.api``. The names below are imported on first use, so that
``import corpus_pipeline`` stays cheap for the parts that need none of them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["KB", "list_kbs", "open_kb"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from corpus_pipeline import api

        return getattr(api, name)
    raise AttributeError(f"module 'corpus_pipeline' has no attribute {name!r}")
