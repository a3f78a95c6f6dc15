"""Data-quality checks: thresholds, GX suites, stats, and blocking in real Dagster runs."""
