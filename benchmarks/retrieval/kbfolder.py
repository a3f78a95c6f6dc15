"""Laying out one benchmark KB in a fresh CORPUS_HOME: documents, questions, kb.yaml.

Documents are *copied* (the product's discovery skips symlinked files). A document is a file
with an extension the product indexes; every other file (images a document links to, ...) is
copied too, except the KB's own ``kb.yaml`` and ``questions.jsonl``, which are replaced.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from corpus_pipeline.doc_formats import EXTENSIONS

_IGNORED = {"kb.yaml", "questions.jsonl"}


@dataclass(frozen=True)
class Selection:
    """What of a source KB folder goes into the benchmark's copy."""

    source: Path
    name: str
    documents: list[str]  # relative paths, sorted
    other_files: list[str]  # non-documents copied along (images, ...)
    questions: list[str]  # raw JSONL lines kept
    questions_in_source: int
    questions_outside_docs: int  # dropped by --limit-docs (a reference outside the kept documents)
    own_kb_yaml: dict[str, Any] | None  # the source's kb.yaml, if any


def kb_name(path: Path, taken: set[str]) -> str:
    """A product-legal KB name (lower-case slug) from the folder name, unique among ``taken``."""
    base = re.sub(r"[^a-z0-9_-]+", "-", path.name.lower()).strip("-_") or "kb"
    base = base[:56]
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    taken.add(name)
    return name


def _files(source: Path) -> list[str]:
    out = []
    for p in sorted(source.rglob("*")):
        rel = p.relative_to(source).as_posix()
        if p.is_file() and rel not in _IGNORED and not any(part.startswith(".") for part in Path(rel).parts):
            out.append(rel)
    return out


def select(source: Path, name: str, limit_docs: int | None, limit_questions: int | None) -> Selection:
    """The first ``limit_docs`` documents (sorted by path) and the questions whose references
    all lie in them (without ``limit_docs``: every document and question, as the source has
    them: the product's anchoring reports bad references), then the first ``limit_questions``."""
    qfile = source / "questions.jsonl"
    if not qfile.exists():
        raise ValueError(f"{source}: no questions.jsonl")
    files = _files(source)
    docs = [f for f in files if Path(f).suffix.lower() in EXTENSIONS]
    others = [f for f in files if f not in set(docs)]
    if limit_docs is not None:
        docs = docs[:limit_docs]
    kept_docs = set(docs)
    lines = [ln for ln in qfile.read_text(encoding="utf-8").splitlines() if ln.strip() and not ln.startswith("#")]
    kept, outside = [], 0
    for ln in lines:
        refs = json.loads(ln).get("references") or []
        if limit_docs is None or all(isinstance(r, dict) and r.get("doc_path") in kept_docs for r in refs):
            kept.append(ln)
        else:
            outside += 1
    if limit_questions is not None:
        kept = kept[:limit_questions]
    own = None
    if (source / "kb.yaml").exists():
        own = yaml.safe_load((source / "kb.yaml").read_text(encoding="utf-8")) or {}
    return Selection(source, name, docs, others, kept, len(lines), outside, own)


def materialize(sel: Selection, home: Path, *, questions: bool = True) -> Path:
    """Copy the selection to ``home/kbs/<name>/`` (documents, other files and, unless
    ``questions`` is false, questions.jsonl)."""
    dest = home / "kbs" / sel.name
    dest.mkdir(parents=True)
    for rel in (*sel.documents, *sel.other_files):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(sel.source / rel, dest / rel)
    if questions:
        write_questions(sel, dest)
    return dest


def write_questions(sel: Selection, dest: Path) -> None:
    (dest / "questions.jsonl").write_text("".join(ln + "\n" for ln in sel.questions), encoding="utf-8")


def write_kb_yaml(dest: Path, config: dict[str, Any]) -> str:
    """Write ``config`` as ``dest/kb.yaml``; returns the text written."""
    text = yaml.safe_dump(config, allow_unicode=True, sort_keys=False) if config else ""
    text = "# written by benchmarks.retrieval\n" + text
    (dest / "kb.yaml").write_text(text, encoding="utf-8")
    return text
