"""Materializing KBs from code (``corpus index``, ``corpus backfill``, tests).

Registers the partitions on the instance, then runs only what is stale (see
``corpus_pipeline.freshness``): the per-KB parse job when documents or parsing settings
changed, the per-version job when the version was never built or was built from an older
parse. Every run is recorded on the instance and shows in the UI like any other.
"""

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dagster import DagsterEventType, DagsterInstance, Definitions

from assets.definitions import build_definitions
from assets.partitions import kb_version_key
from corpus_pipeline import freshness, indexing
from corpus_pipeline.errors import StoreError
from corpus_pipeline.kbconfig import KnowledgeBase
from corpus_pipeline.paths import Layout
from corpus_pipeline.store.parquet import read_manifest, read_partition
from corpus_pipeline.versioning import active_version

# Progress and failures are printed by corpus itself (below); Dagster's console logger
# would repeat every failure with a stack trace.
_QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


@dataclass
class KBIndexSummary:
    kb: str
    strategy_version: str
    status: str = "ok"  # ok | failed
    up_to_date: bool = False  # nothing had changed: no run was needed
    reason: str = ""
    active_version: str | None = None
    partitions_run: list[str] = field(default_factory=list)
    documents: int = 0
    documents_parsed: int = 0
    documents_reused: int = 0
    failed_documents: list[dict[str, str]] = field(default_factory=list)
    documents_chunked: int = 0
    parent_blocks: int = 0
    child_chunks: int = 0
    embedded: int = 0
    reused: int = 0  # chunks whose vectors came from the cache
    runs: list[str] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def register_partitions(instance: DagsterInstance, kb: str, version: str) -> None:
    if not instance.has_dynamic_partition("kb", kb):
        instance.add_dynamic_partitions("kb", [kb])
    if not instance.has_dynamic_partition("strategy_version", version):
        instance.add_dynamic_partitions("strategy_version", [version])


def _meta(result, asset: str) -> dict[str, Any]:
    for ev in result.get_asset_materialization_events():
        mat = ev.event_specific_data.materialization
        if mat.asset_key.path[-1] == asset:
            return {k: getattr(v, "value", v) for k, v in mat.metadata.items()}
    return {}


def _progress(result, partition: str, say: Callable[[str], None]) -> None:
    for ev in result.all_events:
        if ev.event_type == DagsterEventType.STEP_SUCCESS:
            secs = ev.event_specific_data.duration_ms / 1000
            say(f"  ✓ {ev.step_key:<20} {partition}  {secs:6.2f}s")
        elif ev.event_type == DagsterEventType.STEP_FAILURE:
            err = ev.event_specific_data.error
            say(f"  ✗ {ev.step_key:<20} {partition}  {err.message.strip() if err else ''}")
        elif ev.event_type == DagsterEventType.ASSET_CHECK_EVALUATION:
            data = ev.event_specific_data
            if not data.passed:
                say(f"  ✗ check {data.check_name} on {data.asset_key.to_user_string()} failed ({data.severity.value})")


def _fill_from_outputs(summary: KBIndexSummary, layout: Layout, kb: str, version: str) -> None:
    """Counts of what is already built, for a KB that needed no run."""
    try:
        texts = read_partition(layout.partition_dir("parsed_blocks", kb), "texts")
        summary.documents = texts.num_rows
        summary.documents_reused = texts.num_rows
        summary.failed_documents = [
            {"path": r["path"], "error": r["error"] or ""} for r in texts.to_pylist() if r["status"] != "OK"
        ]
    except StoreError:
        pass
    rows = lambda asset: int((read_manifest(layout.partition_dir(asset, kb, version)).get("rows") or {}).get("data", 0))  # noqa: E731
    summary.parent_blocks = rows("parent_blocks")
    summary.child_chunks = rows("child_chunks")
    summary.reused = summary.child_chunks


