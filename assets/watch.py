"""Following a run from beside it: its steps, failed checks and progress lines as they happen."""

from __future__ import annotations

from typing import Any

from dagster import DagsterEventType, DagsterInstance

from assets.run_errors import cause, failure
from corpus_pipeline import progress


class RunWatcher:
    """Reads one run's new event-log entries while it runs (from the main thread, beside the
    run's own) and tells the reporter: steps started and finished, checks failed, and the
    stages' progress lines (``corpus_pipeline.progress``). Reading is incremental (a cursor
    on the storage id), and best effort: an error is counted, three in a row stop the
    reading, and the run is never touched. At the end, the run's own events fill in what
    was not seen, so every step's line is printed once, live or not.

    SQLite: the event-log storage serializes its connections with one lock per instance
    (``SqliteEventLogStorage._db_lock``), so a read waits for a write of the run's thread
    and the other way round; both use the same instance object."""

    def __init__(self, instance: DagsterInstance, run_id: str, partition: str, reporter: progress.Reporter) -> None:
        self.instance, self.run_id, self.partition, self.reporter = instance, run_id, partition, reporter
        self.cursor: str | None = None
        self.seen: set[tuple[str, ...]] = set()
        self.errors = 0
        self.reads = 0
        self.retried: dict[str, str] = {}  # step -> the error its last retried attempt ended with

    def poll(self) -> None:
        if self.errors >= 3 or not self.run_id:
            return
        try:
            while True:
                conn = self.instance.get_records_for_run(self.run_id, cursor=self.cursor, limit=200)
                self.reads += 1
                for rec in conn.records:
                    self._entry(rec.event_log_entry)
                self.cursor = conn.cursor
                if not conn.has_more:
                    break
            self.errors = 0
        except Exception:  # noqa: BLE001 - a progress line is not worth failing a run for
            self.errors += 1

    def finish(self, result: Any) -> None:
        """The last entries, then whatever the reading missed, from the run's own events."""
        self.poll()
        for ev in result.all_events if result is not None else []:
            self._event(ev)

    def _entry(self, entry: Any) -> None:
        if entry.dagster_event is not None:
            self._event(entry.dagster_event)
            return
        update = progress.ProgressUpdate.from_message(entry.user_message)
        if update is not None and entry.step_key:
            self.reporter.step_progress(progress.step_label(entry.step_key), self.partition, update)

    def _event(self, ev: Any) -> None:
        data: Any = ev.event_specific_data  # (its type depends on the event's)
        kind = ev.event_type
        step = progress.step_label(str(ev.step_key or ""))
        key: tuple[str, ...] = (kind.value, step)
        if kind == DagsterEventType.ASSET_CHECK_EVALUATION:
            if data.passed:
                return
            key = (kind.value, data.asset_key.to_user_string(), data.check_name)
        elif kind == DagsterEventType.STEP_UP_FOR_RETRY:
            if data.error:
                self.retried[step] = cause(data.error)
            return
        elif kind not in _STEP_EVENTS:
            return
        if key in self.seen:
            return
        self.seen.add(key)
        r, part = self.reporter, self.partition
        if kind == DagsterEventType.STEP_START:
            r.step_started(step, part)
        elif kind == DagsterEventType.STEP_SUCCESS:
            r.step_finished(step, part, "ok", data.duration_ms / 1000)
        elif kind == DagsterEventType.STEP_FAILURE:
            r.step_finished(step, part, "failed", None, failure(data.error, self.retried.get(step)))
        elif kind == DagsterEventType.STEP_SKIPPED:
            r.step_finished(step, part, "skipped", None)
        else:
            r.check_failed(data.check_name, data.asset_key.to_user_string(), part, data.severity.value)


_STEP_EVENTS = {
    DagsterEventType.STEP_START,
    DagsterEventType.STEP_SUCCESS,
    DagsterEventType.STEP_FAILURE,
    DagsterEventType.STEP_SKIPPED,
}
