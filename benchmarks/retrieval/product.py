"""The product as users meet it: ``corpus index`` and ``corpus eval`` as subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / ".venv" / "bin" / "corpus"

#: The environment of every run: offline, no telemetry, no remote vision / LLM, our own
#: CORPUS_HOME and a fresh SQLite Dagster instance inside it.
_OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "DO_NOT_TRACK": "1",
    "DAGSTER_DISABLE_TELEMETRY": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
_DROPPED_PREFIXES = ("DAGSTER_PG_", "CORPUS_TEST_PG_")
_DROPPED = ("OPENAI_BASE_URL", "CORPUS_VISION_MODEL")


#: ``--threads N``: torch / BLAS threads of every run (None: the libraries' default).
THREADS: int | None = None


def corpus_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_DROPPED_PREFIXES) and k not in _DROPPED}
    for k, v in _OFFLINE.items():
        env.setdefault(k, v)
    if THREADS is not None:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(THREADS)
    env["CORPUS_HOME"] = str(home)
    env["DAGSTER_HOME"] = str(home / "dagster")
    return env


def corpus_command() -> list[str]:
    return [str(CORPUS)] if CORPUS.exists() else ["corpus"]


@dataclass
class Run:
    """One CLI run: exit code, wall time, output."""

    args: list[str]
    returncode: int
    seconds: float
    stdout: str
    stderr: str
    parsed: Any = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None


def run_corpus(home: Path, *args: str, timeout: float | None = None) -> Run:
    """``corpus ARGS`` with ``CORPUS_HOME=home``, timed (wall clock, interpreter start included)."""
    cmd = [*corpus_command(), *args]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(
            cmd, env=corpus_env(home), cwd=REPO, capture_output=True, text=True, check=False, timeout=timeout
        )
    except subprocess.TimeoutExpired as exc:
        return Run(
            list(args), -1, time.perf_counter() - t0, "", str(exc.stderr or ""), error=f"timed out after {timeout} s"
        )
    secs = time.perf_counter() - t0
    run = Run(list(args), p.returncode, secs, p.stdout, p.stderr)
    try:
        run.parsed = json.loads(p.stdout) if p.stdout.strip() else None
    except json.JSONDecodeError:
        run.parsed = None
    if p.returncode != 0:
        run.error = f"`corpus {' '.join(args)}` exited {p.returncode}"
    elif run.parsed is None:
        run.error = f"`corpus {' '.join(args)}` printed no JSON"
    return run


def index(home: Path, kb: str, timeout: float | None = None) -> Run:
    """``corpus index --kb KB --json``; an error unless it exits 0 with the KB's status ok."""
    run = run_corpus(home, "index", "--kb", kb, "--json", timeout=timeout)
    summaries = run.parsed if isinstance(run.parsed, list) else []
    mine = next((s for s in summaries if isinstance(s, dict) and s.get("kb") == kb), None)
    run.extra["summary"] = mine
    if mine is not None and mine.get("status") != "ok":
        run.error = f"`corpus index` exited {run.returncode}, status {mine.get('status')!r}: {mine.get('error')}"
    elif run.ok and mine is None:
        run.error = "`corpus index --json` printed no summary for the KB"
    return run


def evaluate(home: Path, kb: str, timeout: float | None = None) -> Run:
    """``corpus eval --kb KB --json`` (per-question details included)."""
    run = run_corpus(home, "eval", "--kb", kb, "--json", timeout=timeout)
    if run.ok:
        versions = run.parsed.get("versions") if isinstance(run.parsed, dict) else None
        if not versions or "summary" not in versions[0]:
            run.error = "`corpus eval --json` printed no versions[0].summary"
    return run
