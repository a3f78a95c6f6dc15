"""The step times ``corpus index`` prints to stderr (``corpus_pipeline.progress``), per step."""

from __future__ import annotations

import re

#: ``  ✓ child_chunks         tiny|p2-c2-…    2.91s``
_STEP = re.compile(r"^\s*✓\s+(\S+)\s+.*?\s([\d.]+)s\s*$")


#: ``  ✓ chunk_embeddings (plan) tiny|p2-c2-…    2.91s``: the step as printed, before the partition
_LABEL = re.compile(r"^\s*✓\s+(.+?)\s+\S*\|\S*\s")


def step_label(line: str) -> str | None:
    """The step a finished-step line names, as printed, its batches as one
    (``parsed_blocks [b3]`` → ``parsed_blocks [batch]``); None for any other line."""
    m = _LABEL.match(line)
    if not m:
        return None
    return re.sub(r"\[[^\]]*\]", "[batch]", m.group(1))


def step_seconds(stderr: str) -> dict[str, float]:
    """Seconds per step name (summed over partitions and batches), in the order first seen."""
    steps: dict[str, float] = {}
    for line in stderr.splitlines():
        m = _STEP.match(line)
        if m:
            steps[m.group(1)] = steps.get(m.group(1), 0.0) + float(m.group(2))
    return steps
