"""Measuring spans of one document in characters or in model tokens.

``SizeMeter(text, "tokens", counter)`` tokenizes the whole text once; measuring any span
afterwards is two binary searches over the tokens' start offsets.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Literal

from corpus_pipeline.embedding.tokens import TokenCounter
from corpus_pipeline.errors import ConfigError

SizeUnit = Literal["chars", "tokens"]


@dataclass(frozen=True)
class SizeBound:
    """The largest (and, where declared, the smallest) piece a configured strategy makes,
    in one unit; ``what`` says where the number comes from (``"RECURSIVE max_chars"``)."""

    unit: SizeUnit
    max: int
    min: int | None = None
    what: str = ""


class SizeMeter:
    def __init__(self, text: str, unit: str = "chars", counter: TokenCounter | None = None) -> None:
        self.text = text
        self.unit = unit
        if unit == "tokens":
            if counter is None:
                raise ConfigError("size_unit = 'tokens' needs a token counter (the KB's embedding model)")
            self._starts = counter.token_starts(text)
        elif unit != "chars":
            raise ConfigError(f"size_unit = {unit!r} is not allowed; choose 'chars' or 'tokens'.")

    def measure(self, start: int, end: int) -> int:
        if self.unit == "chars":
            return end - start
        return bisect_left(self._starts, end) - bisect_left(self._starts, start)

    def advance(self, start: int, end: int, size: int) -> int:
        """The furthest position ``p`` in ``(start, end]`` with ``measure(start, p) <= size``
        (at least one character further than ``start``)."""
        if self.unit == "chars":
            return min(end, start + max(1, size))
        i = bisect_left(self._starts, start)
        j = i + size  # the first token that must not be included
        if j >= len(self._starts) or self._starts[j] >= end:
            return end
        return max(start + 1, self._starts[j])

    def retreat(self, start: int, end: int, size: int) -> int:
        """The earliest position ``p`` in ``[start, end)`` with ``measure(p, end) <= size``."""
        if size <= 0:
            return end
        if self.unit == "chars":
            return max(start, end - size)
        j = bisect_left(self._starts, end)
        i = j - size
        lo = bisect_left(self._starts, start)
        if i <= lo:
            return start
        return self._starts[i]
