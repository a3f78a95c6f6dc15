"""Previewing how a file is chunked: exactly what indexing would make of it.

    result = preview_file(Path("notes.md"), plan="PARENT:STRUCTURE;CHILD:SEMANTIC,RECURSIVE")
    result.chunked.parents, result.chunked.children      the records the index would write

``corpus preview`` calls this. Every step is the index's own: the file is discovered and
parsed by the same parser (``parsing.parse_document``), its images described by the same
stage (vision model, OCR fallback, the same caches), its plan resolved by
``KnowledgeBase.plan_for_document`` (``auto`` and per-document overrides included), its
tools made by the same ``ContextFactory``, and it is chunked by the one parent/child
algorithm (``chunking.document``). So the ids, offsets and texts equal the index's for
the same file in the same KB at the same version.

Without ``kb`` the file is chunked as if it were in a KB of its own, named ``preview``, whose
kb.yaml holds the given plan and settings (defaults otherwise). With ``kb`` it is chunked
as that KB's kb.yaml says, the plan and settings given here replacing the KB's (and its
overrides) when given.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from corpus_pipeline.chunking.context import ContextFactory
from corpus_pipeline.chunking.document import ChunkedDocument, SourceDocument, chunk_document
from corpus_pipeline.chunking.plan import Plan
from corpus_pipeline.doc_formats import BY_NAME, NAMES
from corpus_pipeline.errors import ConfigError, DocumentError
from corpus_pipeline.kbconfig import KBConfig, KnowledgeBase, format_validation, kb_from_config, resolve_kb
from corpus_pipeline.models import DocStatus, Document, ParsedDocument
from corpus_pipeline.parsing.discovery import doc_id_for, sniff_format
from corpus_pipeline.parsing.parse import parse_document
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.versioning import strategy_version

PREVIEW_KB = "preview"
_FORMATS = NAMES


@dataclass(frozen=True)
class PreviewResult:
    kb: KnowledgeBase
    strategy_version: str
    document: Document
    parsed: ParsedDocument
    plan: Plan
    plan_reasons: list[str]
    chunked: ChunkedDocument
    llm_usage: dict[str, Any] | None = None
    images: dict[str, int] = field(default_factory=dict)  # image descriptions by status


def preview_kb(
    layout: Layout,
    *,
    kb: str | None = None,
    plan: str | None = None,
    parent_settings: Mapping[str, Any] | None = None,
    child_settings: Mapping[str, Any] | None = None,
    model: str | None = None,
    folder: Path | None = None,
) -> KnowledgeBase:
    """The KB a preview chunks in: ``kb``'s configuration, or a ``preview`` KB of defaults
    (in ``folder``), with the plan, settings and embedding model given replacing its own."""
    if kb is not None:
        base = resolve_kb(layout.kb_dir(kb))
        cfg, kb_dir = base.config, base.path
    else:
        cfg, kb_dir = KBConfig(), (folder or Path.cwd()) / PREVIEW_KB
    data = cfg.model_dump(mode="json", exclude_unset=True)
    if plan is not None or parent_settings is not None or child_settings is not None:
        chunking: dict[str, Any] = {}
        chunking["plan"] = plan if plan is not None else cfg.chunking.plan
        # the plan asked for applies to this file: the KB's per-document overrides do not
        chunking["parent"] = dict(parent_settings) if parent_settings is not None else cfg.chunking.parent
        chunking["child"] = dict(child_settings) if child_settings is not None else cfg.chunking.child
        data["chunking"] = chunking
    if model is not None:
        data.setdefault("embedding", {})["model"] = model
    try:
        new_cfg = KBConfig.model_validate(data)
    except ValidationError as exc:
        raise format_validation(exc, "preview settings") from None
    return kb_from_config(kb_dir, new_cfg)


def _format_of(path: Path, fmt: str | None) -> str:
    if fmt is not None:
        if fmt not in _FORMATS:
            raise ConfigError(f"--format {fmt!r} is not a format; choose one of {', '.join(_FORMATS)}.")
        return fmt
    with path.open("rb") as f:
        head = f.read(4096)
    found = sniff_format(path, head)
    return found if found is not None else "text"


def _document(kb: KnowledgeBase, path: Path, fmt: str) -> tuple[Document, Path]:
    """The file as discovery would record it in ``kb`` (same id when it lies in the KB's
    folder), and the folder its path is relative to."""
    from corpus_pipeline.parsing.discovery import file_hash

    path = path.resolve()
    try:
        rel = path.relative_to(kb.path.resolve()).as_posix()
        root = kb.path.resolve()
    except ValueError:
        rel, root = path.name, path.parent
    plan, override = kb.plan_for(rel)
    doc = Document(
        kb=kb.name,
        doc_id=doc_id_for(kb.name, rel),
        path=rel,
        format=fmt,
        size_bytes=path.stat().st_size,
        content_hash=file_hash(path),
        plan="auto" if kb.is_auto(rel) else plan.snapshot(),
        override=override,
    )
    return doc, root


def parse_file(path: Path, *, fmt: str | None = None, layout: Layout | None = None) -> tuple[Document, ParsedDocument]:
    """One file parsed by the index's parser, as a document of a ``preview`` KB (for
    ``corpus recommend``); images identified, not stored. Raises DocumentError."""
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    kb = preview_kb(layout or Layout.from_env(), folder=path.resolve().parent)
    doc, root = _document(kb, path, _format_of(path, fmt))
    parsed = parse_document(doc, root)
    if parsed.status != DocStatus.OK.value:
        raise DocumentError(f"{path}: cannot be parsed as {doc.format}: {parsed.error}")
    return doc, parsed


def with_stdin(data: bytes, fmt: str | None, run: Any) -> Any:
    """``run(path, fmt)`` on bytes from standard input, saved to a temporary file."""
    fmt = fmt or "text"
    row = BY_NAME.get(fmt)
    suffix = row.extensions[0] if row is not None else ".txt"
    with tempfile.TemporaryDirectory(prefix="corpus-preview-") as tmp:
        f = Path(tmp) / f"stdin{suffix}"
        f.write_bytes(data)
        return run(f, fmt)


def preview_file(
    path: Path,
    *,
    layout: Layout | None = None,
    kb: str | None = None,
    plan: str | None = None,
    parent_settings: Mapping[str, Any] | None = None,
    child_settings: Mapping[str, Any] | None = None,
    model: str | None = None,
    fmt: str | None = None,
    images: bool = True,
) -> PreviewResult:
    """Chunk one file as the index would (see the module docstring). Raises ConfigError for
    bad settings and DocumentError for a file that cannot be parsed."""
    layout = layout or Layout.from_env()
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    knowledge_base = preview_kb(
        layout, kb=kb, plan=plan, parent_settings=parent_settings, child_settings=child_settings, model=model,
        folder=path.resolve().parent,
    )  # fmt: skip
    version = strategy_version(knowledge_base)
    doc, root = _document(knowledge_base, path, _format_of(path, fmt))
    parsed = parse_document(doc, root, images_dir=layout.images)
    if parsed.status != DocStatus.OK.value:
        raise DocumentError(f"{path}: cannot be parsed as {doc.format}: {parsed.error}")
    by_status: dict[str, int] = {}
    image_pieces = []
    if images and parsed.images:
        from corpus_pipeline.vision import describe_images, vision_settings
        from corpus_pipeline.vision import image_pieces as pieces_of

        descs = describe_images(list(parsed.images), vision_settings(knowledge_base.config.vision), layout.cache)
        for d in descs:
            by_status[d.status] = by_status.get(d.status, 0) + 1
        image_pieces = pieces_of(descs, parsed.blocks)
    with ContextFactory.for_kb(knowledge_base, cache_dir=layout.cache) as tools:
        chosen, reasons = knowledge_base.plan_for_document(
            doc.path, parsed.text, doc.format, parsed.blocks, tools.token_counter
        )
        source = SourceDocument(
            knowledge_base.name, version, doc.doc_id, doc.path, doc.format, doc.content_hash, parsed.text, parsed.blocks
        )
        ctx = tools.context(parsed.text, parsed.blocks)
        chunked = chunk_document(source, chosen, ctx, image_pieces, plan_reasons=reasons)
        usage = {"model": tools.llm.model, **tools.llm.usage.to_dict()} if tools.llm is not None else None
    return PreviewResult(knowledge_base, version, doc, parsed, chosen, reasons, chunked, usage, by_status)


def preview_stdin(data: bytes, *, fmt: str | None = None, **kwargs: Any) -> PreviewResult:
    """``preview_file`` of bytes read from standard input (``fmt`` default: text)."""
    return with_stdin(data, fmt, lambda f, fm: preview_file(f, fmt=fm, **kwargs))  # type: ignore[no-any-return]
