"""What the benchmarks record about the machine they ran on (shared by all three)."""

from __future__ import annotations

from pathlib import Path


def _proc_field(path: str, key: str) -> str | None:
    """The value after ``key:`` on the first line of ``/proc/<file>`` that starts with it."""
    try:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            if line.startswith(key):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_model() -> str:
    return _proc_field("/proc/cpuinfo", "model name") or "unknown"


def ram_gib() -> str:
    kb = _proc_field("/proc/meminfo", "MemTotal")
    return f"{int(kb.split()[0]) / 1048576:.1f} GiB" if kb else "unknown"
