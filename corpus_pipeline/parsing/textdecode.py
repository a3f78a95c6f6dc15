"""Decoding text files: UTF-8 (with or without BOM), UTF-16, GB18030; binary is refused.

Order: a BOM decides (UTF-8, UTF-16 LE/BE); NUL bytes without a BOM mean binary; then
strict UTF-8, then GB18030 (a superset of GBK and GB2312), then charset-normalizer's best
guess. Whatever decoded must still look like text: more than 1% control characters (other
than tab, newlines, form feed) means binary junk under a text name, and it is refused.
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
        # UTF-16 without a BOM: mostly-ASCII text has a NUL in every other byte.
        odd, even = head[1::2], head[0::2]
        for zeros, encoding in ((odd, "utf-16-le"), (even, "utf-16-be")):
            if zeros.count(0) > 0.9 * len(zeros) and (odd if zeros is even else even).count(0) < 0.1 * len(zeros):
                try:
                    return _check_text(raw.decode(encoding), encoding.upper())
                except UnicodeDecodeError:
                    break
    if b"\x00" in head:
        raise DocumentError("binary content (NUL bytes) in a text file; is it really text?")
    for encoding, label in (("utf-8", "UTF-8"), ("gb18030", "GB18030")):
        try:
            return _check_text(raw.decode(encoding), label)
        except UnicodeDecodeError:
            pass
    from charset_normalizer import from_bytes

    best = from_bytes(raw).best()
    if best is None:
        raise DocumentError("cannot decode the text: not UTF-8, UTF-16 or GB18030; re-save it as UTF-8")
    return _check_text(str(best), best.encoding)
