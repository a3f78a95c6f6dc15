"""Cost of the data-quality checks: ``python -m benchmarks.quality`` (see ``run.py``)."""
