"""What the forkserver of a multiprocess run imports once (``assets.executors``): every step
process of that run is forked from it with these modules loaded, instead of starting a
fresh interpreter that imports them again (~2 s for the project and Dagster, ~4 s for Great
Expectations, ~7 s for sentence-transformers, per step).

Imports only: nothing here opens a file, a connection or a thread (a fork copies none of
them safely). Not LanceDB: its runtime warns that a fork after its import may deadlock, so
the ``search_index`` step imports it itself. The embedding library is preloaded when it is
installed, whichever model a KB uses: a step that does not embed only shares its pages.
Dagster's storage modules are what each step's ``DagsterInstance`` imports (~0.7 s).
"""

import contextlib

import dagster._core.storage.event_log
import dagster._core.storage.runs
import dagster._core.storage.schedules
import dagster._core.storage.sqlite_storage  # noqa: F401
import pyarrow.dataset
import pyarrow.parquet  # noqa: F401

import assets.runner  # noqa: F401  (the job, its assets, resources and IO managers)
from corpus_pipeline.quality import gx

gx.load()  # Great Expectations, with the warning filter its import needs

with contextlib.suppress(ImportError):
    import dagster_postgres  # noqa: F401  (an instance on PostgreSQL)
with contextlib.suppress(ImportError):
    import sentence_transformers  # noqa: F401  (the bundled model's library, when installed)
