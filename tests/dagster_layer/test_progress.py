"""Live progress of `corpus index` (issue 15): the formatting of counts, rate and ETA; the
throttled reports of a stage; and real `corpus index` runs on the tiny KB: step lines
arrive while the run goes (not all at once when a job ends), `--json` prints only the
JSON, a WARN check shows as ⚠ and in the summary as a warning, and a terminal gets bars."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from corpus_pipeline import progress
from corpus_pipeline.indexing import parse_documents
from corpus_pipeline.indexing.discover import discover_documents
from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.progress import ProgressUpdate, Throttled, format_duration, format_rate, format_update, tracked

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]

# ----------------------------------------------------------------- formatting


def test_counts_rate_and_eta():
    u = ProgressUpdate("parse", 7, 10, "documents", 3.5)
    assert u.rate == pytest.approx(2.0) and u.eta == pytest.approx(1.5)
    assert format_update(u) == "7/10 documents · 2.0/s · ETA 0:02"  # 1.5 s rounded up: never early
    assert format_update(ProgressUpdate("embed", 100, 400, "chunks", 10.0)) == "100/400 chunks · 10/s · ETA 0:30"
    # an image a minute is no "0.0/s"; an hour to go reads as one
    slow = ProgressUpdate("describe", 1, 61, "images", 60.0)
    assert format_update(slow) == "1/61 images · 1.0/min · ETA 1:00:00"


def test_before_the_first_unit_and_when_done():
    assert format_update(ProgressUpdate("parse", 0, 10, "documents", 2.0)) == "0/10 documents · –/s · ETA ?"
    assert format_update(ProgressUpdate("parse", 10, 10, "documents", 4.24)) == "10/10 documents · 2.4/s · in 4.2s"
    assert format_update(ProgressUpdate("embed", 500, 500, "chunks", 75.0)) == "500/500 chunks · 6.7/s · in 1:15"
    assert format_update(ProgressUpdate("x", 3, 0, "rows", 1.0)) == "3 rows · 3.0/s · ETA ?"  # no total known
    assert format_duration(0) == "0:00" and format_duration(59.2) == "1:00" and format_duration(3725) == "1:02:05"
    assert format_rate(None) == "–/s" and format_rate(0.5) == "0.5/s" and format_rate(123.4) == "123/s"


def test_a_log_line_round_trips_and_reads_as_text():
    u = ProgressUpdate("embed", 64, 125, "chunks", 12.345)
    line = u.to_message()
    assert line.startswith("embed: 64/125 chunks · 5.2/s · ETA 0:12 | corpus.progress {")  # readable in the UI
    assert ProgressUpdate.from_message(line) == ProgressUpdate("embed", 64, 125, "chunks", 12.345)
    for other in (None, "", "Started execution of step", "corpus.progress {not json", "corpus.progress {}"):
        assert ProgressUpdate.from_message(other) is None


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_throttled_sends_the_first_one_a_second_and_the_last():
    clock, got = Clock(), []
    report = Throttled(got.append, interval=1.0, clock=clock)
    for i in range(1, 11):  # ten documents, 0.3 s each
        clock.t += 0.3
        report("parse", i, 10, "documents")
    assert [u.done for u in got] == [1, 5, 9, 10]
    assert got[-1].elapsed == pytest.approx(3.0) and got[-1].rate == pytest.approx(10 / 3)


def test_a_failing_sink_never_stops_the_stage():
    calls = []

    def broken(u: ProgressUpdate) -> None:
        calls.append(u)
        raise OSError("the log is gone")

    report = Throttled(broken, interval=0.0)
    report("parse", 1, 3, "documents")
    report("parse", 3, 3, "documents")  # dropped after the first failure, no exception
    assert len(calls) == 1


def test_tracked_reports_each_item_as_the_next_is_asked_for():
    seen: list[tuple[int, int]] = []
    items = tracked(["a", "b", "c"], lambda stage, done, total, unit: seen.append((done, total)), "describe", "images")
    out = []
    for x in items:
        out.append(x)
        assert seen[-1:] == ([(len(out) - 1, 3)] if len(out) > 1 else [])  # reported before the next starts
    assert out == ["a", "b", "c"] and seen == [(1, 3), (2, 3), (3, 3)]
    assert len(items) == 3 and items[1] == "b"
    plain = ["a"]
    assert tracked(plain, None, "describe", "images") is plain


def test_the_parse_stage_reports_every_document(tiny_kb):
    kb = resolve_kb(tiny_kb)
    docs = discover_documents(kb).table
    seen: list[tuple[str, int, int, str]] = []
    result = parse_documents(kb, docs, progress=lambda *a: seen.append(a))
    assert result.stats.parsed == 2
    assert seen == [("parse", 1, 2, "documents"), ("parse", 2, 2, "documents")]


def test_line_reporter_marks_warnings_and_failures():
    lines: list[str] = []
    r = progress.LineReporter(lines.append)
    r.step_started("child_chunks", "tiny|v1")  # no line: only what ended is printed
    r.step_progress("child_chunks", "tiny|v1", ProgressUpdate("children", 1, 2, "documents", 1.0))
    r.check_failed("child_quantiles", "child_chunks", "tiny|v1", "WARN")
    r.check_failed("child_token_limit", "child_chunks", "tiny|v1", "ERROR")
    r.step_finished("child_chunks", "tiny|v1", "ok", 2.5)
    r.step_finished("chunk_embeddings", "tiny|v1", "skipped", None)
    r.step_finished("search_index", "tiny|v1", "failed", None, "disk full:\n  [Errno 28]")
    assert lines == [
        "  ⚠ check child_quantiles on child_chunks tiny|v1 failed (WARN)",
        "  ✗ check child_token_limit on child_chunks tiny|v1 failed (ERROR)",
        "  ✓ child_chunks         tiny|v1    2.50s",
        "  – chunk_embeddings     tiny|v1  skipped (a blocking check or a step upstream failed)",
        "  ✗ search_index         tiny|v1  disk full: [Errno 28]",
    ]


def test_live_reporter_draws_counts_rate_and_eta_on_a_terminal():
    """The bar itself, rendered by rich to a pseudo-terminal."""
    master, slave = pty.openpty()
    stream = open(slave, "w", encoding="utf-8", closefd=True)  # noqa: SIM115
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    r = progress.LiveReporter(stream, owned=True)
    r.line("▶ tiny: parse")
    r.step_started("parsed_blocks", "tiny")
    r.step_progress("parsed_blocks", "tiny", ProgressUpdate("parse", 7, 10, "documents", 3.5))
    time.sleep(0.6)  # a refresh or two
    r.step_finished("parsed_blocks", "tiny", "ok", 5.0)
    # a batch step that reports and ends within one tick (4 a second): its counts are drawn
    r.step_started("child_chunks[b0]", "tiny")
    r.step_progress("child_chunks[b0]", "tiny", ProgressUpdate("chunk", 2, 2, "documents", 0.1))
    r.step_finished("child_chunks[b0]", "tiny", "ok", 0.1)
    r.close()
    time.sleep(0.3)
    os.close(master)
    out = b"".join(chunks).decode("utf-8", "replace")
    assert "7/10 documents · 2.0/s · ETA 0:02" in out and "━" in out
    assert "✓ parsed_blocks" in out and "\x1b[?25h" in out  # the cursor shown again
    assert "2/2 documents · 20/s · in 0.1s" in out


# ----------------------------------------------------------------- real `corpus index` runs


def _timed_run(*args: str) -> tuple[int, list[tuple[float, str]], str, float]:
    """Run a command; its stderr lines with the time each arrived, its stdout, its end."""
    t0 = time.monotonic()
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO) as p:
        assert p.stdout is not None and p.stderr is not None
        stdout = p.stdout
        out: list[str] = []
        drain = threading.Thread(target=lambda: out.append(stdout.read()), daemon=True)
        drain.start()
        lines = [(time.monotonic() - t0, line.rstrip("\n")) for line in p.stderr]
        rc = p.wait(timeout=900)
        drain.join()
    return rc, lines, "".join(out), time.monotonic() - t0


def _arrival(lines: list[tuple[float, str]], pattern: str) -> tuple[float, float]:
    """When the line of a finished step arrived, and the step's own duration."""
    for t, line in lines:
        m = re.search(rf"✓ {pattern}\s+\S+\s+([\d.]+)s", line)
        if m:
            return t, float(m.group(1))
    raise AssertionError(f"no ✓ {pattern} line in {[s for _, s in lines]}")


