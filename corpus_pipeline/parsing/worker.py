"""Parsing every document under bounds: in worker processes with a memory limit and a
wall-clock timeout, so no document exhausts the machine and the KB goes on.

    parse_many(jobs, workers=1)    ParseJob(doc, kb_dir, images_dir, limits) in, one
                                   ParsedDocument per job out, in input order

A worker calls ``parse_document`` (the one parse path: the same rows and ids as parsing in
this process) under ``setrlimit(RLIMIT_DATA, parsing.max_memory_mb)``; the parent waits
``parsing.timeout_s`` per document. A document over a limit comes back FAILED with the key
named; a worker that ran out of memory, timed out or crashed is replaced and the next
document goes on. The sizes (zip members, pages) are checked inside ``parse_document``.

Workers are started from a ``forkserver`` (``spawn`` where there is none) that preloads
this module, so a worker costs a fork, not an interpreter start; they are kept between calls
(the parse stages of one process share them, e.g. the tests) and exit after
``IDLE_EXIT_S`` without work, or when their parent is gone. ``workers`` > 1 parses that
many documents at once (``--workers N``). In a daemonic process, which may not have
children, documents are parsed in this process: sizes bounded, memory and time not.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait
from multiprocessing.context import BaseContext
from multiprocessing.process import BaseProcess
from pathlib import Path

from upath import UPath

from corpus_pipeline.kbconfig import ParsingConfig
from corpus_pipeline.models import DocStatus, Document, ParsedDocument
from corpus_pipeline.parsing.limits import DEFAULT_LIMITS, fix
from corpus_pipeline.parsing.parse import parse_document

#: A worker with no document for this long exits (a new one is started when needed).
IDLE_EXIT_S = 120.0
#: A worker whose heap grew past this share of ``max_memory_mb`` is replaced after its document.
RECYCLE_SHARE = 0.5
_MEMORY_HINTS = ("out of memory", "memoryerror", "memory allocation failed", "cannot allocate memory")


@dataclass(frozen=True)
class ParseJob:
    """One document to parse: what ``parse_document`` takes."""

    doc: Document
    kb_dir: Path
    images_dir: UPath | Path | None = None
    limits: ParsingConfig = DEFAULT_LIMITS


def _failed(job: ParseJob, error: str) -> ParsedDocument:
    return ParsedDocument(job.doc.doc_id, DocStatus.FAILED.value, error=error)


def memory_error(limits: ParsingConfig) -> str:
    return f"parsing needed more than parsing.max_memory_mb = {limits.max_memory_mb} MB; {fix('max_memory_mb')}"


def timeout_error(limits: ParsingConfig) -> str:
    return f"parsing took over parsing.timeout_s = {limits.timeout_s:g} s; {fix('timeout_s')}"


# --- in the worker ---------------------------------------------------------------------


def _data_bytes() -> int:
    """This process's data segment (what RLIMIT_DATA counts), 0 where /proc is missing."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _set_memory_limit(mb: int) -> None:
    try:
        import resource
    except ImportError:  # not POSIX: no limit
        return
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    soft = mb * 1024 * 1024
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


def _watch_parent() -> None:
    """Exit when the process that started the pool is gone (killed -9 mid-parse)."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _serve(conn: Connection) -> None:
    """A worker's loop: a job in, ``(ParsedDocument, healthy)`` out, until EOF or idle."""
    # A terminal's Ctrl-C reaches the whole process group: the parent answers it (and stops
    # this worker); a KeyboardInterrupt traceback of each worker would only be noise.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _watch_parent()
    while conn.poll(IDLE_EXIT_S):
        try:
            job: ParseJob = conn.recv()
        except EOFError:
            return
        _set_memory_limit(job.limits.max_memory_mb)
        parsed = parse_document(job.doc, job.kb_dir, images_dir=job.images_dir, limits=job.limits)
        healthy = _data_bytes() < RECYCLE_SHARE * job.limits.max_memory_mb * 1024 * 1024
        if parsed.status != DocStatus.OK.value and any(h in (parsed.error or "").lower() for h in _MEMORY_HINTS):
            parsed = replace(parsed, error=memory_error(job.limits) + f" ({parsed.error})")
            healthy = False
        try:
            conn.send((parsed, healthy))
        except MemoryError:  # the result itself (its text, pickled) is over the limit
            healthy = False
            conn.send((_failed(job, memory_error(job.limits) + " (sending the parsed text back)"), healthy))
        if not healthy:
            return


# --- in the parent ---------------------------------------------------------------------


def _context() -> BaseContext:
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload([__name__])
        return ctx
    return multiprocessing.get_context("spawn")


