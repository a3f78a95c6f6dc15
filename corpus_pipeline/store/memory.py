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

The native libraries that do not use Arrow's pools (LanceDB's writer and index builder, numpy,
pandas) allocate with glibc's malloc, which gives each thread that meets contention an arena of
its own (up to 8 per core) and keeps what is freed inside them. Building a 20,000-document KB's
search table in a fresh process, its IVF_PQ step peaked at 1,145 MB and left 852 MB resident;
with two arenas (this machine's cores), 774 MB and 549 MB, in the same time (81–88 s); with ``give_back``
after each phase as well, 330 MB left (``benchmarks/scale/RESULTS.md``, 2026-12-05). So
``use_returning_pool`` also caps the arenas at the core count (``MALLOC_ARENA_MAX`` for the
processes it starts, ``mallopt`` for this one, before its threads start) unless the
environment sets ``MALLOC_ARENA_MAX``; and ``give_back`` (Arrow's unused pages, then
``malloc_trim``) runs where a step has let go of its partition (the IO manager, after a write).

``use_returning_pool`` is called by the entry points only, first thing (the ``corpus`` CLI's
``main`` and the Dagster code location's package, ``assets``, which step processes and
workers import): an application that imports ``corpus_pipeline`` to search keeps its own
choice. ``ARROW_DEFAULT_MEMORY_POOL`` in the environment, Arrow's own setting, wins over it.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import sys

ENV = "ARROW_DEFAULT_MEMORY_POOL"
PREFERRED = "jemalloc"
ARENAS_ENV = "MALLOC_ARENA_MAX"
_M_ARENA_MAX = -8  # (glibc's mallopt parameter)


def _glibc() -> ctypes.CDLL | None:
    """The C library when it is glibc (it has ``malloc_trim``), else None."""
    if sys.platform != "linux":
        return None
    name = ctypes.util.find_library("c") or "libc.so.6"
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None


def limit_malloc_arenas() -> int | None:
    """Cap glibc's malloc arenas at the core count (at least 2) for this process and the
    ones it starts, unless ``MALLOC_ARENA_MAX`` is set; returns the cap (None: not glibc)."""
    libc = _glibc()
    if libc is None:
        return None
    chosen = os.environ.get(ARENAS_ENV)
    if chosen is None:
        chosen = os.environ[ARENAS_ENV] = str(max(2, os.cpu_count() or 2))
    with contextlib.suppress(ValueError):
        libc.mallopt(_M_ARENA_MAX, int(chosen))
        return int(chosen)
    return None


def give_back() -> None:
    """Return freed memory to the system now: Arrow's pool's unused pages, then glibc's
    free heap pages (``malloc_trim``). Costs milliseconds; call it where a step has let go
    of a partition's tables."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


def use_returning_pool() -> str:
    """Make Arrow's default pools jemalloc when this pyarrow has it and the environment does
    not name one, and cap glibc's arenas (``limit_malloc_arenas``); returns the pool's
    backend name. Buffers already allocated stay valid (each remembers its pool). Call it before pyarrow is imported, or Arrow's C++ default
    stays what it was (see above); on Linux only, where pyarrow's wheels have jemalloc
    (elsewhere the variable would make Arrow warn where a build lacks it)."""
    limit_malloc_arenas()
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
