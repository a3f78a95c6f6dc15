"""End-to-end retrieval benchmark: ``python -m benchmarks.retrieval PATH ...`` (see ``run.py``)."""
