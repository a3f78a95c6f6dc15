"""Distributions computed with DuckDB agree with the checks' quantiles; the Dagster
adapter turns outcomes into asset-check results with severity and metadata."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
from dagster import AssetCheckSeverity

from assets.checks import CHECK_SPECS, check_results
from corpus_pipeline.quality.checks import all_checks
from corpus_pipeline.quality.outcome import CheckOutcome
from corpus_pipeline.quality.stats import histogram, histogram_markdown, table_stats

CHARS = [10, 20, 30, 40, 50, 60, 70, 80, 90, 500]
TABLE = pa.table(
    {
        "doc_id": ["a"] * 6 + ["b"] * 4,
        "chunk_type": ["TEXT"] * 8 + ["IMAGE", "TABLE_IMAGE"],
        "derived": [False] * 8 + [True, True],
        "char_count": pa.array(CHARS, pa.int32()),
        "token_count": pa.array([c // 2 for c in CHARS], pa.int32()),
    }
)


def test_stats_give_counts_by_type_and_quantiles_equal_to_pandas_lower_interpolation():
    s = table_stats(TABLE, token_limit=100)
    assert s["count"] == 10 and s["documents"] == 2 and s["derived"] == 2
    assert s["by_chunk_type"] == {"TEXT": 8, "IMAGE": 1, "TABLE_IMAGE": 1}
    assert s["char_count"] == {"min": 10, "p5": 10, "p50": 50, "p95": 90, "max": 500, "mean": 95.0}
    pandas_q = pd.Series(CHARS).quantile([0.05, 0.5, 0.95], interpolation="lower").tolist()
    assert [s["char_count"][q] for q in ("p5", "p50", "p95")] == pandas_q  # what the GX suites see
    assert s["over_token_limit"] == 1 and s["token_limit"] == 100


def test_the_histogram_bins_every_row_and_flags_bins_past_the_limit():
    h = histogram(TABLE, "token_count", bins=5, limit=100)
    assert sum(b["count"] for b in h["bins"]) == 10
    assert h["bins"][0]["lo"] == 0 and all(b["hi"] - b["lo"] == h["width"] for b in h["bins"])
    md = histogram_markdown(TABLE, "token_count", bins=5, limit=100)
    assert md.startswith("| token_count | chunks |") and "over the model's limit" in md


def test_every_catalog_check_has_a_blocking_spec_on_its_asset():
    names = {(s.asset_key.to_user_string(), s.name) for specs in CHECK_SPECS.values() for s in specs}
    assert names == {(c.asset, c.name) for c in all_checks()}
    assert all(s.blocking for specs in CHECK_SPECS.values() for s in specs)


def test_outcomes_become_check_results_with_severity_counts_threshold_and_examples():
    outcomes = [
        CheckOutcome(
            "child_token_limit",
            "child_chunks",
            False,
            "ERROR",
            10,
            2,
            "child_token_limit: 2 of 10 fail",
            threshold={"max_tokens": 254},
            examples=[{"chunk_id": "c1", "token_count": 300}],
        ),
        CheckOutcome("child_quantiles", "child_chunks", False, "WARN", 10, 1, "p50 too small", observed={"p50": 3}),
    ]
    r1, r2 = check_results("child_chunks", outcomes)
    assert (r1.passed, r1.severity, r1.check_name) == (False, AssetCheckSeverity.ERROR, "child_token_limit")
    assert r1.metadata["failed"].value == 2 and r1.metadata["threshold"].value == {"max_tokens": 254}
    assert "| chunk_id | token_count |" in r1.metadata["examples"].value
    assert r2.severity == AssetCheckSeverity.WARN and r2.metadata["blocking"].value is False
