"""Asset checks of the chunk tables: Dagster's face of ``corpus_pipeline.quality``.

The checks run inside the asset that produces the table (``check_specs=`` on the asset,
results yielded after the output) because an ``@asset_check`` over a partitioned asset
would load every partition. Every spec is ``blocking=True``; whether a failure blocks is
the result's severity, which ``kb.yaml`` can set per check (``quality.severity``):
Dagster stops downstream assets only for a failed check with severity ERROR. A blocked
``child_chunks`` therefore skips ``chunk_embeddings`` and ``search_index`` in the same
run, the run fails, and ``assets.runner.index_kb`` does not activate the version.

    CHECK_SPECS[asset]                 the AssetCheckSpecs of one asset
    check_results(asset, outcomes)     CheckOutcome -> AssetCheckResult
    quality_outcomes(asset, kb, key, **tables)   thresholds + the asset's checks -> outcomes
    grouped_outcomes(asset, kb, key, groups)     the same over a partition streamed in groups
    distribution_metadata(table, ...)  p5/p50/p95, counts by chunk_type, histogram
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
from dagster import AssetCheckResult, AssetCheckSeverity, AssetCheckSpec, MetadataValue

from assets.partitions import kb_version_partitions
from corpus_pipeline.kbconfig import KnowledgeBase
from corpus_pipeline.quality.checks import ASSETS, checks_for
from corpus_pipeline.quality.outcome import CheckOutcome

CHECK_SPECS: dict[str, list[AssetCheckSpec]] = {
    asset: [
        AssetCheckSpec(
            name=c.name,
            asset=asset,
            description=c.description,
            blocking=True,
            # Partitioned checks (Dagster preview): each result is recorded for its
            # kb × strategy_version partition, so the UI shows it per partition and one
            # KB's pass does not replace another KB's failure as "the" latest result.
            partitions_def=kb_version_partitions,
        )
        for c in checks_for(asset)
    ]
    for asset in ASSETS
}


def _examples_md(examples: list[dict[str, Any]]) -> str:
    if not examples:
        return ""
    cols = list(dict.fromkeys(k for e in examples for k in e))

    def esc(v: Any) -> str:
        return str("" if v is None else v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(esc(e.get(c)) for c in cols) + " |" for e in examples]
    return "\n".join(lines)


def check_description(o: CheckOutcome) -> str:
    """``[<kb>|<version>] PASS|FAIL (<severity>): message``: the partition first, because
    the UI shows a check's latest result per asset, and one KB's success must not read as
    if it answered for another KB's failure."""
    verdict = "passed" if o.passed else f"FAILED ({o.severity})"
    return f"[{o.partition}] {verdict}: {o.message}" if o.message else f"[{o.partition}] {verdict}"


def check_results(asset_name: str, outcomes: list[CheckOutcome]) -> list[AssetCheckResult]:
    """One AssetCheckResult per outcome: severity ERROR (blocking) or WARN, and metadata
    with the counts, the threshold, what was observed and a few example rows."""
    results = []
    for o in outcomes:
        metadata: dict[str, Any] = {
            "checked": o.checked,
            "failed": o.failed,
            "blocking": o.blocking,
            "engine": o.engine,
            "partition": MetadataValue.text(str(o.partition)),
            "message": o.message,
            "threshold": MetadataValue.json(json.loads(json.dumps(o.threshold, default=str))),
        }
        if o.observed:
            metadata["observed"] = MetadataValue.json(json.loads(json.dumps(o.observed, default=str)))
        if o.examples:
            metadata["examples"] = MetadataValue.md(_examples_md(o.examples))
        results.append(
            AssetCheckResult(
                asset_key=asset_name,
                check_name=o.name,
                passed=o.passed,
                severity=AssetCheckSeverity.ERROR if o.severity == "ERROR" else AssetCheckSeverity.WARN,
                description=check_description(o),
                metadata=metadata,
            )
        )
    return results


def quality_outcomes(
    asset_name: str, kb: KnowledgeBase, partition: Any, *, by_docs: list[str] | None = None, **tables: Any
) -> list[CheckOutcome]:
    """Resolve the KB's thresholds and run the asset's checks over this partition's tables
    (``parents``/``texts`` for parent_blocks; ``children``/``parents``/``texts`` for
    child_chunks; ``embeddings``/``children`` for chunk_embeddings). With ``by_docs`` (the
    documents in the tables' order) they run a group of documents at a time
    (``quality.run.CheckRun``): no check turns the partition's rows into frames at once."""
    from corpus_pipeline.indexing.rows import by_document_groups

    groups = [tables] if by_docs is None else by_document_groups(tables, by_docs)
    return grouped_outcomes(asset_name, kb, partition, groups)


def grouped_outcomes(
    asset_name: str, kb: KnowledgeBase, partition: Any, groups: Iterable[dict[str, Any]]
) -> list[CheckOutcome]:
    """The asset's checks over a partition handed as ``groups`` (each a dict of the tables
    ``quality_outcomes`` takes, for a run of its rows: ``quality.run.CheckRun``). Every
    group is consumed, even when the thresholds cannot be resolved (a stream that writes as
    it goes is written whole either way)."""
    from corpus_pipeline.quality.bounds import resolve_thresholds
    from corpus_pipeline.quality.run import CheckRun, crashed
    from corpus_pipeline.quality.thresholds import Thresholds

    try:
        thresholds = resolve_thresholds(kb)
    except Exception as exc:  # noqa: BLE001 - every check fails, saying why
        for _ in groups:
            pass
        return [crashed(c, exc, Thresholds(token_limit=0), _key(partition)) for c in checks_for(asset_name)]
    run = CheckRun(asset_name, thresholds, _key(partition))
    for group in groups:
        run.add(**group)
    return run.outcomes()


def _key(partition: Any) -> str:
    dims = getattr(partition, "keys_by_dimension", None)
    return f"{dims['kb']}|{dims['strategy_version']}" if dims else str(partition)


def distribution_metadata(table: pa.Table, kb: KnowledgeBase | None = None) -> dict[str, Any]:
    """Per-partition distribution for the asset's materialization: count, counts by
    chunk_type, min/p5/p50/p95/max of char_count and token_count, and a histogram."""
    from corpus_pipeline.embedding.tokens import token_counter_for
    from corpus_pipeline.quality.stats import histogram_markdown, table_stats

    limit = token_counter_for(kb.config.embedding).max_tokens if kb is not None else None
    stats = table_stats(table, token_limit=limit)
    meta: dict[str, Any] = {"distribution": MetadataValue.json(stats)}
    for col in ("char_count", "token_count"):
        for q in ("p5", "p50", "p95"):
            v = (stats.get(col) or {}).get(q)
            if v is not None:
                meta[f"{col}_{q}"] = v
    if stats.get("by_chunk_type"):
        meta["by_chunk_type"] = MetadataValue.json(stats["by_chunk_type"])
    if stats.get("count"):
        meta["histogram"] = MetadataValue.md(histogram_markdown(table, "token_count", limit=limit))
    return meta
