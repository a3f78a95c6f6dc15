"""Decoding text files: UTF-8 (with or without BOM), UTF-16, legacy CJK and Western
encodings when the guess is confident; binary and mojibake are refused with the reason.

Order: a BOM decides (UTF-8, UTF-16 LE/BE); NUL bytes without a BOM are UTF-16 when they
sit at one parity and the text decodes cleanly (ASCII-heavy or CJK), else binary; then
strict UTF-8. Bytes that are UTF-8 except in a few places are refused (invalid UTF-8,
with where), not re-read in another encoding as mojibake. Anything else goes to
charset-normalizer: its best guess is taken when its mess ratio is low and no other
encoding reads nearly as well with a different text (GB18030, Big5, Shift-JIS, EUC-KR,
cp1252...); otherwise the file is refused, naming the candidates. Whatever decoded must
still look like text: more than 1% control characters (other than tab, newlines, form
feed) means binary junk under a text name, and it is refused.
"""

from __future__ import annotations

import codecs
import re

from corpus_pipeline.errors import DocumentError

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f\ufffd]")
MAX_CONTROL_SHARE = 0.01


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
    return _guess(raw)


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


def _refuse_broken_utf8(raw: bytes, exc: UnicodeDecodeError) -> None:
    """UTF-8 text with a few invalid bytes (truncated, or pieces pasted from another
    encoding) is refused with where, rather than read whole in another encoding."""
    text = raw.decode("utf-8", errors="replace")
    bad = text.count("\ufffd")
    good = sum(1 for ch in text if ord(ch) > 0x7F and ch != "\ufffd")
    if good >= 4 and good >= 9 * bad:
        line = raw[: exc.start].count(b"\n") + 1
        raise DocumentError(
            f"not valid UTF-8: {bad} invalid byte sequence(s) in otherwise UTF-8 text, the first at byte "
            f"{exc.start:,} (line {line}); the file may be truncated or mix encodings. Re-save it as UTF-8"
        )


#: A guess is taken when its mess ratio is at most this, and no other encoding that gives a
#: different text reads within ``_MARGIN`` of it.
_MAX_CHAOS = 0.1
_MARGIN = 0.05
#: Western single-byte texts read alike in many code pages; cp1252 (Windows' Western) wins
#: when it reads within this margin of the best.
_WESTERN_MARGIN = 0.1
#: Signs of CJK bytes read in the wrong CJK encoding: halfwidth katakana (Big5/GBK as
#: Shift-JIS), private-use and C1 control characters.
_SUSPECT = re.compile(r"[\uff61-\uff9f\ue000-\uf8ff\x80-\x9f]")


def _plausible(text: str) -> bool:
    non_ascii = sum(1 for ch in text[:200_000] if ord(ch) > 0x7F)
    return len(_SUSPECT.findall(text[:200_000])) <= 0.1 * max(non_ascii, 1)


def _guess(raw: bytes) -> str:
    from charset_normalizer import from_bytes
    from charset_normalizer.utils import is_multi_byte_encoding

    matches = [m for m in from_bytes(raw) if not m.encoding.startswith(("utf_16", "utf_32")) and _plausible(str(m))]
    if not matches:
        raise DocumentError(
            "cannot decode the text: not UTF-8 or UTF-16, and no encoding reads it as text; re-save it as UTF-8"
        )
    best = min(matches, key=lambda m: m.chaos)
    if not is_multi_byte_encoding(best.encoding):
        western = [
            m for m in matches if m.encoding in ("cp1252", "latin_1") and m.chaos <= best.chaos + _WESTERN_MARGIN
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
