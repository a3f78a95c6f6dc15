"""The bounds a document is parsed under (``parsing:`` in kb.yaml, ``ParsingConfig``), and
the checks that run inside the parse itself.

Memory and time are enforced by the worker process (``worker``); what can be checked from
the file before any work is checked here, by the parsers, so the in-process parse and the
worker's give the same result:

* ``check_zip``: a DOCX's members, each against ``max_uncompressed_mb`` and all together
  against ``max_uncompressed_total_mb``, from the sizes the zip declares (nothing is
  decompressed for that), then by inflating every member in bounded steps, counting, and
  stopping at the first byte past its declared size: a zip whose headers lie (a small
  declared size over a bomb, with or without a matching CRC) is refused before python-docx
  reads it whole with one ``zlib`` call;
* ``check_pages``: a PDF's page count against ``max_pages``.

Every message names the figure, the key and its value, and what to do.
"""

from __future__ import annotations

import struct
import zipfile
import zlib
from pathlib import Path
from typing import BinaryIO

from corpus_pipeline.errors import DocumentError
from corpus_pipeline.kbconfig import ParsingConfig

MB = 1024 * 1024
DEFAULT_LIMITS = ParsingConfig()

#: zip local file header: signature, versions, flags, method, time, date, crc, sizes, name
#: and extra lengths (APPNOTE 4.3.7; ``zipfile.structFileHeader``)
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")
_LOCAL_SIGNATURE = b"PK\x03\x04"
_CHUNK_IN = 64 * 1024  # compressed bytes read at a time
_CHUNK_OUT = 1024 * 1024  # at most this many bytes inflated per zlib call


def fix(key: str) -> str:
    return f"raise parsing.{key} in kb.yaml or split the file"


def over(what: str, key: str, value: float, unit: str = "") -> str:
    """``<what> is over parsing.<key> = <value><unit>; raise ... or split the file``."""
    return f"{what} is over parsing.{key} = {value:g}{unit}; {fix(key)}"


def _mb(n: int) -> str:
    return f"{n / MB:.1f} MB" if n < 10 * MB else f"{n / MB:.0f} MB"


def check_zip(path: Path, limits: ParsingConfig = DEFAULT_LIMITS) -> None:
    """Refuse a zip (DOCX) whose members, declared or actual, are over the limits."""
    per_member = int(limits.max_uncompressed_mb * MB)
    total_limit = int(limits.max_uncompressed_total_mb * MB)
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise DocumentError(f"not a readable DOCX file: {type(exc).__name__}: {exc}") from exc
    for info in infos:
        if info.file_size > per_member:
            raise DocumentError(
                over(
                    f"{info.filename} uncompressed {_mb(info.file_size)} (the zip's declared size)",
                    "max_uncompressed_mb",
                    limits.max_uncompressed_mb,
                    " MB",
                )
            )
    declared = sum(i.file_size for i in infos)
    if declared > total_limit:
        raise DocumentError(
            over(
                f"the DOCX's {len(infos)} zip members uncompressed {_mb(declared)} in all (declared sizes)",
                "max_uncompressed_total_mb",
                limits.max_uncompressed_total_mb,
                " MB",
            )
        )
    with path.open("rb") as f:
        for info in infos:
            actual = _inflated_size(f, info)
            if actual > info.file_size:
                raise DocumentError(
                    f"{info.filename} inflates to more than the {info.file_size:,} bytes its zip header declares "
                    "(a crafted or corrupt file: a zip bomb hides this way); stopped before reading it. "
                    "Re-save the document in Word or LibreOffice"
                )


def _inflated_size(f: BinaryIO, info: zipfile.ZipInfo) -> int:
    """The member's inflated size, counted in bounded steps up to one chunk past the size
    its header declares (so a lie costs at most ``_CHUNK_OUT`` bytes of memory)."""
    if info.flag_bits & 0x1:
        raise DocumentError(f"{info.filename} is encrypted inside the DOCX zip; save the document unprotected")
    f.seek(info.header_offset)
    header = f.read(_LOCAL_HEADER.size)
    if len(header) != _LOCAL_HEADER.size or header[:4] != _LOCAL_SIGNATURE:
        raise DocumentError(f"not a readable DOCX file: the zip entry of {info.filename} is damaged")
    fields = _LOCAL_HEADER.unpack(header)
    f.seek(fields[10] + fields[11], 1)  # the file name and the extra field
    if info.compress_type == zipfile.ZIP_STORED:
        return info.compress_size
    if info.compress_type != zipfile.ZIP_DEFLATED:
        raise DocumentError(
            f"{info.filename} uses zip compression method {info.compress_type}, which Word never writes; "
            "re-save the document in Word or LibreOffice"
        )
    inflater = zlib.decompressobj(-15)
    left = info.compress_size
    out = 0
    try:
        while left > 0 and not inflater.eof:
            data = f.read(min(left, _CHUNK_IN))
            if not data:
                break
            left -= len(data)
            while data:
                out += len(inflater.decompress(data, _CHUNK_OUT))
                if out > info.file_size:
                    return out
                data = inflater.unconsumed_tail
        out += len(inflater.flush())
    except zlib.error as exc:
        raise DocumentError(f"not a readable DOCX file: {info.filename} is damaged ({exc})") from exc
    return out


def check_pages(pages: int, limits: ParsingConfig = DEFAULT_LIMITS) -> None:
    if pages > limits.max_pages:
        raise DocumentError(over(f"the PDF's page count {pages:,}", "max_pages", limits.max_pages))
