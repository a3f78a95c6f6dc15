"""Live progress of indexing, without Dagster.

Two halves meet in the run's event log:

- **In a stage** (``corpus_pipeline.indexing``), a ``ProgressFn`` ``(stage, done, total,
  unit)`` is called as documents, images or chunks are done. The Dagster assets pass
  ``logging_progress(context.log.info)``: throttled to one line a second (and the last
  one), each a readable line with a JSON payload (``ProgressUpdate.to_message``), which
  the run's event log stores, so it shows in the Dagster UI for any run.
- **In ``corpus index``** the main thread reads the run's new events while the run goes
  (``assets.runner``) and hands them to a ``Reporter``: ``LineReporter`` prints a line per
  finished step and failed check as it happens (not a terminal, ``--json``, tests);
  ``LiveReporter`` also draws a bar per running step with counts, rate and ETA (rich,
  on a terminal).

A progress report never fails a run: ``Throttled`` swallows its sink's errors.

    ProgressFn                     (stage, done, total, unit) -> None
    ProgressUpdate                 one report: counts, elapsed, rate, ETA; log message round trip
    format_update(u)               "7/10 documents · 2.3/s · ETA 0:01"
    Throttled / logging_progress   a ProgressFn sending at most one update a second
    tracked(items, progress, ...)  a sequence that reports as it is iterated
    step_line / check_line         the per-step and per-check lines
    open_reporter(live=...)        LiveReporter on a terminal, else LineReporter
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any, Protocol, TypeVar, overload

T = TypeVar("T")

MARKER = "corpus.progress "  # what starts the JSON payload of a progress log line


class ProgressFn(Protocol):
    def __call__(self, stage: str, done: int, total: int, unit: str) -> None: ...


def no_progress(stage: str, done: int, total: int, unit: str) -> None:
    """The default ``ProgressFn``: says nothing."""


@dataclass(frozen=True)
class ProgressUpdate:
    """``done`` of ``total`` ``unit`` of one stage, ``elapsed`` seconds after it started."""

    stage: str
    done: int
    total: int
    unit: str
    elapsed: float

    @property
    def rate(self) -> float | None:
        """Units per second so far (None before the first one, or with no time measured)."""
        return self.done / self.elapsed if self.done > 0 and self.elapsed > 0 else None

    @property
    def eta(self) -> float | None:
        """Seconds still to go at the rate so far (0 when done; None when unknown)."""
        if self.total > 0 and self.done >= self.total:
            return 0.0
        rate = self.rate
        return (self.total - self.done) / rate if rate and self.total > self.done else None

    def to_message(self) -> str:
        """The log line: readable first (the Dagster UI shows it), then the marker and the
        JSON payload that ``from_message`` reads back."""
        payload = json.dumps(
            {"stage": self.stage, "done": self.done, "total": self.total, "unit": self.unit,
             "elapsed": round(self.elapsed, 3)},
            ensure_ascii=False,
        )  # fmt: skip
        return f"{self.stage}: {format_update(self)} | {MARKER}{payload}"

    @classmethod
    def from_message(cls, message: str | None) -> ProgressUpdate | None:
        """The update in a log line written by ``to_message``; None for any other line."""
        if not message or MARKER not in message:
            return None
        try:
            data = json.loads(message.rsplit(MARKER, 1)[1])
            return cls(str(data["stage"]), int(data["done"]), int(data["total"]), str(data["unit"]),
                       float(data["elapsed"]))  # fmt: skip
        except (ValueError, KeyError, TypeError, IndexError):
            return None


def format_duration(seconds: float) -> str:
    """``0:07``, ``12:30``, ``1:02:03`` (rounded up to the second: an ETA is never 0:00 early)."""
    s = max(0, math.ceil(seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def format_elapsed(seconds: float) -> str:
    """``0.4s``, ``12.3s``, then ``1:05`` (a time taken, to the tenth under a minute)."""
    return f"{seconds:.1f}s" if seconds < 59.95 else format_duration(round(seconds))


def format_rate(rate: float | None) -> str:
    """``2.3/s``, ``45/s``, ``12/min`` for slow stages (an image a minute is no ``0.0/s``)."""
    if rate is None:
        return "–/s"
    if rate < 0.1:
        return f"{rate * 60:.1f}/min"
    return f"{rate:.1f}/s" if rate < 10 else f"{rate:.0f}/s"


def format_update(u: ProgressUpdate) -> str:
    """``7/10 documents · 2.3/s · ETA 0:02``; when done, the time taken instead (``in 4.2s``)."""
    counts = f"{u.done}/{u.total} {u.unit}" if u.total > 0 else f"{u.done} {u.unit}"
    rate = format_rate(u.rate)
    if u.total > 0 and u.done >= u.total:
        return f"{counts} · {rate} · in {format_elapsed(u.elapsed)}"
    eta = u.eta
    return f"{counts} · {rate} · ETA {format_duration(eta) if eta is not None else '?'}"


class Throttled:
    """A ``ProgressFn`` that hands ``ProgressUpdate``s to ``sink``: the first, then at most
    one per ``interval`` seconds, and always the last (``done >= total``). Elapsed time is
    counted from this object's creation (just before the stage starts). Never raises: a
    failing sink is dropped and the stage goes on."""

    def __init__(
        self, sink: Callable[[ProgressUpdate], None], interval: float = 1.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.sink: Callable[[ProgressUpdate], None] | None = sink
        self.interval = interval
        self.clock = clock
        self.started = clock()
        self.last: dict[str, float] = {}
        self.sent = 0

    def __call__(self, stage: str, done: int, total: int, unit: str) -> None:
        if self.sink is None:
            return
        now = self.clock()
        last = self.last.get(stage)
        if last is not None and now - last < self.interval and not (total > 0 and done >= total):
            return
        self.last[stage] = now
        try:
            self.sink(ProgressUpdate(stage, done, total, unit, now - self.started))
            self.sent += 1
        except Exception:  # noqa: BLE001 - progress is never worth failing a stage for
            self.sink = None


def logging_progress(log: Callable[[str], Any], interval: float = 1.0) -> Throttled:
    """The ``ProgressFn`` of an asset: ``logging_progress(context.log.info)``."""
    return Throttled(lambda u: log(u.to_message()), interval)


class _Tracked(Sequence[T]):
    def __init__(self, items: Sequence[T], progress: ProgressFn, stage: str, unit: str) -> None:
        self.items, self.progress, self.stage, self.unit = items, progress, stage, unit

    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[T]: ...
    def __getitem__(self, i: int | slice) -> T | Sequence[T]:
        return self.items[i]

    def __iter__(self) -> Iterator[T]:
        total = len(self.items)
        for done, item in enumerate(self.items):
            if done:
                self.progress(self.stage, done, total, self.unit)  # the previous item is done
            yield item
        self.progress(self.stage, total, total, self.unit)


def tracked(items: Sequence[T], progress: ProgressFn | None, stage: str, unit: str) -> Sequence[T]:
    """``items``, reporting ``done`` each time the consumer asks for the next one (the one
    before is done) and the total at the end: progress through a function that takes a
    sequence and loops over it once, in order, without changing it."""
    return items if progress is None else _Tracked(items, progress, stage, unit)


# ----------------------------------------------------------------- what corpus index prints


def step_label(step: str) -> str:
    """A step as ``corpus index`` names it: a fanned-out asset's steps by their asset
    (``parsed_blocks.parse_batch[b0]`` → ``parsed_blocks [b0]``, ``….parse_plan`` →
    ``parsed_blocks (plan)``, ``….parse_merge`` → ``parsed_blocks``); others as they are."""
    asset, dot, op = step.partition(".")
    if not dot:
        return step
    if "[" in op:
        return f"{asset} [{op.partition('[')[2].rstrip(']')}]"
    if op.endswith("_plan"):
        return f"{asset} (plan)"
    return asset if op.endswith("_merge") else step


def step_line(mark: str, step: str, partition: str, detail: str = "") -> str:
    """``  ✓ child_chunks         tiny|p2-c2-…    2.91s``: one line per finished step."""
    return f"  {mark} {step:<20} {partition}  {detail}".rstrip()


def check_line(check: str, asset: str, partition: str, severity: str) -> str:
    """A failed check as it happens: ⚠ for WARN (the version is still built), ✗ for ERROR."""
    mark = "✗" if severity == "ERROR" else "⚠"
    return f"  {mark} check {check} on {asset} {partition} failed ({severity})"


class Reporter:
    """What ``corpus index`` shows while it runs; this base prints nothing."""

    def line(self, text: str) -> None:
        """A line of its own (``▶ kb: parse ...``, notes)."""

    def step_started(self, step: str, partition: str) -> None:
        """A step of a run started."""

    def step_progress(self, step: str, partition: str, update: ProgressUpdate) -> None:
        """A step reported how far it is."""

    def step_finished(self, step: str, partition: str, status: str, seconds: float | None, error: str = "") -> None:
        """A step ended: ``status`` is ``ok``, ``failed`` or ``skipped``."""
        self.line(step_line(*_finished(step, partition, status, seconds, error)))

    def check_failed(self, check: str, asset: str, partition: str, severity: str) -> None:
        self.line(check_line(check, asset, partition, severity))

    def close(self) -> None:
        """Stop drawing (idempotent)."""

    def __enter__(self) -> Reporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _finished(step: str, partition: str, status: str, seconds: float | None, error: str) -> tuple[str, str, str, str]:
    if status == "ok":
        return "✓", step, partition, f"{seconds:6.2f}s" if seconds is not None else ""
    if status == "skipped":
        return "–", step, partition, "skipped (a blocking check or a step upstream failed)"
    return "✗", step, partition, " ".join(error.split())  # one line


class LineReporter(Reporter):
    """A line per finished step and failed check, as they happen, through ``write``
    (``close`` closes ``owned``, the stream it writes to, if it was opened for it)."""

    def __init__(self, write: Callable[[str], None], owned: IO[str] | None = None) -> None:
        self.write = write
        self.owned = owned

    def line(self, text: str) -> None:
        self.write(text)

    def close(self) -> None:
        if self.owned is not None and not self.owned.closed:
            self.owned.close()


def private_stderr() -> IO[str] | None:
    """A stream of its own on the file stderr is now (a duplicate of fd 2), or None when
    stderr has no file descriptor (a test's capture). While a run executes in this process,
    Dagster points fds 1 and 2 at the run's compute-log files (``dup2``; a ``tail`` copies
    them back to the terminal): written to the duplicate, progress reaches the terminal at
    once, stays a terminal for rich, and is not copied into the run's logs."""
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return None
    sys.stderr.flush()
    encoding = getattr(sys.stderr, "encoding", None) or "utf-8"
    return open(os.dup(fd), "w", buffering=1, encoding=encoding, errors="backslashreplace")


