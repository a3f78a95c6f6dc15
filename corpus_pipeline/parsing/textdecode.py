"""Decoding text files: UTF-8 (with or without BOM), UTF-16, GB18030; binary is refused."""

from __future__ import annotations

import codecs

from corpus_pipeline.errors import DocumentError


def decode_text(raw: bytes) -> str:
    if raw.startswith(codecs.BOM_UTF8):
        return raw[3:].decode("utf-8")
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return raw.decode("utf-16")
    if b"\x00" in raw[:8192]:
        raise DocumentError("binary content (NUL bytes) in a text file; is it really text?")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    try:
        return raw.decode("gb18030")
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes

    best = from_bytes(raw).best()
    if best is None:
        raise DocumentError("cannot decode the text: not UTF-8, UTF-16 or GB18030; re-save it as UTF-8")
    return str(best)