class _Worker:
    def __init__(self, ctx: BaseContext) -> None:
        mine, theirs = ctx.Pipe()
        self.conn = mine
        self.proc: BaseProcess = ctx.Process(target=_serve, args=(theirs,), name="corpus-parser", daemon=True)  # type: ignore[attr-defined]
        self.proc.start()
        theirs.close()
        self.index = -1
        self.job: ParseJob | None = None
        self.deadline = 0.0
        self.retried = False

    def start(self, index: int, job: ParseJob, retried: bool = False) -> None:
        self.index, self.job, self.retried = index, job, retried
        self.deadline = time.monotonic() + job.limits.timeout_s
        self.conn.send(job)

    def stop(self) -> None:
        self.conn.close()
        self.proc.join(1.0)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5.0)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.join(5.0)
        self.conn.close()


def _death(job: ParseJob, exitcode: int | None) -> str:
    limits = job.limits
    if exitcode is not None and exitcode < 0:
        name = signal.Signals(-exitcode).name if -exitcode in signal.valid_signals() else str(-exitcode)
        if -exitcode == signal.SIGKILL:
            return (
                f"the parser process was killed (SIGKILL) while parsing: most likely out of memory (the machine's, "
                f"or parsing.max_memory_mb = {limits.max_memory_mb} MB); {fix('max_memory_mb')}"
            )
        return (
            f"the parser process crashed ({name}) on this file, a corrupt file or one over parsing.max_memory_mb = "
            f"{limits.max_memory_mb} MB; re-save the file, or {fix('max_memory_mb')}"
        )
    return f"the parser process exited (code {exitcode}) while parsing; re-save the file or split it"


class ParserPool:
    """Worker processes that parse documents under bounds; see the module's docstring."""

    def __init__(self) -> None:
        self._ctx = _context()
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self.in_process = multiprocessing.current_process().daemon

    def _take(self) -> _Worker:
        with self._lock:
            while self._idle:
                w = self._idle.pop()
                if w.proc.is_alive():
                    return w
                w.stop()
        return _Worker(self._ctx)

    def _give_back(self, w: _Worker) -> None:
        w.job = None
        with self._lock:
            self._idle.append(w)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for w in idle:
            w.stop()

    def parse_many(self, jobs: Iterable[ParseJob], workers: int = 1) -> Iterator[ParsedDocument]:
        """One ParsedDocument per job, in input order; ``workers`` documents at once."""
        if self.in_process:
            for job in jobs:
                yield parse_document(job.doc, job.kb_dir, images_dir=job.images_dir, limits=job.limits)
            return
        todo = iter(enumerate(jobs))
        retry: list[tuple[int, ParseJob]] = []
        done: dict[int, ParsedDocument] = {}
        busy: list[_Worker] = []
        next_out = 0
        try:
            while True:
                while len(busy) < max(1, workers):
                    again = bool(retry)
                    item = retry.pop() if retry else next(todo, None)
                    if item is None:
                        break
                    w = self._take()
                    try:
                        w.start(*item, retried=again)
                    except (BrokenPipeError, EOFError, OSError):  # it exited while idle: a new one
                        w.kill()
                        w = _Worker(self._ctx)
                        w.start(*item, retried=again)
                    busy.append(w)
                if not busy:
                    break
                timeout = max(0.0, min(w.deadline for w in busy) - time.monotonic())
                wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], timeout)
                for w in list(busy):
                    current = w.job
                    assert current is not None
                    result: ParsedDocument | None = None
                    if w.conn.poll():
                        try:
                            result, healthy = w.conn.recv()
                        except (EOFError, OSError):
                            result, healthy = None, False
                        if result is not None:
                            busy.remove(w)
                            if healthy:
                                self._give_back(w)
                            else:
                                w.stop()
                    if result is None and not w.proc.is_alive():
                        busy.remove(w)
                        w.kill()
                        if w.proc.exitcode == 0 and not w.retried:  # it went idle as the job came
                            retry.append((w.index, current))
                            continue
                        result = _failed(current, _death(current, w.proc.exitcode))
                    if result is None and time.monotonic() >= w.deadline:
                        busy.remove(w)
                        w.kill()
                        result = _failed(current, timeout_error(current.limits))
                    if result is not None:
                        done[w.index] = result
                while next_out in done:
                    yield done.pop(next_out)
                    next_out += 1
        finally:
            for w in busy:  # stopped early (the caller closed the generator, or an error)
                w.kill()


_IDLE_POOLS: list[ParserPool] = []  # at most one: callers at the same time get their own
_POOLS_LOCK = threading.Lock()


@contextmanager
def _shared() -> Iterator[ParserPool]:
    with _POOLS_LOCK:
        pool = _IDLE_POOLS.pop() if _IDLE_POOLS else ParserPool()
    try:
        yield pool
    finally:
        with _POOLS_LOCK:
            keep = not _IDLE_POOLS
            if keep:
                _IDLE_POOLS.append(pool)
        if not keep:
            pool.close()


def parse_many(jobs: Iterable[ParseJob], workers: int = 1) -> Iterator[ParsedDocument]:
    """Parse every job under its limits in worker processes; results in input order."""
    with _shared() as pool:
        yield from pool.parse_many(jobs, workers)
