"""A run in a worker thread that the main thread can stop: SIGINT/SIGTERM while it runs.

Dagster defers interrupts to its step boundaries and does not check them while a step waits
for a pool slot, so ``corpus index`` runs each job in a worker thread and its main thread
answers the signals itself (``in_worker_thread``): it stops the run's step processes, lets
the caller mark the run failed, and raises ``Interrupted``. What the run wrote is what a
``kill -9`` would leave: every output is replaced atomically, the previous version stays
active.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any


class Interrupted(Exception):
    """``corpus index`` got SIGINT or SIGTERM: its run was marked failed and its slots freed."""

    def __init__(self, signo: int, message: str) -> None:
        super().__init__(message)
        self.signo = signo


def in_worker_thread(
    work: Callable[[], Any],
    name: str,
    tick: Callable[[float], None],
    on_interrupt: Callable[[str], str],
) -> Any:
    """``work()`` in a daemon thread; ``tick(seconds waited)`` four times a second meanwhile.
    On SIGINT/SIGTERM (when called from the main thread): the step processes are stopped,
    ``on_interrupt(signal name)`` (which marks the run failed) says where, and ``Interrupted``
    is raised. ``work``'s exception is re-raised here."""
    box: dict[str, Any] = {}

    def run() -> None:
        # The processes this thread starts (Dagster's compute-log watchers, the parsers'
        # forkserver, step processes) inherit a blocked SIGINT: a terminal's Ctrl-C, sent to
        # the whole process group, is answered by the main thread alone (which stops them),
        # not by a traceback of each. (multiprocessing's resource tracker, started first,
        # would unblock it in this thread when it starts.)
        _start_resource_tracker()
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            box["result"] = work()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=run, name=name, daemon=True)
    got: list[int] = []

    def on_signal(signo: int, _frame: FrameType | None) -> None:
        got.append(signo)
        raise KeyboardInterrupt

    main = threading.current_thread() is threading.main_thread()
    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)} if main else {}
    try:
        worker.start()
        waited = 0.0
        while worker.is_alive():
            worker.join(0.25)
            waited += 0.25
            tick(waited)
    except KeyboardInterrupt:
        signo = got[0] if got else signal.SIGINT
        name = signal.Signals(signo).name
        stop_step_processes()
        where = on_interrupt(name)
        raise Interrupted(
            signo, f"interrupted by {name}: {where} marked failed and its slots freed; the active version is unchanged"
        ) from None
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    if "error" in box:
        raise box["error"]
    return box["result"]


_QUIET_TRACKER = "ignore::UserWarning:multiprocessing.resource_tracker"


def _start_resource_tracker() -> None:
    """multiprocessing's resource tracker, started before SIGINT is blocked in the worker
    thread (starting it unblocks SIGINT in the thread that does), and told not to warn of the
    semaphores that step processes killed on Ctrl-C leave: it outlives them, and ends with
    this process."""
    from multiprocessing import resource_tracker

    sys.warnoptions.append(_QUIET_TRACKER)  # (the tracker is started with this process's -W options)
    try:
        resource_tracker.ensure_running()
    finally:
        sys.warnoptions.remove(_QUIET_TRACKER)


def stop_step_processes() -> None:
    """The step processes of a multiprocess run (children of this process), on interrupt."""
    import psutil

    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if any("multiprocessing.resource_tracker" in part for part in child.cmdline()):
                continue  # (ends with this process; killed, it would be relaunched, with warnings)
            child.kill()
