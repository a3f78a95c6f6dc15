"""Running the checks of one asset over one partition: findings -> ``CheckOutcome``.

    run_checks("child_chunks", thresholds, "kb|v", children=..., parents=..., texts=...)

Every outcome has the counts, the threshold, what was observed, a few offending rows
(worst first where a check has a figure) and a message that names the partition, the worst
offender (its document, its chunk, the figure and the limit) and what to change:

    child_token_limit on ops|p2-c2-1f0c9a7e: 3 of 120 chunks fail the rule (no chunk over the
    embedding model's token limit ...): token_count <= 254 broken by 3 chunks. Worst: runbooks/cpu.md chunk 5e1f... (#7): token_count 331, limit 254. The embedding model ...

A check that raises is a failed check (of its severity) saying so, never a silent pass.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from corpus_pipeline.quality.checks import CheckDef, checks_for, severity_of
from corpus_pipeline.quality.finding import Finding
from corpus_pipeline.quality.outcome import MAX_EXAMPLES, CheckOutcome
from corpus_pipeline.quality.partition import Partition
from corpus_pipeline.quality.thresholds import Thresholds
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


def _broken(found: Finding, noun: str) -> str:
    """Each broken rule with its count, in words: ``token_count <= 254 broken by 3 chunks``;
    a rule a share of its rows may break says of how many rows, the share and the limit
    (``3 of the 20 chunks it applies to (15.0%), more than the 10% allowed``)."""
    parts = []
    for rule, n in found.broken.items():
        if not isinstance(n, int):
            parts.append(f"{rule}: {n}")
        elif found.share is not None and found.applies.get(rule):
            of = found.applies[rule]
            parts.append(
                f"{rule} broken by {n} of the {of} {noun} it applies to ({n / of:.1%}), "
                f"more than the {found.share:.0%} allowed"
            )
        else:
            parts.append(f"{rule} broken by {n} {noun if n != 1 else _singular(noun)}")
    return "; ".join(parts)


def _singular(noun: str) -> str:
    return noun[:-1] if noun.endswith("s") else noun


def outcome(c: CheckDef, found: Finding, p: Partition, th: Thresholds, checked: int) -> CheckOutcome:
    severity = severity_of(th, c.name)
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
        message = (
            f"{c.name}{where}: {failed} of {checked} {c.noun} fail the rule ({c.summary}): "
            f"{_broken(found, c.noun)}.{_worst(c, found, th)} {c.fix_for(th)}"
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
    ``embeddings``/``children`` for chunk_embeddings (``CheckRun`` of one group)."""
    run = CheckRun(asset, thresholds, partition)
    run.add(**tables)
    return run.outcomes()


@dataclass
class _Sum:
    """One row check's findings over the groups so far: failing rows counted by the rules
    they broke, the worst (or first) ``MAX_EXAMPLES`` of each such set of rules kept."""

    patterns: Counter[tuple[str, ...]] = field(default_factory=Counter)
    examples: dict[tuple[str, ...], pd.DataFrame] = field(default_factory=dict)
    other: dict[str, Any] = field(default_factory=dict)  # broken entries without rows
    observed: dict[str, Any] = field(default_factory=dict)
    applies: Counter[str] = field(default_factory=Counter)
    share: float | None = None
    detail: str = ""
    rules: list[str] = field(default_factory=list)
    checked: int = 0
    columns: Any = None  # the failing frame's empty form (the columns examples show)

    def add(self, c: CheckDef, found: Finding, offset: int) -> None:
        self.share = found.share
        self.applies.update(found.applies)
        self.detail = found.detail or self.detail
        for k, v in found.observed.items():
            prev = self.observed.get(k)
            both = isinstance(v, (int, float)) and isinstance(prev, (int, float))
            self.observed[k] = prev + v if both else v
        masks, failing = found.masks, found.failing
        if masks is None or failing is None:
            self.other.update(found.broken)
            return
        if self.columns is None:
            self.columns = failing.iloc[0:0]
        self.rules += [r for r in masks.columns if r not in self.rules]
        self.other.update({k: v for k, v in found.broken.items() if k not in masks.columns})
        if not len(failing):
            return
        names = np.array(list(masks.columns))
        flags = masks.to_numpy(dtype=bool)
        uniq, inverse, counts = np.unique(flags, axis=0, return_inverse=True, return_counts=True)
        failing = failing.assign(**{_SEQ: np.arange(len(failing)) + offset})
        for i, (row, n) in enumerate(zip(uniq, counts, strict=True)):
            key = tuple(names[row])
            self.patterns[key] += int(n)
            rows = failing[np.asarray(inverse).reshape(-1) == i]
            prev = self.examples.get(key)
            self.examples[key] = _worst_first(c, rows if prev is None else pd.concat([prev, rows])).head(MAX_EXAMPLES)

    def finding(self, c: CheckDef) -> Finding:
        total = Counter({r: sum(n for k, n in self.patterns.items() if r in k) for r in self.rules})
        kept = [r for r in self.rules if total[r] and (self.share is None or total[r] > self.share * self.applies[r])]
        if self.columns is None:  # (no group had rows for this check, or a table rule)
            return Finding(None, dict(self.other), self.observed, self.detail)
        keys = [k for k in self.patterns if set(k) & set(kept)]
        parts = [self.examples[k] for k in keys]
        failing = _worst_first(c, pd.concat(parts)) if parts else self.columns
        broken = {r: int(total[r]) for r in kept} | self.other
        count = sum(self.patterns[k] for k in keys)
        return Finding(
            failing.drop(columns=[_SEQ], errors="ignore"), broken, self.observed, self.detail, count=count,
            applies={r: int(self.applies[r]) for r in kept if r in self.applies}, share=self.share,
        )  # fmt: skip