def index_kb(
    defs: Definitions,
    instance: DagsterInstance,
    layout: Layout,
    kb: KnowledgeBase,
    version: str,
    say: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
    *,
    force: bool = False,
) -> KBIndexSummary:
    """Bring one KB's ``version`` up to date: parse if stale, then chunk, embed, index."""
    t0 = time.monotonic()
    summary = KBIndexSummary(kb.name, version)
    register_partitions(instance, kb.name, version)
    fresh = freshness.check(layout, kb, version, indexing.discover_documents(kb))
    summary.reason = "forced" if force else fresh.reason
    parse_ok = True
    if force or fresh.parse_needed:
        say(f"▶ {kb.name}: parse (partition {kb.name}) — {summary.reason}")
        r1 = defs.resolve_job_def("parse_kb").execute_in_process(
            partition_key=kb.name, instance=instance, raise_on_error=False, run_config=_QUIET
        )
        summary.runs.append(r1.run_id)
        summary.partitions_run.append(kb.name)
        _progress(r1, kb.name, say)
        summary.documents = int(_meta(r1, "documents").get("documents", 0))
        parsed = _meta(r1, "parsed_blocks")
        summary.documents_parsed = int(parsed.get("parsed", 0))
        summary.documents_reused = int(parsed.get("reused", 0))
        summary.failed_documents = list(parsed.get("failed_documents", []) or [])
        parse_ok = r1.success
        if not r1.success:
            summary.status, summary.error = "failed", _first_error(r1)
    if parse_ok and (force or fresh.index_needed):
        key = kb_version_key(kb.name, version)
        say(f"▶ {kb.name}: chunk, embed, index (partition {kb.name}|{version})")
        r2 = defs.resolve_job_def("index_version").execute_in_process(
            partition_key=key, instance=instance, raise_on_error=False, run_config=_QUIET
        )
        summary.runs.append(r2.run_id)
        summary.partitions_run.append(f"{kb.name}|{version}")
        _progress(r2, f"{kb.name}|{version}", say)
        if not summary.partitions_run[:-1]:  # parse was fresh: report what it holds
            _fill_from_outputs(summary, layout, kb.name, version)
        child = _meta(r2, "child_chunks")
        summary.parent_blocks = int(_meta(r2, "parent_blocks").get("parent_blocks", 0))
        summary.child_chunks = int(child.get("child_chunks", 0))
        summary.documents_chunked = int(child.get("documents_chunked", 0))
        emb = _meta(r2, "chunk_embeddings")
        summary.embedded = int(emb.get("embedded", 0))
        summary.reused = int(emb.get("reused", 0))
        if not r2.success:
            summary.status, summary.error = "failed", _first_error(r2)
    if not summary.partitions_run:
        summary.up_to_date = True
        _fill_from_outputs(summary, layout, kb.name, version)
        say(f"▶ {kb.name}: up to date ({version}) — nothing changed")
    summary.active_version = active_version(layout.versions, kb.name)
    summary.seconds = round(time.monotonic() - t0, 2)
    return summary


def _first_error(result) -> str:
    for ev in result.all_events:
        if ev.event_type == DagsterEventType.STEP_FAILURE and ev.event_specific_data.error:
            return f"{ev.step_key}: {ev.event_specific_data.error.message.strip()}"
    for ev in result.all_events:
        if ev.event_type == DagsterEventType.ASSET_CHECK_EVALUATION and not ev.event_specific_data.passed:
            d = ev.event_specific_data
            return f"blocking check {d.check_name} on {d.asset_key.to_user_string()} failed"
    return "run failed"


def index_kbs(
    layout: Layout,
    kbs: list[tuple[KnowledgeBase, str]],
    say: Callable[[str], None] | None = None,
    *,
    force: bool = False,
) -> list[KBIndexSummary]:
    instance = DagsterInstance.get()
    defs = build_definitions(str(layout.home))
    kwargs = {"say": say} if say else {}
    return [index_kb(defs, instance, layout, kb, version, force=force, **kwargs) for kb, version in kbs]


def backfill_strategy(
    layout: Layout,
    kbs: list[KnowledgeBase],
    strategy: str,
    say: Callable[[str], None] | None = None,
) -> list[KBIndexSummary]:
    """After a strategy's code version changed: materialize the new version of exactly the
    KBs whose plans use it (their other partitions and other KBs are left alone)."""
    from corpus_pipeline.versioning import register_version, uses_strategy

    chosen = [(kb, register_version(layout.versions, kb)) for kb in kbs if uses_strategy(kb, strategy)]
    return index_kbs(layout, chosen, say)
