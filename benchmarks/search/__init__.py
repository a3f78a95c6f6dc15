"""Search benchmark: ``python -m benchmarks.search`` (see ``run.py``)."""
