"""Boundaries in Chinese and English text, as spans ``(start, end)`` of one source string.

Every function takes the whole source and a window ``[start, end)`` and returns spans
inside it (or positions), trimmed of surrounding whitespace, in order. Working on spans,
never on copies, is what keeps every chunk's offsets exact.

Sentence rules (the ones users notice):

- ``。！？；…`` end a sentence wherever they are; ASCII ``! ? ;`` and ``.`` only when
  whitespace or the end of the text follows (so ``3.14``, ``a.b/c.md`` and
  ``https://x.org/a.html`` never end one);
- a ``.`` after an abbreviation (``e.g.``, ``Dr.``, ``U.S.``), an initial (``J. Smith``)
  or a list number at the start of a line (``1. Install``) does not end a sentence;
- closing quotes and brackets (``”」）)]``) stay with the sentence they close.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

Span = tuple[int, int]

_WS = " \t\r\n\f\v\u3000\u00a0\ufeff"
_WS_SET = frozenset(_WS)

# Characters that close a sentence's quote or bracket and stay with the sentence.
_CLOSERS = "\"'”’」』）)]】》〉"
_C = re.escape(_CLOSERS)
# Candidates: a run of enders plus closers (a plain character class first, so the regex
# engine scans fast); ``_accepts`` then applies the rules: CJK / full-width enders count on
# their own, ASCII ``! ? ; .`` need whitespace or the end of the text after the run.
_SENT_END = re.compile(r"[。！？；…!?;.]+[" + _C + r"]*")
# The same runs, minus most of those ``_accepts`` would refuse, filtered in C: a run holding
# a CJK ender (the whole ``_SENT_END`` run), or an ASCII run followed by whitespace or by
# the end of the searched window. Each match is exactly the ``_SENT_END`` match at the same
# place (a refused run's suffixes are followed by the same character, so they fail too), and
# ``_accepts`` still decides; loops that skip refused runs give the same result with either.
_E = "。！？；…!?;."
_SENT_CAND = re.compile(
    # one ender first (a character class, so the engine scans fast), then: a CJK ender
    # already seen; or a CJK ender further in the run; or an ASCII-only run + closers
    # followed by whitespace or the window's end.
    r"[" + _E + r"](?:(?<=[。！？；…])[" + _E + r"]*[" + _C + r"]*"
    r"|[!?;.]*[。！？；…][" + _E + r"]*[" + _C + r"]*"
    r"|[!?;.]*[" + _C + r"]*(?=[ \t\r\n\f\v\u3000\u00a0\ufeff]|\Z))"
)
_CJK_ENDERS = frozenset("。！？；…")
_ABBREVIATIONS = frozenset(
    [
        "e.g",
        "i.e",
        "etc",
        "vs",
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "sr",
        "jr",
        "st",
        "no",
        "nos",
        "fig",
        "figs",
        "eq",
        "eqs",
        "al",
        "approx",
        "dept",
        "est",
        "inc",
        "ltd",
        "co",
        "corp",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
        "ref",
        "refs",
        "vol",
        "p",
        "pp",
        "ch",
        "sec",
        "cf",
        "ca",
        "resp",
        "viz",
    ]
)
_DOTTED_LETTERS = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]$")  # U.S / e.g / i.e
_PARA_SEP = re.compile(r"\n[ \t\r\f\v\u3000]*\n\s*")
_LINE_SEP = re.compile(r"\n\s*")
_WORD_SEP = re.compile(r"\s+")
_NON_WS = re.compile(r"\S")


def trim(text: str, start: int, end: int) -> Span:
    """Shrink ``[start, end)`` past leading and trailing whitespace."""
    ws = _WS_SET
    while start < end and text[start] in ws:
        start += 1
    while end > start and text[end - 1] in ws:
        end -= 1
    return start, end


def skip_ws(text: str, pos: int, end: int) -> int:
    """The first non-whitespace position in ``[pos, end)``, or ``end``."""
    if pos < end and text[pos] not in _WS_SET:
        return pos
    m = _NON_WS.search(text, pos, end)
    return m.start() if m else end


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


_LETTERS_DOT = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz."


def is_sentence_dot(text: str, dot: int, start: int = 0) -> bool:
    """Whether the lone ``.`` at ``dot`` ends a sentence (not an abbreviation, an initial
    or a list number at the start of a line)."""
    # The word before the dot: what r"([A-Za-z][A-Za-z.]*|\d+)$" finds in the 12 characters
    # before it (a single newline just before the dot skipped, as "$" does), with string
    # methods at a third of the regex's cost: this runs for most chunks' overlaps.
    lo = max(start, dot - 12)
    end = dot - 1 if dot > lo and text[dot - 1] == "\n" else dot
    seg = text[lo:end]
    word = seg[len(seg.rstrip(_LETTERS_DOT)) :].lstrip(".")
    if not word:
        k = len(seg)  # r"\d+": any Unicode decimal digit
        while k and seg[k - 1].isdecimal():
            k -= 1
        word = seg[k:]
        if not word:
            return True
        # "1. Install" / "  12. Foo" at the start of a line is a list marker.
        i = end - len(word) - 1
        while i >= start and text[i] in " \t":
            i -= 1
        return not (i < start or text[i] == "\n")
    if len(word) == 1 and word.isupper():  # an initial: "J. Smith"
        return False
    low = word.lower()
    if low in _ABBREVIATIONS or low.rstrip(".") in _ABBREVIATIONS:
        return False
    return not _DOTTED_LETTERS.search(word)


def _accepts(text: str, m: re.Match[str]) -> bool:
    """Whether the candidate run ``m`` of ``_SENT_END`` really ends a sentence."""
    run = m.group()
    if run[0] in _CJK_ENDERS or (len(run) > 1 and not _CJK_ENDERS.isdisjoint(run)):
        return True
    e = m.end()
    if e < len(text) and text[e] not in _WS_SET:
        return False
    if run[0] == "." and (len(run) == 1 or run[1] != "."):
        return is_sentence_dot(text, m.start())
    return True


def sentence_ends(text: str, start: int = 0, end: int | None = None) -> Iterator[int]:
    """Positions just after each sentence end in ``[start, end)`` (closers included)."""
    end = len(text) if end is None else end
    for m in _SENT_CAND.finditer(text, start, end):
        if _accepts(text, m):
            yield m.end()


def last_sentence_end(text: str, lo: int, hi: int, limit: int) -> int:
    """The last sentence end ``p`` with ``lo < p <= hi``, searching text up to ``limit``
    (``limit >= hi`` lets an end right at ``hi`` see what follows it); -1 if none."""
    # The candidates come from C in one pass; the (costlier) rules are asked of the last ones
    # first, so usually only once.
    for m in reversed(list(_SENT_CAND.finditer(text, lo, limit))):
        e = m.end()
        if lo < e <= hi and _accepts(text, m):
            return e
    return -1


def first_sentence_start(text: str, lo: int, hi: int) -> int:
    """The first position in ``[lo, hi)`` where a sentence starts after a sentence end
    that lies in ``[lo, hi)``; -1 if none."""
    pos = lo
    while True:
        m = _SENT_CAND.search(text, pos, hi)
        if m is None:
            return -1
        if _accepts(text, m):
            s = skip_ws(text, m.end(), hi)
            return s if s < hi else -1
        pos = m.end()


def sentences(text: str, start: int = 0, end: int | None = None) -> list[Span]:
    """Sentence spans (see the module docstring for the rules)."""
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
        s = skip_ws(text, cut, end)
        if s < end:
            yield s


def is_cjk(ch: str) -> bool:
    o = ord(ch)
    return 0x3400 <= o <= 0x9FFF or 0xF900 <= o <= 0xFAFF or 0x20000 <= o <= 0x2FFFF or 0x3040 <= o <= 0x30FF


_CJK_RE = re.compile(r"[\u3400-\u9fff\uf900-\ufaff\u3040-\u30ff]")


def cjk_ratio(text: str) -> float:
    """Share of CJK characters among the non-whitespace characters of ``text``."""
    non_ws = len(text) - sum(text.count(c) for c in " \n\t\r")
    if non_ws <= 0:
        return 0.0
    return len(_CJK_RE.findall(text)) / non_ws
