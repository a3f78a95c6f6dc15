"""Which allocator Arrow's buffers come from, in the processes that index.

pyarrow's default pool on Linux is mimalloc, which keeps the pages a step freed for the next
allocation instead of returning them: in one process that runs step after step (a serial
``corpus index``, a worker), the resident size only grows, and the peak of a late step (the
chunk merges, the search table's write) stands on everything the earlier ones read. Arrow's
jemalloc pool returns freed pages to the system within about a second (its decay): on a
5,000-document KB the serial index's peak RSS went from 1,525 MB (mimalloc) to 1,040–1,269 MB
(jemalloc, three runs), the system allocator at 1,245 MB; see ``benchmarks/scale/RESULTS.md``.

Arrow has two defaults. ``pa.set_memory_pool`` sets the pool pyarrow's Python functions
allocate from; Arrow's C++ default (its Parquet readers' page and decompression buffers, file
reads, a dataset filter's temporaries) is chosen once, from ``ARROW_DEFAULT_MEMORY_POOL``, when
pyarrow is imported. Setting only the first left those temporaries in mimalloc, which kept
them: a 5,000-document KB's parent batches, run twice in one process, left it ~200 MB larger
than with both set (``benchmarks/scale/RESULTS.md``, 2026-12-05). So ``use_returning_pool``
names jemalloc in the environment when pyarrow is not imported yet (this process and every
process it starts: step processes, parse workers), and sets pyarrow's pool as well for a
caller that imported pyarrow first.

``use_returning_pool`` is called by the entry points only, first thing (the ``corpus`` CLI's
``main`` and the Dagster code location's package, ``assets``, which step processes and
workers import): an application that imports ``corpus_pipeline`` to search keeps its own
choice. ``ARROW_DEFAULT_MEMORY_POOL`` in the environment, Arrow's own setting, wins over it.
"""

from __future__ import annotations

import os
import sys

ENV = "ARROW_DEFAULT_MEMORY_POOL"
PREFERRED = "jemalloc"


def use_returning_pool() -> str:
    """Make Arrow's default pools jemalloc when this pyarrow has it and the environment does
    not name one; returns the pool's backend name. Buffers already allocated stay valid
    (each remembers its pool). Call it before pyarrow is imported, or Arrow's C++ default
    stays what it was (see above); on Linux only, where pyarrow's wheels have jemalloc
    (elsewhere the variable would make Arrow warn where a build lacks it)."""
    chosen = os.environ.get(ENV)
    if not chosen and "pyarrow" not in sys.modules and sys.platform == "linux":
        os.environ[ENV] = chosen = PREFERRED
    import pyarrow as pa

    if (
        not chosen
        and PREFERRED in pa.supported_memory_backends()
        and pa.default_memory_pool().backend_name != PREFERRED
    ):
        pa.set_memory_pool(pa.jemalloc_memory_pool())
    return str(pa.default_memory_pool().backend_name)