_SEQ = "__seq"


def _worst_first(c: CheckDef, rows: pd.DataFrame) -> pd.DataFrame:
    """Rows worst first by the check's figure, else in table order (``_SEQ``)."""
    keys = ([c.figure] if c.figure and c.figure in rows.columns else []) + ([_SEQ] if _SEQ in rows.columns else [])
    if not keys:
        return rows
    return rows.sort_values(
        keys, ascending=[False] * (len(keys) - 1) + [True] if _SEQ in keys else [False], kind="stable"
    )


class CheckRun:
    """The checks of one asset over one partition given as groups of whole documents
    (``add`` each group's tables: its documents' rows), so no check holds the partition's
    rows as frames at once. Row checks are added up group by group (ids checked unique
    across groups too); a check of the whole table's distribution (``scope="partition"``)
    runs at the end over the columns it ``reads``, collected from every group. One group is
    the partition checked whole (``run_checks``): the same outcomes either way."""

    def __init__(self, asset: str, thresholds: Thresholds, partition: str = "") -> None:
        self.asset, self.th, self.key = asset, thresholds, partition
        self.checks = checks_for(asset)
        self._sums = {c.name: _Sum() for c in self.checks}
        self._crashed: dict[str, CheckOutcome] = {}
        self._seen: dict[str, set[str]] = {c.unique_across: set() for c in self.checks if c.unique_across}
        self._columns: dict[str, list[pd.DataFrame]] = {c.name: [] for c in self.checks if c.scope == "partition"}
        self._rows = 0

    def add(self, **tables: Any) -> None:
        p = Partition(self.key, self.th, seen=self._seen, **tables)
        for c in self.checks:
            if c.name in self._crashed:
                continue
            try:
                if c.scope == "partition":
                    frame = _frame_of(c, p)
                    self._columns[c.name].append(frame[[col for col in c.reads if col in frame.columns]])
                    continue
                found = c.validate(p, self.th)
                self._sums[c.name].add(c, found, self._rows)
                self._sums[c.name].checked += _checked(c, p)
            except Exception as exc:  # noqa: BLE001 - a check that cannot run fails, loudly
                self._crashed[c.name] = crashed(c, exc, self.th, self.key)
        for c in self.checks:
            col = c.unique_across
            if col and col in _frame_of(c, p).columns:
                self._seen[col].update(str(v) for v in _frame_of(c, p)[col].dropna())
        self._rows += len(_frame_of(self.checks[0], p)) if self.checks else 0

    def outcomes(self) -> list[CheckOutcome]:
        out = []
        whole = Partition(self.key, self.th)
        for c in self.checks:
            if c.name in self._crashed:
                out.append(self._crashed[c.name])
                continue
            try:
                if c.scope == "partition":
                    parts = self._columns[c.name]
                    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(c.reads))
                    view = _Columns(self.key, frame)
                    out.append(outcome(c, c.validate(view, self.th), whole, self.th, len(frame)))  # type: ignore[arg-type]
                else:
                    s = self._sums[c.name]
                    out.append(outcome(c, s.finding(c), whole, self.th, s.checked))
            except Exception as exc:  # noqa: BLE001
                out.append(crashed(c, exc, self.th, self.key))
        return out


class _Columns:
    """What a check of the whole table's distribution reads: the collected columns."""

    def __init__(self, key: str, frame: pd.DataFrame) -> None:
        self.key, self.parents, self.children = key, frame, frame


def _frame_of(c: CheckDef, p: Partition) -> pd.DataFrame:
    return p.parents if c.asset == "parent_blocks" else p.children if c.asset == "child_chunks" else p.embeddings


def crashed(c: CheckDef, exc: BaseException, thresholds: Thresholds, partition: str = "") -> CheckOutcome:
    where = f" on {partition}" if partition else ""
    error = mask_error(f"{type(exc).__name__}: {exc}")  # stored in the manifest: no key, bounded
    return CheckOutcome(
        c.name, c.asset, False, severity_of(thresholds, c.name), 0, 1,
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
