"""The Python API: open a knowledge base, search it, look at its versions and lineage, index it.

    import corpus_pipeline

    kb = corpus_pipeline.open_kb("product-manual-en", home="data")
    result = kb.search("Which port does the web console listen on?", top_k=3)
    for r in result.results:
        print(r.doc_path, r.section_path, r.text[:200])
    kb.versions()            # [{strategy_version, active, current, built, plan, child_chunks, ...}]
    kb.lineage(chunk_id)     # chunk -> parent -> blocks -> document -> plan -> run
    kb.index()               # bring it up to date (Dagster runs on the CORPUS_HOME's instance)

One ``KB`` keeps its searcher and the embedding model open between searches (a local model
is loaded once per process and shared by every KB that uses it). Each search starts from
the version's published snapshot (``store.snapshots``): the searcher is reopened when a new
one was published (``corpus index`` in another process) or the active version changed, so a
long-lived application always searches what ``corpus index`` last published, and never a
half-written update. A search whose snapshot was replaced or retired while it ran is run
again on the one published now. ``corpus search``, ``corpus serve`` and this API run the
same ``Searcher``.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from corpus_pipeline.errors import ConfigError, ModelError, StoreError
from corpus_pipeline.indexer import Indexer
from corpus_pipeline.kbconfig import KnowledgeBase, resolve_kb
from corpus_pipeline.retrieval import Searcher
from corpus_pipeline.retrieval.search import SearchResult
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.snapshots import SnapshotNotFound, is_published, resolve
from corpus_pipeline.store.versions import active_version


class KB:
    """One knowledge base of a CORPUS_HOME, ready to search (see the module docstring)."""

    def __init__(self, name: str, home: str | Path | None = None) -> None:
        self.layout = Layout.at(home)
        self.name = name
        self._kb: KnowledgeBase = resolve_kb(self.layout.kb_dir(name))
        self._lock = threading.Lock()
        self._searchers: dict[str, Searcher] = {}

    # ------------------------------------------------------------------ reading

    @property
    def config(self) -> KnowledgeBase:
        return self._kb

    @property
    def active_version(self) -> str | None:
        return active_version(self.layout, self.name)

    def versions(self) -> list[dict[str, Any]]:
        """Every registered version, newest first: active, current (kb.yaml's), built, plan, counts."""
        from corpus_pipeline.store.versions import list_versions

        return list_versions(self.layout, self.name)

    def activate(self, version: str) -> str | None:
        """Make a built version the one search reads (rollback, no rebuild); returns the
        version that was active. Open searchers move to it on their next search."""
        from corpus_pipeline.store.versions import activate

        return activate(self.layout, self.name, version)

    def lineage(self, chunk_id: str, *, context_chars: int = 200) -> dict[str, Any]:
        """Where a chunk comes from: parent, blocks, document, plan, Dagster run."""
        from corpus_pipeline.lineage import trace_chunk

        return trace_chunk(self.layout, chunk_id, context_chars=context_chars)

    def _version(self, version: str | None) -> str:
        v = version or self.active_version
        if v is None:
            raise StoreError(
                f"knowledge base {self.name!r} has no active version yet; run `corpus index --kb {self.name}`"
            )
        return v

    def searcher(self, version: str | None = None) -> Searcher:
        """The open searcher of ``version`` (default: the active one) over its published
        snapshot, reopened when another snapshot was published since it was opened."""
        v = self._version(version)
        snap = resolve(self.layout, self.name, v)
        with self._lock:
            cached = self._searchers.get(v)
            if cached is not None and cached.snapshot.id == snap.id:
                return cached
            if cached is not None:
                cached.close()
            for old in [k for k in self._searchers if k != v and not is_published(self.layout, self.name, k)]:
                self._searchers.pop(old).close()  # (a retired version's)
            s = Searcher.open(self.layout, self._kb, v, snapshot=snap)  # local models are loaded once per process
            self._searchers[v] = s
            return s

    def search(
        self,
        query: str,
        *,
        top_k: int | None = None,
        filters: Any = None,
        version: str | None = None,
        settings: dict[str, Any] | None = None,
    ) -> SearchResult:
        """Hybrid search (vector + keyword, fused, elevated to parent blocks) over the active
        version (or ``version``); ``filters`` a ``SearchFilters`` or a dict of its keys;
        ``settings`` overrides keys of kb.yaml's ``search:`` for this query. The result's
        ``snapshot`` is what it read (its parents and lineage are read from the same)."""
        kwargs: dict[str, Any] = {"top_k": top_k}
        if filters is not None:
            kwargs["filters"] = _filters(filters)
        seen: str | None = None
        for attempt in (0, 1):
            try:
                s = self.searcher(version)
                seen = s.snapshot.id
                return _with_settings(s, settings).search(query, **kwargs)
            except (ConfigError, ModelError, SnapshotNotFound):
                raise  # (the request's or the model's fault, or the version is gone)
            except Exception:
                # The snapshot may have been replaced twice or retired while it was read:
                # once more on the one published now, if there is another.
                if attempt or (seen is not None and resolve(self.layout, self.name, self._version(version)).id == seen):
                    raise
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ writing

    def index(self, *, force: bool = False, wait: float = 0.0, indexer: Indexer | None = None) -> dict[str, Any]:
        """``corpus index --kb NAME``: parse, chunk, embed and publish what changed; returns
        the summary (status, counts, errors). ``indexer``: the engine that runs it (default:
        the installed one, else Dagster on the CORPUS_HOME's instance: ``corpus_pipeline.indexer``)."""
        from corpus_pipeline.indexer import index

        summary = index(self.layout, [self.name], force=force, wait=wait, indexer=indexer)[0].to_dict()
        self._kb = resolve_kb(self.layout.kb_dir(self.name))
        return dict(summary)

    def close(self) -> None:
        with self._lock:
            for s in self._searchers.values():
                s.close()
            self._searchers.clear()

    def __enter__(self) -> KB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _with_settings(base: Searcher, settings: dict[str, Any] | None) -> Searcher:
    """A searcher sharing ``base``'s table, parents and models with ``settings`` (keys of
    ``search:``) over its own; ``base`` itself without them."""
    if not settings:
        return base
    import copy

    s = copy.copy(base)
    s.settings = base.settings.with_(**settings)
    return s


def _filters(value: Any) -> Any:
    from corpus_pipeline.retrieval import filters as f  # (the filters module of retrieval)

    cls = f.SearchFilters
    return value if isinstance(value, cls) else cls.model_validate(value)


def open_kb(name: str, home: str | Path | None = None) -> KB:
    """A knowledge base of ``home`` (default ``$CORPUS_HOME``, else ``./data``)."""
    return KB(name, home)


def list_kbs(home: str | Path | None = None) -> list[str]:
    """The knowledge bases (folders under ``kbs/``) of ``home``."""
    return Layout.at(home).list_kbs()
