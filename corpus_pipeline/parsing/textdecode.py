"""Decoding text files: UTF-8 (with or without BOM), UTF-16, legacy CJK, Western and Cyrillic
encodings when the reading is confident and plausible; binary, mojibake and invalid UTF-8 are
refused with the reason.

Order: a BOM decides (UTF-8, UTF-16 LE/BE); NUL bytes without a BOM are UTF-16 when they
sit at one parity and the text decodes cleanly (ASCII-heavy or CJK), else binary; then
strict UTF-8. Bytes that are not UTF-8 (issue 40; figures in ``benchmarks/decoding/RESULTS.md``):

- UTF-8 broken in a few places is refused as invalid UTF-8, naming the first bad byte and its
  line: a character cut short at the end; at least two valid multibyte characters per invalid
  sequence (legacy CJK text has fewer than one in two); or any valid multibyte character when
  nothing else reads (a piece pasted from another encoding). A single-byte code page never
  reads bytes that hold valid multibyte UTF-8.
- ASCII text with at most ``_FEW_HIGH`` other bytes is read as cp1252, cp1251 or a CJK encoding
  only when every one of its non-ASCII characters sits where it does in real text, and there
  are at least four of them or two unmistakable marks (``plausible.py``); else it is refused as
  invalid UTF-8, naming the first bad byte and its line.
- Anything else goes to charset-normalizer: its best reading is taken when its mess ratio is
  low, nearly all its non-ASCII characters are in place, and no other encoding reads nearly as
  well with a different text (GB18030, Big5, Shift-JIS, EUC-KR, cp1252...); otherwise the
  file is refused, naming the candidates.

Whatever decoded must still look like text: more than 1% control characters (other than tab,
newlines, form feed) means binary junk under a text name, and it is refused.
"""

from __future__ import annotations

import codecs
import re
from typing import TYPE_CHECKING

from corpus_pipeline.errors import DocumentError
from corpus_pipeline.parsing.plausible import reads_as_text, reads_as_text_strictly

if TYPE_CHECKING:
    from charset_normalizer import CharsetMatch

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f\ufffd]")
MAX_CONTROL_SHARE = 0.01

#: Valid multibyte UTF-8 characters per invalid sequence from which a file is broken UTF-8.
_BROKEN_RATIO = 2
_BROKEN_MIN_GOOD = 2
#: A file with at most this many non-ASCII bytes is ASCII text with a few other bytes: read
#: only in the code pages below or a CJK encoding, and only when every non-ASCII character is
#: in place (``plausible.Assessment.reads_as_text_strictly``); else it is refused as invalid
#: UTF-8, naming where. Detectors have too little to go on with fewer.
_FEW_HIGH = 16
#: Windows' Western and Cyrillic code pages, in order of preference. More would find a
#: plausible reading for more stray bytes (there are dozens of code pages).
_FEW_CODE_PAGES = ("cp1252", "cp1251")
_HIGH_BYTES = bytes(range(0x80, 0x100))


#: A guess is taken when its mess ratio is at most this, and no other encoding that gives a
#: different text reads within ``_MARGIN`` of it.
_MAX_CHAOS = 0.1
_MARGIN = 0.05
#: Western single-byte texts read alike in many code pages; cp1252 (Windows' Western) wins
#: when it reads within this margin of the best.
_WESTERN_MARGIN = 0.1


def _check_text(text: str, encoding: str) -> str:
    sample = text[:200_000]
    if sample and len(_CONTROL.findall(sample)) > MAX_CONTROL_SHARE * len(sample):
        raise DocumentError(
            f"binary content: decoded as {encoding}, it is full of control characters; is it really text?"
        )
    return text


def decode_text(raw: bytes) -> str:
    """The text of a text file; raises DocumentError for binary or undecodable bytes."""
    if raw.startswith(codecs.BOM_UTF8):
        try:
            return _check_text(raw[3:].decode("utf-8"), "UTF-8")
        except UnicodeDecodeError as exc:
            raise DocumentError(f"starts with a UTF-8 BOM but is not valid UTF-8: {exc}") from exc
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return _check_text(raw.decode("utf-16"), "UTF-16")
        except UnicodeDecodeError as exc:
            raise DocumentError(f"starts with a UTF-16 BOM but is not valid UTF-16: {exc}") from exc
    head = raw[:8192]
    if b"\x00" in head and len(head) >= 4:
        text = _utf16_without_bom(raw, head)
        if text is not None:
            return text
    if b"\x00" in head:
        raise DocumentError("binary content (NUL bytes) in a text file; is it really text?")
    try:
        return _check_text(raw.decode("utf-8"), "UTF-8")
    except UnicodeDecodeError as exc:
        _refuse_broken_utf8(raw, exc)
        return _guess(raw, exc)


