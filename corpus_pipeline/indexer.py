"""Indexing as a library call; the engine that runs it is injected.

    from corpus_pipeline.indexer import index
    summaries = index(layout, ["runbooks"], force=False)      # what `corpus index` does

``index`` validates every KB's configuration and registers its strategy version first (an
invalid kb.yaml is refused before anything is written), then hands the (KB, version) pairs
to an **indexer**: the engine that parses, chunks, embeds and publishes them. The library
does not know which engine that is. The one this project ships runs Dagster
(``assets.runner.index_planned``: every run recorded on the instance, seen in the UI); the
composition roots install it (``use_indexer``: the ``corpus`` CLI at start, and so
``corpus serve``), and an application that calls ``KB.index`` without one gets the engine
named by the ``corpus_pipeline.indexers`` entry point ``dagster`` (pyproject.toml), loaded
then. A test or another orchestrator passes its own (``index(..., indexer=...)``).

An indexer is any callable of this shape; it returns one summary per KB (an object with
``to_dict()``, ``status`` and ``strategy_version``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Protocol

from corpus_pipeline.errors import ConfigError
from corpus_pipeline.kbconfig import KnowledgeBase, resolve_kb
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.versions import register_version

if TYPE_CHECKING:
    from corpus_pipeline.progress import Reporter

#: The entry-point group indexers are found in, and the one used when none is installed.
ENTRY_POINTS = "corpus_pipeline.indexers"
DEFAULT = "dagster"


class Indexer(Protocol):
    def __call__(
        self,
        layout: Layout,
        planned: Sequence[tuple[KnowledgeBase, str]],
        *,
        force: bool = False,
        wait: float = 0.0,
        reporter: Reporter | None = None,
        workers: int = 1,
    ) -> list[Any]: ...


_installed: Indexer | None = None
_lock = threading.Lock()


def use_indexer(indexer: Indexer | None) -> None:
    """Install the indexer ``index`` runs when none is passed (None: back to the default)."""
    global _installed
    with _lock:
        _installed = indexer


def current_indexer() -> Indexer:
    """The installed indexer, else the ``dagster`` one of the ``corpus_pipeline.indexers``
    entry points (a ``ConfigError`` saying what to do when there is none)."""
    with _lock:
        if _installed is not None:
            return _installed
    found = [e for e in entry_points(group=ENTRY_POINTS) if e.name == DEFAULT]
    if not found:
        raise ConfigError(
            f"no indexer is installed and no {ENTRY_POINTS!r} entry point named {DEFAULT!r} was found: "
            "install the project (`scripts/install.sh`), or pass an indexer (corpus_pipeline.indexer.use_indexer)."
        )
    loaded: Indexer = found[0].load()
    return loaded


def plan(layout: Layout, names: Sequence[str]) -> list[tuple[KnowledgeBase, str]]:
    """Every KB's configuration validated (all before any is registered), then each
    registered: the (KB, strategy version) pairs to index."""
    if not names:
        raise ConfigError(f"no knowledge bases under {layout.kbs}: make a folder there with your documents in it.")
    kbs = [resolve_kb(layout.kb_dir(n)) for n in names]
    return [(kb, register_version(layout, kb)) for kb in kbs]


def index(
    layout: Layout,
    names: Sequence[str],
    *,
    force: bool = False,
    wait: float = 0.0,
    reporter: Reporter | None = None,
    workers: int = 1,
    indexer: Indexer | None = None,
) -> list[Any]:
    """Bring the KBs ``names`` up to date (``corpus index``): one summary per KB."""
    planned = plan(layout, names)
    run = indexer if indexer is not None else current_indexer()
    return run(layout, planned, force=force, wait=wait, reporter=reporter, workers=workers)