# One paragraph four times: the children repeat a text within one document, which the
# child_duplicate_text check (severity WARN) reports; the version is still built.
REPEATED = "Rotate the appliance keys every ninety days and keep the old key until every snapshot is re-encrypted."


@pytest.mark.slow
def test_corpus_index_streams_step_lines_and_names_its_warnings(tiny_kb, corpus_home):
    (tiny_kb / "keys.txt").write_text("\n\n".join([REPEATED] * 4) + "\n", encoding="utf-8")
    rc, lines, stdout, _ = _timed_run(str(BIN / "corpus"), "index", "--kb", "tiny")
    assert rc == 0, "\n".join(s for _, s in lines)
    text = [s for _, s in lines]
    # Each step's line arrives as the step ends: the lines of one run are as far apart as
    # the steps between them took (before: printed together when the job ended).
    t_parents, _ = _arrival(lines, "parent_blocks")
    t_search, _ = _arrival(lines, "search_index")
    between = sum(_arrival(lines, s)[1] for s in ("child_chunks", "chunk_embeddings", "search_index"))
    assert t_search - t_parents >= 0.6 * between, text
    t_docs, _ = _arrival(lines, "documents")
    t_chunk_job = next(t for t, s in lines if s.startswith("▶ tiny: chunk, embed, index"))
    t_parsed, parse_secs = _arrival(lines, "parsed_blocks")
    assert t_docs <= t_parsed - 0.6 * parse_secs and t_parsed < t_chunk_job
    assert not any("\x1b[" in s for s in text)  # not a terminal: no bars, no escape codes
    # A failed WARN check is a warning while it happens and in the summary; never ✗.
    [summary_line] = [s for s in stdout.splitlines() if s.startswith("tiny @ ")]
    warned = [s for s in text if "check " in s]
    assert warned and all(s.lstrip().startswith("⚠ check ") and s.endswith("(WARN)") for s in warned), text
    names = [re.search(r"check (\S+) on (\S+)", s).groups() for s in warned]  # type: ignore[union-attr]
    assert ("child_duplicate_text", "child_chunks") in names
    m = re.search(r": ok, (\d+) warnings? \(([^)]*)\) — ", summary_line)
    assert m, summary_line
    assert int(m.group(1)) == len(names) and m.group(2) == ", ".join(f"{c} on {a}" for c, a in names)
    assert "✗" not in stdout and "✗" not in "\n".join(text)
    for check, asset in names:
        assert re.search(rf"^    ⚠ check {check} \(WARN\) on {asset} tiny\|\S+: .+", stdout, re.M), stdout

    # --json: stdout is the JSON and nothing else; the step lines stay on stderr, still without bars
    rc, lines, stdout, _ = _timed_run(str(BIN / "corpus"), "index", "--kb", "tiny", "--force", "--json")
    assert rc == 0, "\n".join(s for _, s in lines)
    [summary] = json.loads(stdout)
    assert summary["status"] == "ok" and summary["warnings"] == len(names)
    assert {c["check"] for c in summary["checks_failed"]} == {c for c, _ in names}
    assert "✓" not in stdout and "documents ·" not in stdout
    assert any("✓ chunk_embeddings" in s for _, s in lines)
    assert not any("\x1b[" in s for _, s in lines)


