"""Whether a decoding reads as text, character by character: the test a legacy reading of bytes
that are not UTF-8 must pass (``textdecode.py``).

Statistical detectors judge a whole file: three stray bytes in 5 KB of ASCII read as "cp1252,
0.1% mess". Here every non-ASCII character must sit where such a character sits in real text:

- a letter inside a word of one script and one case pattern (``café``, ``Müller``, ``ÉTÉ``,
  ``Привет``). A Latin word of several letters has an ASCII letter too (Russian read as cp1252
  gives words of accented letters only); accented letters begin, end or make a word only where
  Western languages put them (``école``, ``perché``, ``à``; not ``ñ`` alone or ``ý`` last); rare
  letters (``ÿ þ ð``) never count. A letter whose removal (``thäe``) or replacement by another
  letter (``Bädy``) gives a word the text uses elsewhere is a stray byte;
- quotes with their partner nearby in the same paragraph and against a word (“x”, „x“, « x »),
  apostrophes in or after words (``don’t``, ``dogs’``), dashes between spaces or between
  words or numbers, ``€ £`` by a number, ``°`` after a number, ``²`` after a unit, a no-break
  space not inside a word...;
- CJK (Han, kana, Hangul, fullwidth forms) in runs of two or more, or alone but not glued to an
  ASCII letter (a stray byte read as a double-byte character swallows the letter after it);
  strictly, in runs of two or more not between ASCII letters, and no rare ideograph beyond the
  Basic Multilingual Plane; halfwidth katakana, private-use and C1 control characters never
  count.

``Assessment.reads_as_text`` asks for at least ``MIN_PLAUSIBLE`` such characters and
``MIN_SHARE`` of all non-ASCII ones (a real text has a few odd symbols).
``reads_as_text_strictly``, for ASCII text with a few other bytes, asks for every one of them,
and at least ``MIN_FEW``, or at least two unmistakable marks (an apostrophe inside a word, a
pair of quotes, a dash between spaces): fewer accented letters are no evidence of an encoding.
Measured in ``benchmarks/decoding/RESULTS.md``.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

MIN_PLAUSIBLE = 2
MIN_SHARE = 0.9
MIN_FEW = 4
#: How far (characters, same paragraph) a quote's partner may be.
_PAIR_SPAN = 300
#: Only the first characters are looked at (as ``textdecode`` does for control characters).
_SAMPLE = 200_000

_NON_ASCII = re.compile(r"[^\x00-\x7f]+")
_WORD = re.compile(r"[^\W\d_]{2,}")
_ASCII_LOWER = "abcdefghijklmnopqrstuvwxyz"
#: Never plausible: halfwidth katakana (CJK bytes read in the wrong CJK encoding), private use,
#: C1 controls, soft hyphen.
_SUSPECT = re.compile(r"[\uff61-\uff9f\ue000-\uf8ff\x80-\x9f\xad]")
_SCRIPTS = ("LATIN", "CYRILLIC", "GREEK", "ARMENIAN", "GEORGIAN", "HEBREW", "ARABIC", "THAI")
#: Letters of the Western code pages that almost never occur in Western text.
_RARE_LETTERS = frozenset("ÿŸþÞðÐƒ")
#: Accented letters that make a word alone (à, è, é, ó; Nordic å, ö, ø), begin one (école,
#: Über, índice, œuvre; not š, ý, ñ...) or end one (café, perché, può, aquí, Perú, você, daß).
_LATIN_ALONE = frozenset("àÀèéÉóåöø")
_LATIN_FIRST = frozenset("éÉêÊàÀâÂáÁíÍîÎóÓôÔúÚöÖüÜäÄçÇåÅøØæÆœŒ")
_LATIN_LAST = frozenset("éÉèÈàÀáÁíÍîÎóÓòÒùÙúÚêÊôÔâÂëËïÏüÜäÄöÖßãÃ")
#: The Russian words of one letter.
_CYRILLIC_ALONE = frozenset("авикосуяАВИКОСУЯ")
#: Quotes and the quotes they pair with (English “x”, German „x“ and »x«, French « x »).
_PARTNERS = {
    "“": "”„",
    "”": "“",
    "„": "“”",
    "‘": "’‚",
    "’": "‘",
    "‚": "‘’",
    "«": "»",
    "»": "«",
    "‹": "›",
    "›": "‹",
}


def _cjk(ch: str) -> bool:
    o = ord(ch)
    return (
        0x2E80 <= o <= 0x9FFF  # radicals, CJK punctuation, kana, bopomofo, Hangul compatibility, Han
        or 0xAC00 <= o <= 0xD7AF  # Hangul syllables
        or 0xF900 <= o <= 0xFAFF  # compatibility ideographs
        or 0xFE30 <= o <= 0xFE4F  # CJK compatibility forms
        or 0xFF01 <= o <= 0xFF60  # fullwidth forms
        or 0xFFE0 <= o <= 0xFFE6
        or 0x20000 <= o <= 0x3FFFF  # Han extensions
        or 0x1100 <= o <= 0x11FF  # Hangul jamo
    )


@functools.lru_cache(maxsize=4096)
def _script(ch: str) -> str:
    if ch.isascii():
        return "LATIN"
    name = unicodedata.name(ch, "")
    return next((s for s in _SCRIPTS if name.startswith(s)), "")


def _space(ch: str) -> bool:
    return ch == "" or ch.isspace()


def _alnum(ch: str) -> bool:
    return ch.isalnum()


def _digit(ch: str) -> bool:
    return ch.isdigit()


def _paired(text: str, i: int) -> bool:
    """The quote at ``i`` has a partner near it in the same paragraph."""
    before, after = text[max(0, i - _PAIR_SPAN) : i], text[i + 1 : i + 1 + _PAIR_SPAN]
    near = before[before.rfind("\n\n") + 1 :] + after.split("\n\n", 1)[0]
    return any(c in near for c in _PARTNERS[text[i]])


#: What an apostrophe inside a word joins: English endings, French and Italian elisions.
_AFTER_APOSTROPHE = frozenset({"s", "t", "ll", "re", "ve", "d", "m"})
_BEFORE_APOSTROPHE = frozenset({"l", "d", "j", "n", "s", "c", "m", "t", "qu", "jusqu", "lorsqu", "puisqu"})
_BEFORE_APOSTROPHE |= {"un", "dell", "dall", "nell", "sull", "all", "quell", "quest"}


def _apostrophe(text: str, i: int) -> tuple[bool, bool]:
    """(in place, unmistakable) for ’ between a letter or digit and a letter: in place before
    a lower-case letter or after one capital (O’Brien); unmistakable in a contraction or an
    elision (it’s, we’ll, l’heure, dell’arte)."""
    start, end = i, i + 1
    while start > 0 and text[start - 1].isalpha():
        start -= 1
    while end < len(text) and text[end].isalpha():
        end += 1
    before, after = text[start:i], text[i + 1 : end]
    in_place = after[:1].islower() or (len(before) == 1 and before.isupper()) or text[i - 1].isdigit()
    return in_place, in_place and (after.lower() in _AFTER_APOSTROPHE or before.lower() in _BEFORE_APOSTROPHE)


def _letters_around(text: str, i: int) -> int:
    """The fewer of the letters just before and just after ``i``."""
    before = after = 0
    while before < i and text[i - 1 - before].isalpha():
        before += 1
    while i + 1 + after < len(text) and text[i + 1 + after].isalpha():
        after += 1
    return min(before, after)


def _mark(text: str, i: int, p: str, n: str) -> tuple[bool, bool]:
    """(in place, unmistakable) for a quote, apostrophe, dash or ellipsis at ``i``; (False,
    False) for any other character."""
    ch = text[i]
    if ch == "’":
        if _alnum(p) and n.isalpha():
            return _apostrophe(text, i)  # don’t, l’heure, O’Brien, 1990’s
        if not _space(p):
            return not _alnum(n), _paired(text, i)  # dogs’, ‘x’
        return _digit(n), False  # ’90s
    if ch in _PARTNERS:
        against_word = not (_alnum(p) and _alnum(n)) and (ch in "«»" or not (_space(p) and _space(n)))
        ok = against_word and _paired(text, i)
        return ok, ok
    if ch == "–":  # a – b, 10–20, fecal–oral; not b–ilding
        between = (_space(p) and _space(n)) or (_digit(p) and _digit(n))
        return between or (_letters_around(text, i) >= 2), between
    if ch == "—":
        return _space(p) or _space(n) or (_alnum(p) and _alnum(n)), _space(p) and _space(n)
    if ch == "…":
        return not (_alnum(p) and _alnum(n)), p.isalpha() and _space(n)
    return False, False


#: Other punctuation and symbols: where each may sit, given the characters before and after it.
_PLACES: dict[str, Callable[[str, str], bool]] = {}
for _chars, _rule in (
    ("•", lambda p, n: _space(p) and _space(n)),
    ("·", lambda p, n: (_space(p) and _space(n)) or (p in "lL" and n in "lL")),  # a · b, col·lecció
    ("€£¥¢", lambda p, n: _digit(p) or _digit(n) or (_space(p) and _space(n))),
    ("°", lambda p, n: _digit(p) or (_space(p) and _digit(n)) or (p.isalpha() and not n.isalpha())),  # 5°, n°3
    ("‰", lambda p, n: _digit(p)),
    ("©", lambda p, n: not _alnum(p) and (_space(n) or _digit(n))),
    ("®™", lambda p, n: not _space(p) and not _alnum(n)),
    ("§¶№", lambda p, n: _space(n) or _digit(n)),
    ("±×÷", lambda p, n: _digit(p) or _digit(n) or (_space(p) and _space(n))),
    ("½¼¾", lambda p, n: _digit(p) or _digit(n)),
    ("¿¡", lambda p, n: _space(p) and n.isupper()),
    ("µ", lambda p, n: n.isalpha() and (_space(p) or _digit(p))),
    ("ªº", lambda p, n: _digit(p)),
    ("†‡", lambda p, n: not _space(p) and not _alnum(n)),
):
    for _ch in _chars:
        _PLACES[_ch] = _rule


def _superscript(text: str, i: int, n: str) -> bool:
    """² ³ ¹ after a number or a unit of up to three letters: 10², m², cm³."""
    start = i
    while start > 0 and text[start - 1].isalnum():
        start -= 1
    return 0 < i - start <= 3 and not _alnum(n)


#: Frequent English words: a letter whose removal leaves one of them is a stray byte even in a
#: short text (thäe, itès). Not used for replacements: wäre would give "were".
_FREQUENT = """\
the and for are but not you all any can had her was one our out day get has him his how new
now old see two way who did its let put say she too use that with have this will your from
they know want been good much some time very when come here just like long make many more
only over such take than them well were what which there their would about could other these
first after where those should because each into also then data file code used using value
type function return example string number name list test error
"""
_COMMON_WORDS = frozenset(_FREQUENT.split())


def _stray_in_word(word: str, at: int, ascii_words: frozenset[str]) -> bool:
    """The letter at ``at`` in an otherwise ASCII word is a stray byte when taking it out
    (thäe) gives a frequent English word or a word the text has elsewhere, or putting
    another letter than its own base letter in its place (Bädy) gives a word the text has
    elsewhere (Body); words with real accents rarely do (café, naïve, Müller)."""
    inside = 0 < at < len(word) - 1
    rest = word[:at] + word[at + 1 :]
    if not rest.isascii() or len(rest) < (3 if inside else 4):
        return False
    if rest.lower() in ascii_words or rest.lower() in _COMMON_WORDS:
        return True
    if not inside or len(word) < 4:
        return False
    base = unicodedata.normalize("NFD", word[at])[0].lower()
    head, tail = word[:at].lower(), word[at + 1 :].lower()
    return any(head + c + tail in ascii_words for c in _ASCII_LOWER if c != base)


def _plausible_latin(word: str, at: int, ascii_words: frozenset[str] | None) -> bool:
    """An accented letter in a word of Latin script; with ``ascii_words`` (strict), of Western
    European text in particular."""
    ch = word[at]
    if len(word) > 1 and not any(c.isascii() for c in word):
        return False  # Cyrillic or Greek read in a Latin code page: words of accented letters only
    if ascii_words is None:
        return True
    if len(word) == 1:
        return ch in _LATIN_ALONE
    if (at == 0 and ch not in _LATIN_FIRST) or (at == len(word) - 1 and ch not in _LATIN_LAST):
        return False
    return not _stray_in_word(word, at, ascii_words)


def _touches_digit(text: str, start: int, end: int) -> bool:
    """A word glued to digits: part of a hash or an identifier (d3a1çfaa0), not prose."""
    return (start > 0 and text[start - 1].isdigit()) or (end < len(text) and text[end].isdigit())


def _plausible_letter(text: str, i: int, ascii_words: frozenset[str] | None, seen: dict[tuple[str, int], bool]) -> bool:
    start, end = i, i + 1
    while start > 0 and text[start - 1].isalpha():
        start -= 1
    while end < len(text) and text[end].isalpha():
        end += 1
    if ascii_words is not None and _touches_digit(text, start, end):
        return False
    key = (text[start:end], i - start)
    if key not in seen:  # words recur: judge each once
        seen[key] = _plausible_in_word(*key, ascii_words)
    return seen[key]


def _plausible_in_word(word: str, at: int, ascii_words: frozenset[str] | None) -> bool:
    ch = word[at]
    script = _script(ch)
    if ch in _RARE_LETTERS or not script:
        return False
    if any(_script(c) != script for c in word):
        return False
    if script == "LATIN" and not _plausible_latin(word, at, ascii_words):
        return False
    if script == "CYRILLIC" and len(word) == 1 and ch not in _CYRILLIC_ALONE:
        return False
    cased = [c for c in word if c.isupper() or c.islower()]
    return (
        not cased
        or all(c.islower() for c in cased)
        or all(c.isupper() for c in cased)
        or (word[0].isupper() and all(c.islower() for c in cased[1:]))
    )


def _plausible_char(
    text: str, i: int, p: str, n: str, ascii_words: frozenset[str] | None, seen: dict[tuple[str, int], bool]
) -> bool:
    ch = text[i]
    if _SUSPECT.match(ch):
        return False
    place = _PLACES.get(ch)
    if place is not None:
        return place(p, n)
    if ch in "¹²³":
        return _superscript(text, i, n)
    if ch in "\u00a0\u2009\u202f":  # no-break and thin spaces: 10\u00a0kg, mot\u00a0:, %d\u00a0fichiers; not in a word
        return not (p.isalpha() and n.isalpha() and i > 1 and text[i - 2].isalpha())
    if unicodedata.category(ch) == "Mn":  # a combining accent (cp1258) goes on a letter
        return p.isalpha()
    if ch.isalpha():
        return _plausible_letter(text, i, ascii_words, seen)
    return False


def _plausible_cjk(ch: str, run: int, glued: bool, before: str, after: str, strict: bool) -> bool:
    """A CJK character in a run of ``run``: two or more, or alone but not glued to an ASCII
    letter; ``strict``, in a run of two or more, not between two ASCII letters, and in the
    Basic Multilingual Plane outside the compatibility ideographs (stray bytes read as GB18030
    four-byte sequences give rare ones)."""
    if _SUSPECT.match(ch):
        return False
    if not strict:
        return run >= 2 or not glued
    between = before.isascii() and before.isalpha() and after.isascii() and after.isalpha()
    return run >= 2 and not between and ord(ch) < 0xF900


@dataclass(frozen=True)
class Assessment:
    """The non-ASCII characters of a decoding: how many, how many sit where they belong, and
    how many of those are unmistakable marks (an apostrophe inside a word, a quote with its
    partner, a dash between spaces or numbers, an ellipsis after a word)."""

    total: int
    plausible: int
    marks: int

    def reads_as_text(self) -> bool:
        """Nearly all non-ASCII characters in place, and at least two of them."""
        return self.plausible >= MIN_PLAUSIBLE and self.plausible >= MIN_SHARE * self.total

    def reads_as_text_strictly(self) -> bool:
        """Every non-ASCII character in place, and enough of them to be evidence: at least
        ``MIN_FEW``, or two or more that are all unmistakable marks."""
        return (
            self.total > 0
            and self.plausible == self.total
            and (self.total >= MIN_FEW or (self.total >= MIN_PLAUSIBLE and self.marks == self.total))
        )


def assess(text: str, *, strict: bool = False) -> Assessment:
    """Where the non-ASCII characters of ``text`` (its first 200,000 characters) sit; ``strict``
    adds, for accented Latin letters, the checks made for ASCII text with a few other bytes:
    where Western words put them, and no stray byte in a word the text uses elsewhere."""
    text = text[:_SAMPLE]
    ascii_words = frozenset(w.lower() for w in _WORD.findall(text) if w.isascii()) if strict else None
    seen: dict[tuple[str, int], bool] = {}
    good = total = marks = 0
    for run in _NON_ASCII.finditer(text):
        s, e = run.span()
        total += e - s
        before = text[s - 1] if s > 0 else ""
        after = text[e] if e < len(text) else ""
        glued = (before.isascii() and before.isalpha()) or (after.isascii() and after.isalpha())
        for i in range(s, e):
            ch = text[i]
            p = text[i - 1] if i > 0 else ""
            n = text[i + 1] if i + 1 < len(text) else ""
            if _cjk(ch):
                good += _plausible_cjk(ch, e - s, glued, before, after, strict)
                continue
            in_place, unmistakable = _mark(text, i, p, n)
            if in_place or _plausible_char(text, i, p, n, ascii_words, seen):
                good += 1
                marks += unmistakable
    return Assessment(total, good, marks)


def reads_as_text(text: str) -> bool:
    """Nearly all non-ASCII characters of ``text`` in place (``Assessment.reads_as_text``)."""
    return assess(text).reads_as_text()


def reads_as_text_strictly(text: str) -> bool:
    """ASCII text with a few other characters: every one in place, and enough of them
    (``Assessment.reads_as_text_strictly``, with the Western checks for letters)."""
    return assess(text, strict=True).reads_as_text_strictly()
