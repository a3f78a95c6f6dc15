"""What every asset of the code location declares the same way: its owner and its kinds
(the storage icons of the Dagster UI). The standard table metadata is
``resources.metadata``."""

from dagster import Backoff, RetryPolicy

OWNERS = ["team:corpus"]
PARQUET = {"parquet", "python"}  # an asset the Parquet IO manager writes
LANCEDB = {"lancedb", "python"}
PYTHON = {"python"}

#: The IO manager of the batches between a fanned-out asset's steps (``resources.batch_io``).
BATCH_IO = "batch_io_manager"
#: A batch step that fails (a lost worker, an endpoint's outage) is retried alone, twice.
BATCH_RETRY = RetryPolicy(max_retries=2, delay=2, backoff=Backoff.EXPONENTIAL)
