"""What stopped a Dagster run, in words a user can act on.

Dagster wraps a step's exception in "Error occurred while executing op ...", and a batch
that failed again after its retries in "Exceeded max_retries of 2": both say nothing about
what went wrong. ``first_error`` finds the cause (a blocking check's own message first),
``failure`` and ``cause`` unwrap one step's error.
"""

from __future__ import annotations

from typing import Any

from dagster import DagsterEventType


def first_error(result: Any, checks_failed: list[dict[str, Any]] | None = None) -> str:
    """What stopped a run: a blocking check's own message (partition, document, chunk,
    figure, limit, fix), else the first failed step's error."""
    for c in checks_failed or []:
        if c.get("severity") == "ERROR":
            return f"blocking check {c['check']} on {c['asset']} ({c['partition']}) failed: {c['message']}"
    retried: dict[str, str] = {}
    for ev in result.all_events:
        data: Any = ev.event_specific_data
        if ev.event_type == DagsterEventType.STEP_UP_FOR_RETRY and data.error:
            retried[str(ev.step_key)] = cause(data.error)
        if ev.event_type == DagsterEventType.STEP_FAILURE and data.error:
            return f"{ev.step_key}: {failure(data.error, retried.get(str(ev.step_key)))}"
    return "run failed"


def failure(error: Any, retried: str | None) -> str:
    """A failed step's error; for a batch that failed again after its retries, the error of
    its last attempt (Dagster's own says only "Exceeded max_retries of 2")."""
    if error is None:
        return retried or ""
    message = cause(error)
    if retried and message.startswith("Exceeded max_retries"):
        return f"{retried} (failed again after {message.removeprefix('Exceeded max_retries of ').strip()} retries)"
    return message


def wrapper(cls_name: str) -> bool:
    """Dagster's errors around a step's own (and a retry policy's request to retry it)."""
    return cls_name.startswith(("Dagster", "RetryRequested"))


def cause(error: Any) -> str:
    """The message of the error that started it all: Dagster wraps the step's exception in
    "Error occurred while executing op ...", which says nothing about what went wrong."""
    while getattr(error, "cause", None) is not None and wrapper(str(getattr(error, "cls_name", ""))):
        error = error.cause
    message = str(error.message).strip()
    if "[Errno 28]" in message or "No space left on device" in message:
        message += " — the disk of the warehouse is full: free space (or move CORPUS_HOME) and run again; the active version is unchanged"
    return message