class LiveReporter(Reporter):
    """On a terminal: the lines of ``LineReporter`` plus a bar per running step (rich),
    with its counts, rate and ETA once the step reports them, and its elapsed time."""

    def __init__(self, stream: IO[str] | None = None, owned: bool = False) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.stream = stream or sys.stderr
        self.owned = owned and stream is not None
        self.console = Console(file=self.stream, highlight=False)
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}", markup=False),
            BarColumn(bar_width=28),
            TextColumn("{task.fields[detail]}", markup=False),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,
            # stdout is the summary's; what a step prints on stderr goes to Dagster's
            # compute log of the run (and from there to the terminal), as without bars
            redirect_stdout=False,
            redirect_stderr=False,
            refresh_per_second=4,
        )
        self.tasks: dict[str, Any] = {}
        self.lock = threading.Lock()
        self.started = False
        self.closed = False

    def _start(self) -> None:
        if not self.started and not self.closed:
            self.progress.start()
            self.started = True

    def line(self, text: str) -> None:
        from rich.text import Text

        with self.lock:
            self.console.print(Text(text), soft_wrap=True)

    def step_started(self, step: str, partition: str) -> None:
        with self.lock:
            self._start()
            if step not in self.tasks:
                self.tasks[step] = self.progress.add_task(f"{step:<20} {partition}", total=None, detail="")

    def step_progress(self, step: str, partition: str, update: ProgressUpdate) -> None:
        with self.lock:
            task = self.tasks.get(step)
            if task is None:
                self._start()
                task = self.tasks[step] = self.progress.add_task(f"{step:<20} {partition}", total=None, detail="")
            total = update.total if update.total > 0 else None
            self.progress.update(task, total=total, completed=update.done, detail=format_update(update))
            # drawn now, not at the next tick: a batch step can report and end within a
            # tick, and its counts would never reach the terminal (reports are throttled
            # to one a second per stage, so this costs nothing)
            self.progress.refresh()

    def step_finished(self, step: str, partition: str, status: str, seconds: float | None, error: str = "") -> None:
        with self.lock:
            task = self.tasks.pop(step, None)
            if task is not None:
                self.progress.remove_task(task)
                self.progress.refresh()
        super().step_finished(step, partition, status, seconds, error)

    def close(self) -> None:
        with self.lock:
            if self.started and not self.closed:
                self.progress.stop()
            self.closed = True
            if self.owned and not self.stream.closed:
                self.stream.close()


def open_reporter(live: bool, stream: IO[str] | None = None) -> Reporter:
    """``LiveReporter`` when ``live`` (a terminal, no ``--json``), else ``LineReporter``;
    on ``stream``, or on a private duplicate of stderr (``private_stderr``)."""
    owned = private_stderr() if stream is None else None
    out = stream or owned or sys.stderr
    if live:
        return LiveReporter(out, owned=owned is not None)
    return LineReporter(lambda s: print(s, file=out, flush=True), owned)


def should_draw(as_json: bool, stream: IO[str] | None = None) -> bool:
    """Bars only for a person: not with ``--json``, and only on a terminal that is not dumb."""
    s = stream or sys.stderr
    return not as_json and s.isatty() and os.environ.get("TERM", "") != "dumb"
