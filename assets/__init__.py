"""Dagster assets, partitions, jobs, checks, sensors and schedules: thin wrappers that call
one ``corpus_pipeline`` function each."""

import warnings

from corpus_pipeline.store.memory import use_returning_pool

use_returning_pool()  # first, before pyarrow's import: see corpus_pipeline/store/memory.py

from dagster import BetaWarning, PreviewWarning  # noqa: E402

# Deliberate uses of beta APIs (data versions on outputs, the kb dimension mapping).
warnings.filterwarnings("ignore", category=BetaWarning)
# Partitioned asset checks (``assets.checks``) are a preview API of Dagster 1.13.
warnings.filterwarnings("ignore", category=PreviewWarning)
