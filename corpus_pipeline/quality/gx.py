"""great-expectations where it serves: the distribution checks (quantiles of chunk sizes).

``quantile_finding(frame, ranges)`` validates ``ExpectColumnQuantileValuesToBeBetween`` per
column over a partition's frame and says which quantile is out of range and by how much.
``validate(frame, expectations)`` is the general runner: one ephemeral context per process,
a pandas data source, one suite per frame; per expectation, whether it held, how many rows
broke it, what it observed and a few offending rows. GX is imported on first use (only the
Dagster assets run checks; ``corpus preview``, ``strategies`` and ``search`` never import
it): see ``benchmarks/quality`` for what it costs at import and per run.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

ROW = "_row"
_LOCK = threading.Lock()


@dataclass(frozen=True)
class Expectation:
    """One GX expectation, tagged with the check it belongs to and a short description
    of the rule for messages (``"char_count <= _max_chars"``)."""

    check: str
    rule: str
    gx: Any  # a great_expectations.expectations.Expectation


@dataclass
class ExpectationResult:
    check: str
    rule: str
    success: bool
    element_count: int = 0
    unexpected_count: int = 0
    observed: Any = None
    rows: list[int] = field(default_factory=list)  # positions (``_row``) of up to 20 offending rows
    error: str | None = None  # the exception GX raised while computing it, if any


@functools.cache
def load() -> Any:
    """great_expectations, imported once, quietly: its own import uses the deprecated
    ``sre_constants`` / ``sre_parse`` modules (a DeprecationWarning that is GX's to fix)."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r"module 'sre_(constants|parse)' is deprecated", category=DeprecationWarning
        )
        import great_expectations
        import great_expectations.expectations  # (loaded with the same filter)
    return great_expectations


@functools.lru_cache(maxsize=1)
def _batch_definition() -> Any:
    gx = load()
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    config = DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(init_temp_docs_sites=False),
        analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False, metric_calculations=False),
    )
    context = gx.get_context(mode="ephemeral", project_config=config)
    asset = context.data_sources.add_pandas("corpus_quality").add_dataframe_asset("partition")
    return asset.add_batch_definition_whole_dataframe("whole_partition")


def expectations_module() -> Any:
    """``great_expectations.expectations`` (imported lazily: it is slow to import)."""
    return load().expectations


