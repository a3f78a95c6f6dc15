"""Checking LLM output against the source it claims to come from (LLM output is untrusted).

* ``find_verbatim``: where a returned piece lies in the source, exactly or up to
  whitespace (a model often re-flows line breaks), so that ``source[start:end]`` is the
  piece as the source has it: exact offsets, no ``str.find`` guesswork on normalized text.
* ``align_derived``: the span a rewritten piece most plausibly came from, and how much of
  it the source supports (shared runs of characters); None when it is not supported.
* ``unit_support`` / ``numbers_supported``: whether a rewritten fact (a proposition)
  uses the source's words and only the source's numbers: the cheap guard against
  hallucinated or injected text.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

_UNITS = re.compile(r"[A-Za-z0-9]+|[\u3400-\u9fff\uf900-\ufaff]")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
MIN_RUN = 3  # shorter shared runs are coincidence, not support


def find_verbatim(source: str, piece: str, start: int, end: int) -> tuple[int, int] | None:
    """The first span of ``source[start:end]`` equal to ``piece`` (stripped), or equal up to
    whitespace (any run of whitespace, or none, between its characters); None otherwise."""
    piece = piece.strip()
    if not piece:
        return None
    i = source.find(piece, start, end)
    if i >= 0:
        return i, i + len(piece)
    chars = [c for c in piece if not c.isspace()]
    if not chars:
        return None
    pattern = re.compile(r"\s*".join(re.escape(c) for c in chars))
    m = pattern.search(source, start, end)
    return (m.start(), m.end()) if m else None


def align_derived(
    source: str, piece: str, start: int, end: int, *, min_support: float = 0.6
) -> tuple[int, int, float] | None:
    """``(span_start, span_end, support)`` of a rewritten ``piece`` in ``source[start:end]``:
    the span from the first to the last shared run of at least ``MIN_RUN`` characters, and
    the share of the piece's characters in those runs. None below ``min_support``."""
    piece = piece.strip()
    if not piece or end <= start:
        return None
    # A rewritten piece starts near where the previous one ended: look a bounded way ahead.
    window_end = min(end, start + 2 * len(piece) + 500)
    window = source[start:window_end]
    sm = SequenceMatcher(None, window, piece, autojunk=False)
    runs = [m for m in sm.get_matching_blocks() if m.size >= MIN_RUN]
    if not runs:
        return None
    shared = sum(m.size for m in runs)
    support = shared / max(1, sum(1 for c in piece if not c.isspace()))
    if support < min_support:
        return None
    a, b = start + runs[0].a, start + runs[-1].a + runs[-1].size
    while a < b and source[a].isspace():
        a += 1
    while b > a and source[b - 1].isspace():
        b -= 1
    return (a, b, min(1.0, support)) if b > a else None


def units(text: str) -> list[str]:
    """Words (Latin letters and digits, lower-cased) and single CJK characters."""
    return [u.lower() for u in _UNITS.findall(text)]


def unit_support(text: str, source: str) -> float:
    """The share of ``text``'s words (Latin) and characters (CJK) that occur in ``source``."""
    found = units(text)
    if not found:
        return 0.0
    known = set(units(source))
    return sum(1 for u in found if u in known) / len(found)


def numbers_supported(text: str, source: str) -> bool:
    """Every number in ``text`` (thousands separators ignored) occurs in ``source``."""
    flat = source.replace(",", "")
    return all(n.replace(",", "") in flat for n in _NUMBER.findall(text))
