"""Discovery: which files of a KB folder are documents, their ids, hashes and formats.

A document's ``doc_id`` depends only on the KB and its relative path, so an edited file
keeps its id (its ``content_hash`` changes). The format is decided by content first
(PDF and DOCX signatures, HTML markup), by extension second, so a PDF named ``.txt`` is
read as a PDF and binary junk named ``.md`` is caught at parsing.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import BinaryIO

from corpus_pipeline.chunking.plan import Plan
from corpus_pipeline.doc_formats import NAMES, sniff
from corpus_pipeline.globs import match_glob
from corpus_pipeline.kbconfig import KnowledgeBase
from corpus_pipeline.models import Document

_IGNORED_NAMES = {"kb.yaml", "questions.jsonl"}


def doc_id_for(kb: str, rel_path: str) -> str:
    return hashlib.sha256(f"{kb}/{rel_path}".encode()).hexdigest()[:16]


def sniff_format(path: Path, head: bytes) -> str | None:
    """The format by content, then by extension (``doc_formats.sniff``); None for
    unsupported files."""
    name = sniff(path, head)
    return name


def file_hash(path: Path) -> str:
    with path.open("rb") as f:
        return _sha256(f)


_BLOCK = 1 << 20


def _sha256(f: BinaryIO, first: bytes = b"") -> str:
    """The sha256 of ``first`` (what was already read of ``f``) and the rest of ``f``."""
    h = hashlib.sha256(first)
    for block in iter(lambda: f.read(_BLOCK), b""):
        h.update(block)
    return h.hexdigest()


#: Files that are not documents but are read through them (pictures), skipped without a word.
_IMAGE_EXTENSIONS = {".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp", ".svg", ".tif", ".tiff"}
#: At most this many skipped entries are listed (``discover_all``); the count is always whole.
MAX_SKIPPED_LISTED = 200


def discover(kb: KnowledgeBase) -> list[Document]:
    """Every supported file under the KB folder that ``include``/``exclude`` select, sorted;
    a file refused before parsing (too large) carries its ``error``."""
    return discover_all(kb)[0]


def _walk(root: Path) -> list[tuple[tuple[str, ...], os.DirEntry[str]]]:
    """Every entry under ``root`` (relative parts, entry), in the order of the sorted paths;
    hidden folders and symbolic links to folders are not entered. ``os.scandir``'s entries
    know their type without a system call per file (what ``Path.rglob`` and ``is_symlink``
    cost at 20,000 files)."""
    out: list[tuple[tuple[str, ...], os.DirEntry[str]]] = []
    stack: list[tuple[tuple[str, ...], str]] = [((), str(root))]
    while stack:
        parts, folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            here = (*parts, entry.name)
            out.append((here, entry))
            if not entry.name.startswith(".") and entry.is_dir(follow_symlinks=False):
                stack.append((here, entry.path))
    out.sort(key=lambda item: item[0])
    return out


def _snapshot(plan: Plan, seen: dict[int, str]) -> str:
    """``plan.snapshot()``, computed once per plan object of one discovery."""
    key = id(plan)
    if key not in seen:
        seen[key] = plan.snapshot()
    return seen[key]


def discover_all(kb: KnowledgeBase) -> tuple[list[Document], list[dict[str, str]]]:
    """``discover``'s documents, and the entries it skipped that a user may have meant as
    documents: ``{path, reason}`` for symlinks (never followed: they may point outside the
    KB), unreadable files and files of no supported format (pictures, read through their
    documents, and hidden or excluded files are not listed)."""
    cfg = kb.config
    limit = int(cfg.max_file_mb * 1024 * 1024)
    out: list[Document] = []
    skipped: list[dict[str, str]] = []
    snapshots: dict[int, str] = {}  # (a plan's snapshot, once per plan: most documents share the KB's)
    for parts, entry in _walk(kb.path):
        rel = "/".join(parts)
        if rel in _IGNORED_NAMES or any(part.startswith(".") for part in parts):
            continue
        path = kb.path / rel
        if entry.is_symlink():
            what = "folder" if path.is_dir() else "file"
            skipped.append(
                {
                    "path": rel,
                    "reason": f"a symbolic link ({what}); links are not followed (they may point outside the KB "
                    "folder): copy the target into the KB folder to index it",
                }
            )
            continue
        try:
            rel.encode("utf-8")
        except UnicodeEncodeError:  # a name in another encoding (bytes kept as surrogates)
            shown = rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            skipped.append(
                {
                    "path": shown,
                    "reason": "its name is not valid UTF-8 (written in another encoding): rename it to index it",
                }
            )
            continue
        if not entry.is_file():
            if not entry.is_dir():  # a named pipe, socket or device: never opened
                skipped.append({"path": rel, "reason": "not a regular file (a named pipe, socket or device)"})
            continue
        if not any(match_glob(rel, g) for g in cfg.include) or any(match_glob(rel, g) for g in cfg.exclude):
            continue
        try:
            size = entry.stat().st_size
            with path.open("rb") as f:  # (one open and one read: its head says the format, all of it the hash)
                first = f.read(_BLOCK)
                fmt = sniff_format(path, first[:4096])
                content_hash = _sha256(f, first) if fmt is not None else ""
        except OSError as exc:
            skipped.append({"path": rel, "reason": f"cannot be read: {exc.strerror or exc}"})
            continue
        if fmt is None:  # not a document (images, archives): images are read through their documents
            if path.suffix.lower() not in _IMAGE_EXTENSIONS:
                skipped.append(
                    {
                        "path": rel,
                        "reason": f"not a supported format ({', '.join(NAMES)}); exclude it in kb.yaml or convert it",
                    }
                )
            continue
        plan, override = kb.plan_for(rel)
        error = None
        if size > limit:
            error = (
                f"file is {size / 1048576:.1f} MB, over the limit max_file_mb = {cfg.max_file_mb:g}; "
                "raise max_file_mb in kb.yaml or split the file"
            )
        doc = Document(
            kb=kb.name,
            doc_id=doc_id_for(kb.name, rel),
            path=rel,
            format=fmt,
            size_bytes=size,
            content_hash=content_hash,
            plan="auto" if kb.is_auto(rel) else _snapshot(plan, snapshots),
            override=override,
            error=error,
        )
        out.append(doc)
    return out, skipped
