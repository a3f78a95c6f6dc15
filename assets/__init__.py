"""Dagster assets, partitions, jobs, checks, sensors and schedules: thin wrappers that call
one ``corpus_pipeline`` function each."""

import warnings

from dagster import BetaWarning

# Deliberate uses of beta APIs (data versions on outputs, the kb dimension mapping).
warnings.filterwarnings("ignore", category=BetaWarning)
