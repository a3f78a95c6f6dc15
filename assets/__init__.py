"""Dagster assets, partitions, jobs, checks, sensors and schedules: thin wrappers that call
one ``corpus_pipeline`` function each."""

import warnings

from dagster import BetaWarning, PreviewWarning

# Deliberate uses of beta APIs (data versions on outputs, the kb dimension mapping).
warnings.filterwarnings("ignore", category=BetaWarning)
# Partitioned asset checks (``assets.checks``) are a preview API of Dagster 1.13.
warnings.filterwarnings("ignore", category=PreviewWarning)
