"""Data quality of the chunk tables: one function per check, thresholds, distributions.

    checks      every check: a function over a partition's tables returning the failing
                rows, declared with its asset, severity, threshold and fix (``@check``)
    partition   the partition's tables as frames, with the values rules compare
    run         run_checks(asset, thresholds, partition, **tables) -> CheckOutcome per check;
                CheckRun: the same over a partition given a group of documents at a time
    gx          great-expectations, the engine of the distribution (quantile) checks
    config      the ``quality:`` section of ``kb.yaml`` (pydantic, strict, bounded)
    bounds      thresholds derived from the plan (``Strategy.size_bound``) and the model
    stats       per-partition distributions (DuckDB) and a markdown histogram

No Dagster here: ``assets/checks.py`` turns outcomes into ``AssetCheckResult``s. pandas and
GX are imported by the submodules that need them, so importing ``kbconfig`` (which reads
``quality.config``) stays fast.
"""

from corpus_pipeline.quality.checks import CheckDef, all_checks, checks_for
from corpus_pipeline.quality.config import QualityConfig
from corpus_pipeline.quality.outcome import CheckOutcome, blocking_failures

__all__ = ["CheckDef", "CheckOutcome", "QualityConfig", "all_checks", "blocking_failures", "checks_for"]
