"""Give memory the process no longer uses back to the operating system.

A serial ``corpus index`` runs every step of a partition in one process. Each stage's
tables are freed when its step ends, but the allocators keep the pages: Arrow's pool
(mimalloc or jemalloc) caches them for reuse, glibc's malloc keeps freed arenas, so the
process's resident size only climbs from step to step and each stage's peak stacks on
the last one's. ``release_unused`` is called between steps (``assets.jobs``), and Arrow's
buffers come from glibc's malloc (``use_system_allocator``), which gives them back."""

import ctypes
import ctypes.util
import gc
import os
import sys
from functools import cache
from typing import Any


@cache
def _libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") else None  # (glibc only: musl has none)


def use_system_allocator() -> bool:
    """Have Arrow allocate from the system's malloc instead of its bundled mimalloc, unless
    ``ARROW_DEFAULT_MEMORY_POOL`` chose a pool; True when the pool was changed.

    Measured here (pyarrow 26, a 5,000-document partition's Parquet files, 246 MB of
    Arrow, read three times): mimalloc peaked at 632 MB resident and kept 300 MB after the
    tables were freed and ``release_unused``; the system pool peaked at 406 MB and kept
    148 MB; jemalloc kept 419 MB (its pages return only after its decay time)."""
    import pyarrow as pa

    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return False
    if pa.default_memory_pool().backend_name != "system":
        pa.set_memory_pool(pa.system_memory_pool())
        return True
    return False


def release_unused() -> bool:
    """Collect garbage, then have Arrow's pool and glibc's malloc return their free pages;
    True when malloc gave some back (what ``malloc_trim`` reports)."""
    import pyarrow as pa

    gc.collect()
    pa.default_memory_pool().release_unused()
    libc = _libc()
    return bool(libc.malloc_trim(0)) if libc is not None else False
