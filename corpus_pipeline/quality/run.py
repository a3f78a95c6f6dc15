"""Running the checks of one asset over one partition: findings -> ``CheckOutcome``.

    run_checks("child_chunks", thresholds, "kb|v", children=..., parents=..., texts=...)

Every outcome has the counts, the threshold, what was observed, a few offending rows
(worst first where a check has a figure) and a message that names the partition, the worst
offender (its document, its chunk, the figure and the limit) and what to change:

    child_token_limit on ops|p2-c2-1f0c9a7e: 3 of 120 chunks fail (token_count <= 254: 3).
    Worst: runbooks/cpu.md chunk 5e1f... (#7): token_count 331, limit 254. The embedding model ...

A check that raises is a failed check (of its severity) saying so, never a silent pass.
"""

from __future__ import annotations

import math
from typing import Any

from corpus_pipeline.quality.bounds import Thresholds
from corpus_pipeline.quality.checks import CheckDef, Finding, checks_for
from corpus_pipeline.quality.outcome import MAX_EXAMPLES, CheckOutcome
from corpus_pipeline.quality.partition import Partition
from corpus_pipeline.secrets import mask_error

_PREVIEW = 80


def _plain(v: Any) -> Any:
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        try:
            v = v.item()
        except (ValueError, AttributeError):
            return v
    if isinstance(v, float):
        if math.isnan(v):
            return None
        if v.is_integer():
            return int(v)
    if isinstance(v, str) and len(v) > _PREVIEW:
        return v[:_PREVIEW] + "…"
    return v


def _examples(c: CheckDef, found: Finding) -> list[dict[str, Any]]:
    rows = found.failing
    if rows is None or not len(rows):
        return []
    if c.figure and c.figure in rows.columns:
        rows = rows.sort_values(c.figure, ascending=False, kind="stable")
    cols = [col for col in (*c.ids, *c.columns) if col in rows.columns]
    return [{col.lstrip("_"): _plain(r[col]) for col in cols} for _, r in rows.head(MAX_EXAMPLES).iterrows()]


def _worst(c: CheckDef, found: Finding, th: Thresholds) -> str:
    """``Worst: <document> chunk <id> (#n): <figure> <value>, limit <limit>.``"""
    rows = found.failing
    if rows is None or not len(rows):
        return ""
    if c.figure and c.figure in rows.columns:
        rows = rows.sort_values(c.figure, ascending=False, kind="stable")
    r = rows.iloc[0]
    where = []
    doc = r.get("doc_path") if "doc_path" in rows.columns else r.get("path")
    if doc is not None and not (isinstance(doc, float) and math.isnan(doc)):
        where.append(str(doc))
    for idc, label in (("chunk_id", "chunk"), ("parent_id", "parent"), ("doc_id", "document")):
        if idc in rows.columns and r.get(idc) is not None:
            index = r.get("chunk_index") if idc == "chunk_id" else r.get("parent_index") if idc == "parent_id" else None
            where.append(f"{label} {r[idc]}" + (f" (#{_plain(index)})" if index is not None else ""))
            break
    figure = ""
    if c.figure and c.figure in rows.columns:
        figure = f": {c.figure.lstrip('_')} {_plain(r[c.figure])}"
        limit = c.limit(th) if callable(c.limit) else (r.get(c.limit) if c.limit in rows.columns else c.limit)
        if limit is not None:
            figure += f", limit {_plain(limit)}"
    return f" Worst: {' '.join(where)}{figure}." if where or figure else ""


def outcome(c: CheckDef, found: Finding, p: Partition, th: Thresholds, checked: int) -> CheckOutcome:
    severity = th.severity_of(c.name)
    failed = found.failed
    passed = failed == 0
    observed = dict(found.observed)
    if found.broken:
        observed["broken_rules"] = dict(found.broken)
    where = f" on {p.key}" if p.key else ""
    if passed:
        tail = f" ({found.detail})" if found.detail else ""
        message = f"{c.name}{where}: ok over {checked} {c.noun} ({c.summary}).{tail}"
    elif found.failing is None:  # a rule of the whole table (quantiles)
        message = f"{c.name}{where}: {found.detail or ', '.join(found.broken)}. {c.fix_for(th)}"
    else:
        rules = "; ".join(f"{rule}: {n}" for rule, n in found.broken.items())
        message = (
            f"{c.name}{where}: {failed} of {checked} {c.noun} fail ({rules}).{_worst(c, found, th)} {c.fix_for(th)}"
        )
    return CheckOutcome(
        name=c.name,
        asset=c.asset,
        passed=passed,
        severity=severity,
        checked=checked,
        failed=failed,
        message=message.strip(),
        threshold=c.threshold(th),
        observed=observed,
        examples=_examples(c, found),
        engine=c.engine,
        partition=p.key,
    )


def _checked(c: CheckDef, p: Partition) -> int:
    if c.name.startswith("documents_have"):
        return len(p.documents)
    if c.asset == "parent_blocks":
        return len(p.parents)
    if c.asset == "child_chunks":
        return len(p.children)
    return len(p.embeddings)


def run_checks(asset: str, thresholds: Thresholds, partition: str = "", **tables: Any) -> list[CheckOutcome]:
    """Every check of ``asset`` over one partition's tables: ``parents``/``texts`` for
    parent_blocks; ``children``/``parents``/``texts`` for child_chunks;
    ``embeddings``/``children`` for chunk_embeddings."""
    p = Partition(partition, thresholds, **tables)
    out = []
    for c in checks_for(asset):
        try:
            found = c.validate(p, thresholds)
            out.append(outcome(c, found, p, thresholds, _checked(c, p)))
        except Exception as exc:  # noqa: BLE001 - a check that cannot run fails, loudly
            out.append(crashed(c, exc, thresholds, partition))
    return out


def crashed(c: CheckDef, exc: BaseException, thresholds: Thresholds, partition: str = "") -> CheckOutcome:
    where = f" on {partition}" if partition else ""
    error = mask_error(f"{type(exc).__name__}: {exc}")  # stored in the manifest: no key, bounded
    return CheckOutcome(
        c.name, c.asset, False, thresholds.severity_of(c.name), 0, 1,
        f"{c.name}{where}: the check could not run: {error}",
        observed={"error": error}, engine=c.engine, partition=partition,
    )  # fmt: skip


# The suites of the three assets, by their tables (what tests and the Dagster layer call).


def check_parent_blocks(parents: Any, texts: Any, thresholds: Thresholds, partition: str = "") -> list[CheckOutcome]:
    return run_checks("parent_blocks", thresholds, partition, parents=parents, texts=texts)


def check_child_chunks(
    children: Any, parents: Any, texts: Any, thresholds: Thresholds, partition: str = ""
) -> list[CheckOutcome]:
    return run_checks("child_chunks", thresholds, partition, children=children, parents=parents, texts=texts)


def check_chunk_embeddings(
    embeddings: Any, children: Any, thresholds: Thresholds, partition: str = ""
) -> list[CheckOutcome]:
    return run_checks("chunk_embeddings", thresholds, partition, embeddings=embeddings, children=children)
