"""Great Expectations as the engine of the quality suites: one ephemeral context per
process, a pandas data source, one suite validated per partition frame.

``validate(frame, expectations)`` runs a list of tagged GX expectations over a pandas
frame (which carries a ``_row`` column, its position) and returns, per expectation,
whether it held, how many rows broke it, what it observed and the positions of a few
offending rows. GX is imported on first use: importing it costs ~4 s, validating one
suite over one partition ~0.1-0.6 s (measured in ``tests/quality``).
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


@functools.lru_cache(maxsize=1)
def _batch_definition() -> Any:
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx
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
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations.expectations as gxe

    return gxe


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
    import great_expectations as gx

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