def _plain(value: Any) -> Any:
    """numpy scalars and containers -> plain Python (for JSON and Dagster metadata)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            return value.item()
        except (ValueError, AttributeError):
            return value
    return value


def validate(
    frame: pd.DataFrame, expectations: Sequence[Expectation], *, suite_name: str = "suite"
) -> list[ExpectationResult]:
    """Validate ``expectations`` over ``frame`` with GX; one result per expectation, in
    the given order."""
    if not expectations:
        return []
    gx = load()

    if ROW not in frame.columns:
        frame = frame.assign(**{ROW: range(len(frame))})
    # Only the columns the suite reads: GX's cost per offending row grows with the width
    # of the frame (it normalizes every column name for every unexpected index).
    used = {ROW}
    for e in expectations:
        for key in ("column", "column_A", "column_B"):
            if getattr(e.gx, key, None):
                used.add(getattr(e.gx, key))
        used.update(getattr(e.gx, "column_list", None) or [])
    frame = frame[[c for c in frame.columns if c in used]]
    tagged = []
    for i, e in enumerate(expectations):
        # GX may return results in another order than given: the meta tag maps them back.
        tagged.append(e.gx.copy(update={"meta": {"check": e.check, "i": i}}))
    suite = gx.ExpectationSuite(name=suite_name, expectations=tagged)
    with _LOCK:
        batch = _batch_definition().get_batch(batch_parameters={"dataframe": frame})
        result = batch.validate(
            suite,
            result_format={
                # SUMMARY: counts are exact, offending rows are capped at 20 per rule
                # (COMPLETE lists every value and costs seconds on large bad partitions).
                "result_format": "SUMMARY",
                "partial_unexpected_count": 20,
                "unexpected_index_column_names": [ROW],
            },
        )
    by_index: dict[int, ExpectationResult] = {}
    for r in result.results:
        i = int(r.expectation_config.meta["i"])
        e = expectations[i]
        info = r.exception_info or {}
        error = None
        if info.get("raised_exception"):
            error = info.get("exception_message")
        else:  # several metrics: {metric_id: {...}}
            for v in info.values() if isinstance(info, dict) else ():
                if isinstance(v, dict) and v.get("raised_exception"):
                    error = v.get("exception_message")
                    break
        res = r.result or {}
        rows = [int(d[ROW]) for d in res.get("partial_unexpected_index_list") or [] if isinstance(d, dict) and ROW in d]
        by_index[i] = ExpectationResult(
            check=e.check,
            rule=e.rule,
            success=bool(r.success) and error is None,
            element_count=int(res.get("element_count") or 0),
            unexpected_count=int(res.get("unexpected_count") or 0),
            observed=_plain(res.get("observed_value")),
            rows=rows,
            error=error,
        )
    return [by_index[i] for i in range(len(expectations))]


# --------------------------------------------------------------------------- quantile checks

QUANTILES = {"p5": 0.05, "p50": 0.5, "p95": 0.95}


def observed_quantiles(df: pd.DataFrame) -> dict[str, dict[str, int]]:
    """p5/p50/p95 of char_count and token_count, as the value at ``floor(q * (n - 1))``
    (pandas' ``interpolation="lower"``, which ``quality.stats`` reproduces in DuckDB)."""
    out: dict[str, dict[str, int]] = {}
    for col in ("char_count", "token_count"):
        if col in df.columns and len(df):
            qs = df[col].quantile(list(QUANTILES.values()), interpolation="lower").tolist()
            out[col] = {q: int(v) for q, v in zip(QUANTILES, qs, strict=True)}
    return out


def quantile_finding(df: pd.DataFrame, ranges: dict[str, dict[str, tuple[float | None, float | None]]]) -> Any:
    """The quantile check of a chunk table: GX's ``ExpectColumnQuantileValuesToBeBetween``
    per column with configured ranges; the finding says which quantile is out and by how much."""
    from corpus_pipeline.quality.finding import Finding

    if not len(df):
        return Finding(None, {}, {}, "no rows in this partition; nothing to measure")
    observed = observed_quantiles(df)
    exps = []
    for col, rng in ranges.items():
        qs = [q for q in QUANTILES if q in rng]
        if not qs:
            continue
        gx = expectations_module().ExpectColumnQuantileValuesToBeBetween(
            column=col,
            quantile_ranges={"quantiles": [QUANTILES[q] for q in qs], "value_ranges": [list(rng[q]) for q in qs]},
            allow_relative_error="lower",
        )
        exps.append(Expectation("quantiles", f"{col} quantiles", gx))
    if not exps:
        return Finding(None, {}, observed, "no quantile ranges configured or derivable")
    results = validate(df, exps, suite_name="quantiles")
    broken: dict[str, Any] = {}
    out_of_range = []
    for r in results:
        if r.error:
            raise RuntimeError(f"great-expectations could not compute {r.rule}: {r.error}")
        if r.success:
            continue
        col = r.rule.split()[0]
        for q, (lo, hi) in ranges[col].items():
            v = observed.get(col, {}).get(q)
            if v is None:
                continue
            if lo is not None and v < lo:
                out_of_range.append(f"{col} {q} = {v} < {lo:g}")
            elif hi is not None and v > hi:
                out_of_range.append(f"{col} {q} = {v} > {hi:g}")
        broken[r.rule] = f"observed {r.observed}"
    for item in out_of_range:
        broken.setdefault(item, 1)
    return Finding(
        None, {k: v for k, v in broken.items() if k in out_of_range} or broken, observed, ", ".join(out_of_range)
    )