def _utf16_without_bom(raw: bytes, head: bytes) -> str | None:
    """UTF-16 LE or BE without a BOM: the NUL bytes (high bytes of ASCII characters) sit at
    one parity, and the whole file decodes strictly to text."""
    zeros_odd, zeros_even = head[1::2].count(0), head[0::2].count(0)
    for zeros, others, encoding in ((zeros_odd, zeros_even, "utf-16-le"), (zeros_even, zeros_odd, "utf-16-be")):
        if zeros >= 4 * max(others, 1) and len(raw) % 2 == 0:
            try:
                text = raw.decode(encoding)
            except UnicodeDecodeError:
                continue
            try:
                return _check_text(text, encoding.upper() + " (no BOM)")
            except DocumentError:
                continue
    return None


def _where(raw: bytes, offset: int) -> str:
    line = raw[:offset].count(b"\n") + 1
    return f"byte {offset:,} (line {line})"


def _refuse_broken_utf8(raw: bytes, exc: UnicodeDecodeError) -> None:
    """UTF-8 text with a few invalid bytes (truncated, or pieces pasted from another
    encoding) is refused with where, rather than read whole in another encoding: it has at
    least two valid multibyte characters per invalid sequence (legacy CJK text reads as less
    than one in two), or its only invalid sequence is a character cut short at the end."""
    bad, good = _utf8_census(raw)
    if bad == 1 and good >= 1 and exc.reason == "unexpected end of data":
        raise DocumentError(
            f"not valid UTF-8: it ends inside a multibyte character at {_where(raw, exc.start)}; "
            "the file may be truncated. Re-save it as UTF-8"
        )
    if good >= _BROKEN_MIN_GOOD and good >= _BROKEN_RATIO * bad:
        raise _mixed(raw, exc, bad)


def _mixed(raw: bytes, exc: UnicodeDecodeError, bad: int) -> DocumentError:
    return DocumentError(
        f"not valid UTF-8: {bad} invalid byte sequence(s) in otherwise UTF-8 text, the first at "
        f"{_where(raw, exc.start)}; the file may be truncated or mix encodings. Re-save it as UTF-8"
    )


def _as_cp1252(exc: UnicodeError) -> tuple[str, int]:
    """A codec error handler: the bytes that are not UTF-8, read as cp1252."""
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    return exc.object[exc.start : exc.end].decode("cp1252", errors="replace"), exc.end


_AS_CP1252 = "corpus-pipeline-as-cp1252"
codecs.register_error(_AS_CP1252, _as_cp1252)


def _utf8_census(raw: bytes) -> tuple[int, int]:
    """(invalid sequences, valid multibyte characters) when ``raw`` is read as UTF-8."""
    text = raw.decode("utf-8", errors="replace")
    bad = text.count("\ufffd")
    return bad, len(text) - len(text.encode("ascii", errors="ignore")) - bad


def _guess(raw: bytes, exc: UnicodeDecodeError) -> str:
    from charset_normalizer import from_bytes
    from charset_normalizer.utils import is_multi_byte_encoding

    candidates = [m for m in from_bytes(raw) if not m.encoding.startswith(("utf_16", "utf_32"))]
    bad, good = _utf8_census(raw)
    high = len(raw) - len(raw.translate(None, _HIGH_BYTES))
    # Valid multibyte UTF-8 characters (ç é ’ — or CJK) are not what a Western code page's
    # text gives (none of the benchmark's 180 Western samples has one; 5 of its 120 Cyrillic and
    # Central European ones do, and are refused): such a file is UTF-8 with pieces in another
    # encoding, never read in a single-byte code page.
    if good:
        candidates = [m for m in candidates if is_multi_byte_encoding(m.encoding)]
    try:
        if high <= _FEW_HIGH:
            return _guess_few(raw, exc.start, high, candidates, code_pages=not good)
        return _guess_many(raw, candidates)
    except DocumentError:
        if good and (high <= _FEW_HIGH or reads_as_text(raw.decode("utf-8", errors=_AS_CP1252))):
            raise _mixed(raw, exc, bad) from None  # it reads as UTF-8 with pieces in cp1252
        raise


