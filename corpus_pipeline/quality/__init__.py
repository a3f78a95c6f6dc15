"""Data quality of the chunk tables: expectations per partition, thresholds, distributions.

    catalog     the checks (name, asset, default severity, what they assert)
    config      the ``quality:`` section of ``kb.yaml`` (pydantic, strict, bounded)
    bounds      thresholds derived from the plan and the embedding model
    suites      check_parent_blocks / check_child_chunks / check_chunk_embeddings:
                tables in, one CheckOutcome per check out (GX is the engine)
    stats       per-partition distributions (DuckDB) and a markdown histogram
    lineage     tracing one chunk back to its document, plan and run

No Dagster here: ``assets/checks.py`` turns outcomes into ``AssetCheckResult``s.
Heavy modules (GX, DuckDB) are imported by the submodules that need them, so importing
``kbconfig`` (which reads ``quality.config``) stays fast.
"""

from corpus_pipeline.quality.catalog import CHECKS, CheckDef, checks_for
from corpus_pipeline.quality.config import QualityConfig
from corpus_pipeline.quality.outcome import CheckOutcome, blocking_failures

__all__ = ["CHECKS", "CheckDef", "CheckOutcome", "QualityConfig", "blocking_failures", "checks_for"]