@pytest.mark.slow
def test_corpus_index_on_a_terminal_draws_bars_and_gives_the_terminal_back(tiny_kb, corpus_home):
    pid, fd = pty.fork()
    if pid == 0:  # the child: corpus index with a terminal on stdin, stdout and stderr
        os.environ.update(COLUMNS="160", TERM="xterm")
        os.chdir(REPO)
        os.execv(str(BIN / "corpus"), [str(BIN / "corpus"), "index", "--kb", "tiny"])
    out = bytearray()
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1.0)
        if not ready:
            continue
        try:
            data = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        out += data
    _, status = os.waitpid(pid, 0)
    text = out.decode("utf-8", "replace")
    assert os.waitstatus_to_exitcode(status) == 0, text[-3000:]
    assert re.search(r"\d+/2 documents · \S+ · (ETA|in) ", text), text[-3000:]  # counts, rate, ETA or time taken
    assert "━" in text and "✓ chunk_embeddings" in text
    assert "\x1b[?25h" in text  # the cursor is shown again
    assert re.search(r"tiny @ \S+: ok", text)
    # the run's compute logs hold what the steps printed, not corpus's own lines
    for log in (corpus_home / "dagster").rglob("compute_logs/*.err"):
        assert "✓" not in log.read_text(encoding="utf-8", errors="replace"), log


def test_progress_still_reaches_stderr_while_a_run_redirects_it(tmp_path, monkeypatch):
    """What Dagster does while a run executes in process (fd 2 pointed at the run's
    compute log): the reporter's private duplicate still writes where stderr was."""
    r, w = os.pipe()
    stderr = open(w, "w", encoding="utf-8")  # noqa: SIM115 - stands for the process's stderr
    monkeypatch.setattr(sys, "stderr", stderr)
    reporter = progress.open_reporter(live=False)
    log = open(tmp_path / "compute.err", "w", encoding="utf-8")  # noqa: SIM115
    saved = os.dup(w)
    os.dup2(log.fileno(), w)  # the run's capture
    try:
        reporter.step_finished("documents", "tiny", "ok", 0.1)
    finally:
        os.dup2(saved, w)
        os.close(saved)
        log.close()
    reporter.close()
    stderr.close()
    with os.fdopen(r, encoding="utf-8") as pipe:
        assert pipe.read() == "  ✓ documents            tiny    0.10s\n"
    assert (tmp_path / "compute.err").read_text(encoding="utf-8") == ""
