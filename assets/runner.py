"""Materializing KBs from code (``corpus index``, tests): register the partitions on the
instance, then run the per-KB job and the per-version job, so every run is recorded on the
instance and shows in the UI like any other."""

import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from dagster import DagsterEventType, DagsterInstance, Definitions

from assets.definitions import build_definitions
from assets.partitions import kb_version_key
from corpus_pipeline.kbconfig import KnowledgeBase
from corpus_pipeline.paths import Layout
from corpus_pipeline.versioning import set_active

_QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}


@dataclass
class KBIndexSummary:
    kb: str
    strategy_version: str
    status: str = "ok"
    documents: int = 0
    failed_documents: list[dict[str, str]] = field(default_factory=list)
    parent_blocks: int = 0
    child_chunks: int = 0
    embedded: int = 0
    reused: int = 0
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


def index_kb(
    defs: Definitions,
    instance: DagsterInstance,
    layout: Layout,
    kb: KnowledgeBase,
    version: str,
    say: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
) -> KBIndexSummary:
    """Parse one KB, then chunk, embed and index it at ``version``; activate on success."""
    t0 = time.monotonic()
    summary = KBIndexSummary(kb.name, version)
    register_partitions(instance, kb.name, version)
    say(f"▶ {kb.name}: parse (partition {kb.name})")
    r1 = defs.resolve_job_def("parse_kb").execute_in_process(
        partition_key=kb.name, instance=instance, raise_on_error=False, run_config=_QUIET
    )
    summary.runs.append(r1.run_id)
    _progress(r1, kb.name, say)
    docs = _meta(r1, "documents")
    parsed = _meta(r1, "parsed_blocks")
    summary.documents = int(docs.get("documents", 0))
    summary.failed_documents = list(parsed.get("failed_documents", []) or [])
    if r1.success:
        key = kb_version_key(kb.name, version)
        say(f"▶ {kb.name}: chunk, embed, index (partition {kb.name}|{version})")
        r2 = defs.resolve_job_def("index_version").execute_in_process(
            partition_key=key, instance=instance, raise_on_error=False, run_config=_QUIET
        )
        summary.runs.append(r2.run_id)
        _progress(r2, f"{kb.name}|{version}", say)
        summary.parent_blocks = int(_meta(r2, "parent_blocks").get("parent_blocks", 0))
        summary.child_chunks = int(_meta(r2, "child_chunks").get("child_chunks", 0))
        emb = _meta(r2, "chunk_embeddings")
        summary.embedded = int(emb.get("embedded", 0))
        summary.reused = int(emb.get("reused", 0))
        if r2.success:
            set_active(layout.versions, kb.name, version)
        else:
            summary.status, summary.error = "failed", _first_error(r2)
    else:
        summary.status, summary.error = "failed", _first_error(r1)
    summary.seconds = round(time.monotonic() - t0, 2)
    return summary


def _first_error(result) -> str:
    for ev in result.all_events:
        if ev.event_type == DagsterEventType.STEP_FAILURE and ev.event_specific_data.error:
            return f"{ev.step_key}: {ev.event_specific_data.error.message.strip()}"
    return "run failed"


def index_kbs(layout: Layout, kbs: list[tuple[KnowledgeBase, str]], say: Callable[[str], None] | None = None) -> list[KBIndexSummary]:
    instance = DagsterInstance.get()
    defs = build_definitions(str(layout.home))
    kwargs = {"say": say} if say else {}
    return [index_kb(defs, instance, layout, kb, version, **kwargs) for kb, version in kbs]
