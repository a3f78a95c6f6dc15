"""Boundaries in Chinese and English text, as spans ``(start, end)`` of one source string.

Every function takes the whole source and a window ``[start, end)`` and returns spans
inside it, trimmed of surrounding whitespace, in order. Working on spans (not copies)
is what keeps every chunk's offsets exact.
"""

from __future__ import annotations

import re
from typing import Iterator

Span = tuple[int, int]

_WS = " \t\r\n\f\v\u3000\u00a0\ufeff"

# Characters that close a sentence's quote or bracket and stay with the sentence.
_CLOSERS = "\"'”’」』）)]】》〉"
# Chinese / full-width enders count on their own; ASCII ! ? ; need a space or the end after
# them, and "." needs that too plus the checks in _is_sentence_dot.
_SENT_END = re.compile(
    r"(?:[。！？；…]+|[!?;]+(?=[" + re.escape(_CLOSERS) + r"]*(?:\s|$))|\.(?=[" + re.escape(_CLOSERS)
    + r"]*(?:\s|$)))[" + re.escape(_CLOSERS) + r"]*"
)
_ABBREVIATIONS = frozenset(
    "e.g i.e etc vs mr mrs ms dr prof sr jr st no fig figs eq eqs al approx dept est inc "
    "ltd co corp jan feb mar apr jun jul aug sep sept oct nov dec ref refs vol p pp ch sec".split()
)
_WORD_BEFORE = re.compile(r"([A-Za-z][A-Za-z.]*)$")
_PARA_SEP = re.compile(r"\n[ \t\r\f\v\u3000]*\n\s*")
_LINE_SEP = re.compile(r"\n\s*")
_WORD_SEP = re.compile(r"\s+")


def trim(text: str, start: int, end: int) -> Span:
    """Shrink ``[start, end)`` past leading and trailing whitespace."""
    while start < end and text[start] in _WS:
        start += 1
    while end > start and text[end - 1] in _WS:
        end -= 1
    return start, end


def _split_on(pattern: re.Pattern[str], text: str, start: int, end: int) -> list[Span]:
    spans: list[Span] = []
    pos = start
    for m in pattern.finditer(text, start, end):
        s, e = trim(text, pos, m.start())
        if e > s:
            spans.append((s, e))
        pos = m.end()
    s, e = trim(text, pos, end)
    if e > s:
        spans.append((s, e))
    return spans


def paragraphs(text: str, start: int = 0, end: int | None = None) -> list[Span]:
    """Spans separated by blank lines."""
    return _split_on(_PARA_SEP, text, start, len(text) if end is None else end)


def lines(text: str, start: int = 0, end: int | None = None) -> list[Span]:
    """Non-blank lines."""
    return _split_on(_LINE_SEP, text, start, len(text) if end is None else end)


def words(text: str, start: int = 0, end: int | None = None) -> list[Span]:
    """Runs of non-whitespace."""
    return _split_on(_WORD_SEP, text, start, len(text) if end is None else end)


def _is_sentence_dot(text: str, dot: int, start: int) -> bool:
    """Whether the ``.`` at ``dot`` ends a sentence (not a decimal, abbreviation or initial)."""
    m = _WORD_BEFORE.search(text, max(start, dot - 12), dot)
    if m:
        word = m.group(1).lower().rstrip(".")
        if word in _ABBREVIATIONS:
            return False
        if len(word) == 1 and m.group(1).isupper():  # an initial: "J. Smith"
            return False
        if "." in word:  # "e.g." / "U.S." style
            return False
    return True


def sentence_ends(text: str, start: int = 0, end: int | None = None) -> Iterator[int]:
    """Positions just after each sentence end in ``[start, end)`` (closers included)."""
    end = len(text) if end is None else end
    for m in _SENT_END.finditer(text, start, end):
        token = m.group(0)
        if token[0] == "." and not _is_sentence_dot(text, m.start(), start):
            continue
        yield m.end()


def sentences(text: str, start: int = 0, end: int | None = None) -> list[Span]:
    """Sentence spans. Decimals (3.14), URLs and file names (a.b/c.md), abbreviations
    (e.g., Dr.) do not end a sentence; closing quotes and brackets stay with it; Chinese
    enders (。！？；) end one without a following space."""
    end = len(text) if end is None else end
    spans: list[Span] = []
    pos = start
    for cut in sentence_ends(text, start, end):
        s, e = trim(text, pos, cut)
        if e > s:
            spans.append((s, e))
        pos = cut
    s, e = trim(text, pos, end)
    if e > s:
        spans.append((s, e))
    return spans


def sentence_starts(text: str, start: int, end: int) -> Iterator[int]:
    """Positions in ``[start, end)`` where a sentence begins after a sentence end."""
    for cut in sentence_ends(text, start, end):
        s, _ = trim(text, cut, end)
        if s < end:
            yield s
