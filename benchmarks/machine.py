"""What the benchmarks record about the machine they ran on (shared by all of them)."""

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
    """The CPU's model name and, in brackets, its ``SIMD_FLAGS``: hosts that share a name
    ("AMD EPYC", "Intel Xeon Processor") differ by 2-3x in a model's speed with them."""
    return f"{_proc_field('/proc/cpuinfo', 'model name') or 'unknown'} ({cpu_features()})"


#: The instruction sets that decide how fast a model runs on the CPU (torch's and ONNX Runtime's
#: kernels pick by them, so the torch : ONNX ratio differs between hosts of the same "AMD EPYC").
SIMD_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8")


def cpu_features() -> str:
    """The ``SIMD_FLAGS`` this CPU has, as ``/proc/cpuinfo`` lists them ("unknown" elsewhere)."""
    flags = _proc_field("/proc/cpuinfo", "flags")
    if flags is None:
        return "unknown"
    have = set(flags.split())
    return " ".join(f for f in SIMD_FLAGS if f in have) or "none of " + " ".join(SIMD_FLAGS)


def ram_gib() -> str:
    kb = _proc_field("/proc/meminfo", "MemTotal")
    return f"{int(kb.split()[0]) / 1048576:.1f} GiB" if kb else "unknown"
