"""One writer per knowledge base: a file lock under the warehouse.

``corpus index`` (and ``corpus backfill``, ``corpus drop``) hold ``warehouse/locks/<kb>.lock``
while they write a KB, so a second indexer of the same KB waits or stops with a message
that names the holder, instead of doing all the work again and losing a LanceDB commit
race. The lock is an OS lock (``filelock``: ``fcntl.flock``): it is released when its
process dies, even by ``kill -9``, so a crash never leaves a KB locked. Who holds it is
written beside it (``<kb>.owner``: pid, host, command, since) for the message.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from corpus_pipeline.errors import CorpusError
from corpus_pipeline.store.layout import Layout


class KBBusyError(CorpusError):
    """Another process is writing this knowledge base."""


def lock_file(layout: Layout, kb: str) -> Path:
    return layout.locks / f"{kb}.lock"


def _owner_file(layout: Layout, kb: str) -> Path:
    return lock_file(layout, kb).with_suffix(".owner")


def holder(layout: Layout, kb: str) -> dict[str, Any]:
    """Who last took the KB's lock (it may have released it since); {} if nobody did."""
    try:
        data = json.loads(_owner_file(layout, kb).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def is_locked(layout: Layout, kb: str) -> bool:
    """Whether some process holds the KB's lock now (probes without waiting)."""
    f = lock_file(layout, kb)
    if not f.exists():
        return False
    probe = FileLock(str(f))
    try:
        probe.acquire(timeout=0)
    except Timeout:
        return True
    probe.release()
    return False


def _describe(layout: Layout, kb: str) -> str:
    h = holder(layout, kb)
    if not h:
        return "another process"
    return f"pid {h.get('pid')} on {h.get('host')} (`{h.get('command')}`, since {h.get('since')})"


@contextmanager
def kb_lock(layout: Layout, kb: str, *, wait: float = 0.0, say: Any = None) -> Iterator[None]:
    """Hold the KB's write lock. ``wait``: seconds to wait for another holder (0: fail at
    once with ``KBBusyError``; a negative value waits as long as it takes)."""
    f = lock_file(layout, kb)
    f.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(f))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        if wait == 0:
            raise KBBusyError(
                f"knowledge base {kb!r} is being written by {_describe(layout, kb)}: wait for it to finish, "
                "or run again with --wait"
            ) from None
        if say is not None:
            say(f"▶ {kb}: waiting for {_describe(layout, kb)} to finish")
        t0 = time.monotonic()
        try:
            lock.acquire(timeout=wait if wait > 0 else -1)
        except Timeout:
            raise KBBusyError(
                f"knowledge base {kb!r} is still being written by {_describe(layout, kb)} after "
                f"{time.monotonic() - t0:.0f} s (--wait {wait:g}); try again later"
            ) from None
    try:
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "command": " ".join(["corpus", *sys.argv[1:]])[:200],
            "since": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        tmp = _owner_file(layout, kb).with_suffix(".owner.tmp")
        tmp.write_text(json.dumps(info), encoding="utf-8")
        tmp.replace(_owner_file(layout, kb))
        yield
    finally:
        lock.release()