def _guess_few(raw: bytes, first_bad: int, high: int, candidates: list[CharsetMatch], *, code_pages: bool) -> str:
    """ASCII text with a few other bytes: a code page or a CJK encoding in which every one of
    them reads in place, else invalid UTF-8."""
    from charset_normalizer.utils import is_multi_byte_encoding

    readings: list[tuple[str, str]] = []
    for encoding in _FEW_CODE_PAGES if code_pages else ():
        try:
            text = raw.decode(encoding)
        except UnicodeDecodeError:
            continue
        if reads_as_text_strictly(text):
            readings.append((encoding, text))
            break
    cjk = [
        m
        for m in candidates
        if is_multi_byte_encoding(m.encoding) and m.chaos <= _MAX_CHAOS and reads_as_text_strictly(str(m))
    ]
    if cjk:
        best = min(cjk, key=lambda m: m.chaos)
        readings += [(best.encoding, str(best))]
        readings += [(m.encoding, str(m)) for m in cjk if m.chaos <= best.chaos + _MARGIN and str(m) != str(best)]
    if not readings:
        run = raw[first_bad : first_bad + 4]
        shown = " ".join(f"0x{b:02X}" for b in run[: next((i for i, b in enumerate(run) if b < 0x80), len(run))])
        raise DocumentError(
            f"not valid UTF-8: invalid byte(s) in ASCII text, the first at {_where(raw, first_bad)}: {shown}; "
            f"its {high:,} non-ASCII byte(s) read as text in no legacy encoding. Re-save it as UTF-8"
        )
    if len(readings) > 1:
        names = ", ".join(dict.fromkeys(encoding for encoding, _ in readings))
        raise DocumentError(
            f"cannot tell the text's encoding with confidence (not UTF-8; it reads as {names}: they give "
            "different text); re-save it as UTF-8"
        )
    encoding, text = readings[0]
    return _check_text(text, encoding)


def _guess_many(raw: bytes, candidates: list[CharsetMatch]) -> str:
    """charset-normalizer's best reading, when its mess ratio is low, nearly every non-ASCII
    character is in place, and no other reading as good gives another text."""
    from charset_normalizer.utils import is_multi_byte_encoding

    matches: list[CharsetMatch] = []  # the readings that read as text, by mess ratio, as far as they matter
    for m in sorted(candidates, key=lambda m: m.chaos):
        if matches and m.chaos > matches[0].chaos + max(_MARGIN, _WESTERN_MARGIN):
            break
        if reads_as_text(str(m)):
            matches.append(m)
    if not matches:
        raise DocumentError(
            "cannot decode the text: not UTF-8 or UTF-16, and no encoding reads it as text; re-save it as UTF-8"
        )
    best = matches[0]
    if not is_multi_byte_encoding(best.encoding):
        cp1252 = raw.decode("cp1252", errors="replace")  # cp1250 and others often read the same
        western = [
            m
            for m in matches
            if (m.encoding in ("cp1252", "latin_1") or str(m) == cp1252) and m.chaos <= best.chaos + _WESTERN_MARGIN
        ]
        best = western[0] if western else best
    text = str(best)
    rivals = [m for m in matches if m.chaos <= best.chaos + _MARGIN and str(m) != text and m is not best]
    if not is_multi_byte_encoding(best.encoding):
        rivals = [m for m in rivals if is_multi_byte_encoding(m.encoding)]  # code pages that differ in a few letters
    if best.chaos > _MAX_CHAOS or rivals:
        names = ", ".join(dict.fromkeys(m.encoding for m in [best, *rivals]))
        why = f"{best.chaos:.0%} of it looks garbled" if best.chaos > _MAX_CHAOS else "they give different text"
        raise DocumentError(
            f"cannot tell the text's encoding with confidence (not UTF-8; it reads as {names}: {why}); "
            "re-save it as UTF-8"
        )
    return _check_text(text, best.encoding)
