"""Incremental re-indexing benchmark (issue 6): ``python -m benchmarks.incremental``."""
