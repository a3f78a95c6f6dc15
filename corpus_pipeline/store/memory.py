"""Which allocator Arrow's buffers come from, in the processes that index.

pyarrow's default pool on Linux is mimalloc, which keeps the pages a step freed for the next
allocation instead of returning them: in one process that runs step after step (a serial
``corpus index``, a worker), the resident size only grows, and the peak of a late step (the
chunk merges, the search table's write) stands on everything the earlier ones read. Arrow's
jemalloc pool returns freed pages to the system within about a second (its decay): on a
5,000-document KB the serial index's peak RSS went from 1,525 MB (mimalloc) to 1,040–1,269 MB
(jemalloc, three runs), the system allocator at 1,245 MB; see ``benchmarks/scale/RESULTS.md``.

``use_returning_pool`` is called by the entry points only (the ``corpus`` CLI and the Dagster
code location, which step processes and workers import): an application that imports
``corpus_pipeline`` to search keeps its own choice. ``ARROW_DEFAULT_MEMORY_POOL`` in the
environment, Arrow's own setting, wins over it.
"""

from __future__ import annotations

import os

ENV = "ARROW_DEFAULT_MEMORY_POOL"
PREFERRED = "jemalloc"


def use_returning_pool() -> str:
    """Make Arrow's default pool jemalloc when this pyarrow has it and the environment does
    not name one; returns the pool's backend name. Buffers already allocated stay valid
    (each remembers its pool); call it early, before the large reads."""
    import pyarrow as pa

    chosen = os.environ.get(ENV)
    if (
        not chosen
        and PREFERRED in pa.supported_memory_backends()
        and pa.default_memory_pool().backend_name != PREFERRED
    ):
        pa.set_memory_pool(pa.jemalloc_memory_pool())
    return str(pa.default_memory_pool().backend_name)
