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

An indexer is any callable of this shape; it returns one ``KBIndexSummary`` per KB.

One KB's invalid configuration never stops the others: it is refused before anything of it
is written and reported as a summary of status ``invalid`` (naming the file, key and fix),
and the other KBs are indexed. Asked for that one KB alone, ``index`` raises the
``ConfigError`` itself.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Protocol

from corpus_pipeline.errors import ConfigError
from corpus_pipeline.kbconfig import KnowledgeBase, resolve_kb
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.versions import active_version, register_version

if TYPE_CHECKING:
    from corpus_pipeline.progress import Reporter


@dataclass
class KBIndexSummary:
    kb: str
    strategy_version: str
    # ok | failed | busy (another process was writing the KB; nothing done) | invalid (its
    # configuration refused; nothing written) | empty (no document found: nothing to search)
    status: str = "ok"
    up_to_date: bool = False  # nothing had changed: no run was needed
    reason: str = ""
    active_version: str | None = None
    partitions_run: list[str] = field(default_factory=list)
    documents: int = 0
    documents_parsed: int = 0
    documents_reused: int = 0
    failed_documents: list[dict[str, str]] = field(default_factory=list)
    skipped_entries: list[dict[str, str]] = field(default_factory=list)  # {path, reason}: symlinks, unreadable, ...
    skipped_count: int = 0
    documents_chunked: int = 0
    parent_blocks: int = 0
    child_chunks: int = 0
    recut_chunks: int = 0  # chunks cut again to fit the embedding model's window (this run)
    embedded: int = 0
    reused: int = 0  # chunks whose vectors came from the cache
    checks_failed: list[dict[str, Any]] = field(default_factory=list)  # {asset, partition, check, severity, message}
    runs: list[str] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None

    @property
    def warnings(self) -> list[dict[str, Any]]:
        """The failed checks of severity WARN (the version is built and searchable)."""
        return [c for c in self.checks_failed if c.get("severity") != "ERROR"]

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "warnings": len(self.warnings)}

    def skipped_groups(self) -> list[str]:
        """The skipped files counted by reason, then extension: ``2 .json, 1 .xml: not a
        supported format (...)``, the most frequent reason first (those past the listed ones
        as one more line)."""
        return group_skipped(self.skipped_entries, self.skipped_count)


def group_skipped(entries: Sequence[dict[str, str]], count: int) -> list[str]:
    """``skipped_groups`` of these ``{path, reason}`` entries (``count`` skipped in all)."""
    from collections import Counter
    from pathlib import PurePosixPath

    by_reason: dict[str, Counter[str]] = {}
    for e in entries:
        ext = PurePosixPath(e["path"]).suffix.lower() or "(no extension)"
        by_reason.setdefault(e["reason"], Counter())[ext] += 1
    lines = []
    for reason, exts in sorted(by_reason.items(), key=lambda kv: -sum(kv[1].values())):
        lines.append(", ".join(f"{k} {ext}" for ext, k in exts.most_common()) + f": {reason}")
    if count > len(entries):
        lines.append(f"{count - len(entries)} more, not listed")
    return lines


def empty_message(path: Any, skipped: Sequence[str], count: int) -> str:
    """What a KB with no document is reported with: where it was looked for, what was skipped."""
    if not count:
        return f"no documents found in {path}: put Markdown, text, HTML, DOCX or PDF files there"
    return f"no documents found in {path}; {count} file{'' if count == 1 else 's'} skipped: " + "; ".join(skipped)


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


def plan(layout: Layout, names: Sequence[str]) -> tuple[list[tuple[KnowledgeBase, str]], list[KBIndexSummary]]:
    """Each KB's configuration validated, then registered: the (KB, strategy version) pairs
    to index, and a summary of status ``invalid`` for each KB whose configuration is refused
    (nothing of it written)."""
    if not names:
        raise ConfigError(f"no knowledge bases under {layout.kbs}: make a folder there with your documents in it.")
    valid: list[KnowledgeBase] = []
    refused: list[KBIndexSummary] = []
    for name in names:
        try:
            valid.append(resolve_kb(layout.kb_dir(name)))
        except ConfigError as exc:
            if len(names) == 1:
                raise
            refused.append(
                KBIndexSummary(name, "", status="invalid", reason="invalid configuration", error=str(exc),
                               active_version=_active(layout, name))
            )  # fmt: skip
    return [(kb, register_version(layout, kb)) for kb in valid], refused


def _active(layout: Layout, name: str) -> str | None:
    try:
        return active_version(layout, name)
    except (ConfigError, ValueError):
        return None


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
    """Bring the KBs ``names`` up to date (``corpus index``): one summary per KB, in the
    order asked (an invalid one's of status ``invalid``, the others indexed)."""
    planned, refused = plan(layout, names)
    done: list[Any] = []
    if planned:
        run = indexer if indexer is not None else current_indexer()
        done = run(layout, planned, force=force, wait=wait, reporter=reporter, workers=workers)
    paths = {kb.name: kb.path for kb, _v in planned}
    for s in done:  # built, but there is nothing to search: said so, not "ok"
        if not isinstance(s, KBIndexSummary):  # (another engine's summaries are its own)
            continue
        if s.status == "ok" and s.documents == 0 and not s.failed_documents and s.kb in paths:
            s.status, s.reason = "empty", "no documents"
            s.error = empty_message(paths[s.kb], group_skipped(s.skipped_entries, s.skipped_count), s.skipped_count)
    by_kb = {s.kb: s for s in [*done, *refused]}
    return [by_kb[n] for n in names if n in by_kb]
