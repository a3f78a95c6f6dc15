"""Dagster assets, partitions, jobs (and, later, checks, sensors, schedules): thin wrappers
that call one ``corpus_pipeline`` function each."""
