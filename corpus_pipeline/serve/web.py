"""The web page of ``corpus serve``: look at search results and at how documents were cut.

    GET /                                   the page (a shell: no data; public, see below)
    GET /ui/static/{web.css,web.js}         its stylesheet and script (public)
    GET /ui/fragments/search                ?kb&version&q&top_k  parents, matched children highlighted,
                                            what found each hit in words
    GET /ui/fragments/documents             ?kb&version          the documents of a version
    GET /ui/fragments/document              ?kb&version&doc      a document's text with parent and child
                                            boundaries, section paths, images, token counts vs the limit
    GET /ui/fragments/compare               ?kb&doc&a&b          one document cut by two versions, side by side
    GET /ui/api/kbs/{kb}/documents          ?version             the documents (JSON)
    GET /ui/api/kbs/{kb}/documents/{doc}    ?version             one document's view (JSON: text, parents,
                                            children, images, the model's token limit)
    GET /ui/images/{xx}/{sha}.{ext}         an image from the warehouse's images folder (nothing else)

The fragments are rendered on the server (Jinja2, autoescaped) and inserted by a small
script (``static/web.js``), no CDN or external asset. **Keys**: the page shell and its two
static files hold no data and are served before the API key check (``PublicPages``); every
request that reads the index (fragments, JSON, images) goes through the same guard as the
JSON API. When ``CORPUS_API_KEYS`` is set the page asks for a key once, keeps it in the
tab's ``sessionStorage`` and sends it as ``Authorization: Bearer <key>`` on every fetch
(images are fetched the same way and shown from blob URLs), so a key never appears in a URL.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup, escape
from starlette.routing import Route, Router
from starlette.types import ASGIApp, Receive, Scope, Send
from upath import UPath

from corpus_pipeline.errors import ConfigError, CorpusError, StoreError
from corpus_pipeline.models import IMAGE_CHUNK_TYPES, ParentBlock
from corpus_pipeline.retrieval.search import SearchResult
from corpus_pipeline.secrets import mask
from corpus_pipeline.serve.deps import GUARDED, PUBLIC_PREFIX, is_public, server
from corpus_pipeline.serve.errors import HttpError
from corpus_pipeline.store.files import local_path
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.reader import SnapshotReader
from corpus_pipeline.store.snapshots import Snapshot, SnapshotNotFound, read_published, resolve
from corpus_pipeline.store.versions import (
    active_version,
    known_versions,
    missing_from_build,
    version_embedding,
    version_info,
)

STATIC = Path(__file__).with_name("static")
STATIC_FILES = {"web.css": "text/css; charset=utf-8", "web.js": "text/javascript; charset=utf-8"}
#: The shell's policy: its own script and stylesheet only; images from blob URLs.
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
_IMAGE_FILE = re.compile(r"^([0-9a-f]{2})/(\1[0-9a-f]{62})\.([a-z0-9]{1,8})$")
_IMAGE_MIME = {
    "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "bmp": "image/bmp",
    "webp": "image/webp", "tiff": "image/tiff", "svg": "image/svg+xml", "ico": "image/x-icon",
}  # fmt: skip
_DOC_ID = re.compile(r"^[0-9A-Za-z_-]{1,80}$")
_FLAG_KEYS = ("recut_from_tokens", "hard_cut", "forced_split", "merged_small", "split_reason", "fallback")


def _meta(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    try:
        out = json.loads(value or "{}")
    except ValueError:
        return {"raw": value}
    return out if isinstance(out, dict) else {"value": out}


def check_version(layout: Layout, kb: str, version: str | None) -> str:
    """``version`` (default: the active one) if it is a registered, built version of ``kb``."""
    if kb not in layout.list_kbs():
        raise HttpError(404, "kb_not_found", f"no knowledge base {kb!r}; known: {', '.join(layout.list_kbs())}")
    known = known_versions(layout, kb)
    v = version or active_version(layout, kb)
    if v is None:
        raise HttpError(409, "not_indexed", f"{kb!r} has no active version yet: run `corpus index --kb {kb}`")
    if v not in known:  # never a path built from an unchecked name
        raise HttpError(404, "version_not_found", f"{v!r} is not a version of {kb!r}; known: {', '.join(known)}")
    if not _built(layout, kb, v):
        raise HttpError(409, "not_built", f"version {v!r} of {kb!r} has no child chunks (not built, or retired)")
    return v


@functools.lru_cache(maxsize=64)
def _token_limit(home: Path, kb: str, version: str) -> tuple[str, int | None]:
    """(model, the most tokens one chunk may have) of the model a version was embedded with."""
    from corpus_pipeline.embedding.tokens import token_counter_for

    layout = Layout(home)
    try:
        cfg = version_embedding(layout, kb, version)
        return cfg.model, int(token_counter_for(cfg).max_tokens)
    except (CorpusError, ValueError):
        return str((version_info(layout, kb, version).get("inputs") or {}).get("embedding_model") or "?"), None


def model_limits(layout: Layout, kb: str, version: str) -> dict[str, Any]:
    """The embedding model of a version, its token limit per chunk (window less special tokens
    and the passage prefix) and kb.yaml's ``quality.token_limit`` when it sets a lower one."""
    model, limit = _token_limit(layout.home, kb, version)
    quality = ((version_info(layout, kb, version).get("config") or {}).get("quality") or {}).get("token_limit")
    return {"model": model, "max_tokens": limit, "quality_token_limit": quality}


def built_versions(layout: Layout, kb: str) -> list[str]:
    """The versions with a published snapshot holding child chunks, newest first."""
    from corpus_pipeline.store.versions import versions_by_age

    return [v for v in versions_by_age(layout, kb) if _built(layout, kb, v)]


def _built(layout: Layout, kb: str, version: str) -> bool:
    """Whether ``version`` can be read: built completely (``store.versions.missing_from_build``)."""
    try:
        snap: Snapshot | None = resolve(layout, kb, version)
    except SnapshotNotFound:
        snap = None
    if snap is None or missing_from_build(layout, kb, version, snap) is not None:
        return False
    return SnapshotReader(snap).has("children")


def documents(layout: Layout, kb: str, version: str) -> list[dict[str, Any]]:
    """The documents of a KB (as the version's snapshot has them) with their parent and
    child counts in ``version``."""
    return read_published(layout, kb, version, _documents)


def _documents(snap: Snapshot) -> list[dict[str, Any]]:
    read = SnapshotReader(snap)
    columns = ["doc_id", "path", "format", "status", "error", "block_count", "image_count"]
    texts = read.column("texts", columns)
    parents, children = read.count_by_document("parents"), read.count_by_document("children")
    return [
        {**t, "parents": parents.get(t["doc_id"], 0), "children": children.get(t["doc_id"], 0)}
        for t in sorted(texts.to_pylist() if texts is not None else [], key=lambda t: t["path"])
    ]


def _local_images(layout: Layout) -> Path:
    root = local_path(layout.images)
    assert root is not None  # (only called for a local warehouse)
    return root.resolve()


def image_url(layout: Layout, stored: str) -> str | None:
    """The page's URL of an image stored under the warehouse's images folder (None otherwise)."""
    if not stored:
        return None
    if layout.remote:
        root = str(layout.images).rstrip("/") + "/"
        rel = stored[len(root) :] if stored.startswith(root) else ""
    else:
        try:
            rel = Path(stored).resolve().relative_to(_local_images(layout)).as_posix()
        except (ValueError, OSError):
            return None
    return f"/ui/images/{rel}" if _IMAGE_FILE.match(rel) else None


def image_file(layout: Layout, rel: str) -> UPath | Path:
    """The file of ``/ui/images/<rel>``: only ``<sha[:2]>/<sha>.<ext>`` inside the images folder."""
    m = _IMAGE_FILE.match(rel)
    if m is None:
        raise HttpError(404, "image_not_found", "not an image of the warehouse (expected <xx>/<sha256>.<ext>)")
    if layout.remote:  # (the pattern admits no "..": the object is under the images prefix)
        remote = layout.images / rel
        if not remote.is_file():
            raise HttpError(404, "image_not_found", f"no image {rel!r} in the warehouse")
        return remote
    root = _local_images(layout)
    path = (root / rel).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        raise HttpError(404, "image_not_found", f"no image {rel!r} in the warehouse")
    return path


def _version_text(canonical: str, same: bool, parents: Sequence[ParentBlock]) -> str:
    """The text a version's offsets index: the canonical text, or (when the document changed
    since the version was built) the text put back together from its parents."""
    if same or not parents:
        return canonical
    size = max(p.end_offset for p in parents)
    chars = [" "] * size
    for p in parents:
        if not p.derived:
            chars[p.start_offset : p.end_offset] = list(p.text)
    return "".join(chars)


#: The fields of a child chunk and of a parent block the document view shows.
_CHILD_VIEW = (
    "chunk_id", "chunk_index", "chunk_type", "text", "start_offset", "end_offset", "overlap_chars", "char_count",
    "token_count", "section_path", "page_num", "strategy", "derived",
)  # fmt: skip
_PARENT_VIEW = (
    "parent_id", "parent_index", "start_offset", "end_offset", "overlap_chars", "char_count", "token_count",
    "section_path", "page_num", "strategy", "derived",
)  # fmt: skip
_IMAGE_STORED = ("mime_type", "width", "height", "source_ref")
_IMAGE_DESCRIBED = ("degraded", "degrade_reason", "skip_reason", "description", "ocr_text", "error", "model")


def _fields(record: Any, names: Sequence[str]) -> dict[str, Any]:
    return {n: getattr(record, n) for n in names}


def document_view(layout: Layout, kb: str, version: str, doc_id: str) -> dict[str, Any]:
    """One document as ``version`` cut it: text, parents with their children, images, limits
    (all from the version's published snapshot)."""
    if not _DOC_ID.match(doc_id):
        raise HttpError(404, "document_not_found", f"no document {doc_id!r}")
    return read_published(layout, kb, version, lambda snap: _document_view(snap, doc_id))


def _document_view(snap: Snapshot, doc_id: str) -> dict[str, Any]:
    layout, kb, version = snap.layout, snap.kb, snap.version
    read = SnapshotReader(snap)
    t = read.text(doc_id)
    parents = read.parents(doc_id=doc_id)
    children = read.children(doc_id)
    if t is None and not parents:
        raise HttpError(404, "document_not_found", f"no document {doc_id!r} in {kb!r}")
    same = not parents or (t is not None and t.content_hash == parents[0].content_hash)
    text = _version_text(t.text if t is not None else "", same, parents)
    limits = model_limits(layout, kb, version)
    limit = limits["max_tokens"]

    stored = {r.image_id: r for r in read.stored_images(doc_id)}
    described = {r.image_id: r for r in read.descriptions(doc_id)}
    images: dict[str, dict[str, Any]] = {}
    for image_id in list(stored) + [i for i in described if i not in stored]:
        si, d = stored.get(image_id), described.get(image_id)
        images[image_id] = {
            "image_id": image_id,
            "url": image_url(layout, si.path if si is not None else ""),
            **{k: getattr(si, k) if si is not None else None for k in _IMAGE_STORED},
            "block_index": si.block_index if si is not None else d.block_index if d is not None else None,
            "status": (d.status if d is not None else "") or "NOT_DESCRIBED",
            **(_fields(d, _IMAGE_DESCRIBED) if d is not None else dict.fromkeys(_IMAGE_DESCRIBED)),
            "chunk_ids": [],
        }
        images[image_id]["degraded"] = bool(images[image_id]["degraded"])
        for k in ("description", "ocr_text", "model"):
            images[image_id][k] = images[image_id][k] or ""

    by_parent: dict[str, list[dict[str, Any]]] = {}
    for c in children:
        meta = _meta(c.metadata)
        chunk_image = c.image_id or str(meta.get("image_id") or "") or None
        if chunk_image and chunk_image in images:
            images[chunk_image]["chunk_ids"].append(c.chunk_id)
        by_parent.setdefault(c.parent_id, []).append(
            {
                **_fields(c, _CHILD_VIEW),
                "over_limit": limit is not None and c.token_count > limit,
                "image_id": chunk_image,
                "flags": {k: meta[k] for k in _FLAG_KEYS if k in meta},
            }
        )
    out_parents = [{**_fields(p, _PARENT_VIEW), "children": by_parent.pop(p.parent_id, [])} for p in parents]
    orphans = [c for kids in by_parent.values() for c in kids]  # children whose parent is not in the table
    child_tokens = [c["token_count"] for p in out_parents for c in p["children"]] + [c["token_count"] for c in orphans]
    plan = ((version_info(layout, kb, version).get("inputs") or {}).get("plan") or {}).get("snapshot")
    return {
        "kb": kb,
        "strategy_version": version,
        "active": active_version(layout, kb) == version,
        "plan": plan,
        "document": {
            "doc_id": doc_id,
            "path": (t.path if t is not None else "") or (parents[0].doc_path if parents else ""),
            "format": t.format if t is not None else None,
            "status": t.status if t is not None else None,
            "error": t.error if t is not None else None,
            "chars": len(text),
            "changed_since_version": not same,
        },
        "text": text,
        "model": limits,
        "stats": {
            "parents": len(out_parents),
            "children": len(child_tokens),
            "median_tokens": statistics.median(child_tokens) if child_tokens else None,
            "max_tokens": max(child_tokens, default=None),
            "over_limit": sum(1 for p in out_parents for c in p["children"] if c["over_limit"]),
        },
        "parents": out_parents,
        "orphan_children": orphans,
        "images": list(images.values()),
    }


# ---------------------------------------------------------------------------------------------- painting


@dataclass(frozen=True)
class Span:
    """A range of the text to paint: ``[start, end)`` in canonical offsets."""

    start: int
    end: int
    cls: str
    title: str
    key: str = ""


def paint(
    text: str, base: int, lo: int, hi: int, spans: Iterable[Span], markers: Iterable[tuple[int, Markup]] = ()
) -> Markup:
    """``text`` (whose index 0 is canonical offset ``base``) from ``lo`` to ``hi``, cut at every
    span boundary: a piece covered by one span gets its class, by several the class
    ``overlap``; ``markers`` are inserted before the character at their offset."""
    spans = [s for s in spans if s.start < hi and s.end > lo]
    marks = sorted((m for m in markers if lo <= m[0] <= hi), key=lambda m: m[0])
    cuts = {lo, hi} | {p for s in spans for p in (s.start, s.end) if lo < p < hi} | {m[0] for m in marks}
    points = sorted(cuts)
    out: list[str] = []
    mi = 0
    for a, b in itertools.pairwise(points):
        while mi < len(marks) and marks[mi][0] <= a:
            out.append(str(marks[mi][1]))
            mi += 1
        piece = escape(text[a - base : b - base])
        cover = [s for s in spans if s.start <= a and s.end >= b]
        if not cover:
            out.append(str(piece))
        elif len(cover) == 1:
            s = cover[0]
            key = f' data-chunk="{escape(s.key)}"' if s.key else ""
            out.append(f'<span class="{escape(s.cls)}" title="{escape(s.title)}"{key}>{piece}</span>')
        else:
            title = " and ".join(s.title for s in cover)
            out.append(
                f'<span class="{escape(cover[0].cls.split()[0])} overlap" title="{escape(title)} (overlap)">{piece}</span>'
            )
    out.extend(str(m[1]) for m in marks[mi:])
    return Markup("".join(out))


def _child_spans(kids: Sequence[dict[str, Any]], limit: int | None, differs: set[tuple[int, int]] | None) -> list[Span]:
    spans = []
    for n, c in enumerate(k for k in kids if not k["derived"]):
        cls = f"child c{n % 2}" + (
            " differs" if differs is not None and (c["start_offset"], c["end_offset"]) in differs else ""
        )
        over = " — OVER THE LIMIT" if c["over_limit"] else ""
        lim = f" / {limit}" if limit is not None else ""
        spans.append(
            Span(
                c["start_offset"],
                c["end_offset"],
                cls,
                f"child #{c['chunk_index']}: {c['token_count']}{lim} tokens{over}",
                c["chunk_id"],
            )
        )
    return spans


def _child_markers(kids: Sequence[dict[str, Any]]) -> list[tuple[int, Markup]]:
    out = []
    for c in kids:
        if c["derived"]:
            label = "image" if c["chunk_type"] in IMAGE_CHUNK_TYPES else c["chunk_type"].lower()
            out.append(
                (
                    c["start_offset"],
                    Markup('<a class="anchor" href="#chunk-{}">▣ {} #{}</a>').format(
                        c["chunk_id"], label, c["chunk_index"]
                    ),
                )
            )
        else:
            out.append(
                (
                    c["start_offset"],
                    Markup('<sup class="cmark" title="child #{0} starts">{0}</sup>').format(c["chunk_index"]),
                )
            )
    return out


def paint_parent(view: dict[str, Any], parent: dict[str, Any], differs: set[tuple[int, int]] | None = None) -> Markup:
    """A parent's own span (after its overlap prefix) with its children's boundaries."""
    own = parent["start_offset"] + parent["overlap_chars"]
    kids = parent["children"]
    return paint(
        view["text"],
        0,
        own,
        parent["end_offset"],
        _child_spans(kids, view["model"]["max_tokens"], differs),
        _child_markers(kids),
    )


def gaps(view: dict[str, Any]) -> dict[str, str]:
    """Text before each parent that no parent holds (by parent id; ``""`` key: after the last)."""
    out: dict[str, str] = {}
    pos = 0
    for p in view["parents"]:
        own = p["start_offset"] + p["overlap_chars"]
        if own > pos and view["text"][pos:own].strip():
            out[p["parent_id"]] = view["text"][pos:own]
        pos = max(pos, p["end_offset"])
    if view["text"][pos:].strip():
        out[""] = view["text"][pos:]
    return out


def paint_result(result: dict[str, Any], parent: ParentBlock | None) -> Markup:
    """A search result's parent text with its matched children highlighted."""
    hits = [h for h in result.get("hits") or [] if h.get("chunk_type") not in IMAGE_CHUNK_TYPES]
    spans = [
        Span(
            int(h["start_offset"]),
            int(h["end_offset"]),
            f"hit h{n % 2}",
            f"matched child {n + 1}",
            str(h.get("chunk_id", "")),
        )
        for n, h in enumerate(hits)
    ]
    if parent is not None and not parent.derived and len(parent.text) == parent.end_offset - parent.start_offset:
        base, text = parent.start_offset, parent.text
    else:  # no stored parent (a child returned as its own evidence): the result's text, if it is a span
        base, text = int(result.get("start_offset") or 0), str(result.get("text") or "")
        if len(text) != int(result.get("end_offset") or 0) - base:
            return Markup("{}").format(text)
    return paint(text, base, base, base + len(text), spans)


def explain_hit(hit: dict[str, Any]) -> list[str]:
    """What found a child hit, in words (``found_by`` when the search gives it, else ``channels``)."""
    found = hit.get("found_by")
    lines = []
    if isinstance(found, dict) and found:
        if len(found) > 1:
            lines.append("Found by both channels.")
        v, k = found.get("vector"), found.get("keyword")
        if isinstance(v, dict):
            lines.append(
                f"Meaning (vector): cosine similarity {v.get('cosine')} between the question's and the chunk's "
                f"embeddings; #{v.get('rank')} of the vector hits."
            )
        if isinstance(k, dict):
            lines.append(
                f"Words (keyword): BM25 score {k.get('bm25')} in the full-text index; #{k.get('rank')} of the keyword hits."
            )
    else:
        for name, s in (hit.get("channels") or {}).items():
            what = (
                "meaning (vector, cosine)"
                if name == "vector"
                else "words (keyword, BM25)"
                if name == "keyword"
                else name
            )
            lines.append(f"Found by {what}: score {s.get('score')}, #{s.get('rank')} in that channel.")
    if hit.get("score") is not None:
        lines.append(f"Fused score {hit['score']} (weighted reciprocal-rank fusion of the channels' ranks).")
    if hit.get("relevance") is not None:
        lines.append(f"Relevance {hit['relevance']} on a 0–1 scale (what score_threshold compares).")
    return lines


def explain_result(result: dict[str, Any], query: str) -> list[str]:
    n = len(result.get("hits") or [])
    lines = [f"{n} matched child chunk{'s' if n != 1 else ''} brought in this parent block."]
    if result.get("relevance") is not None:
        lines.append(f"Relevance {result['relevance']} (0–1).")
    if result.get("rerank_score") is not None:
        lines.append(f"Reranked: the reranker scored it {result['rerank_score']}.")
    if result.get("boost"):
        lines.append(f"Boost {result['boost']} for several matched children in one parent.")
    if result.get("sub_question") and result["sub_question"] != query:
        lines.append(f"Found for the sub-question “{result['sub_question']}”.")
    if result.get("truncated"):
        lines.append("The evidence returned to an application is a window of this parent (evidence budget).")
    return lines


# ---------------------------------------------------------------------------------------------- templates


@functools.lru_cache(maxsize=1)
def templates() -> Environment:
    env = Environment(
        loader=PackageLoader("corpus_pipeline.serve", "templates"),
        autoescape=select_autoescape(["html"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(
        paint_parent=paint_parent,
        paint_result=paint_result,
        explain_hit=explain_hit,
        explain_result=explain_result,
        gaps=gaps,
    )
    return env


def render(name: str, **context: Any) -> HTMLResponse:
    return HTMLResponse(templates().get_template(name).render(**context))


# ---------------------------------------------------------------------------------------------- routes

router = APIRouter(include_in_schema=False, dependencies=GUARDED)


def _layout(request: Request) -> Layout:
    return server(request).layout


@router.get("/ui/api/kbs/{kb}/documents")
def api_documents(request: Request, kb: str, version: str | None = Query(None, max_length=80)) -> dict[str, Any]:
    layout = _layout(request)
    v = check_version(layout, kb, version)
    return {"kb": kb, "strategy_version": v, "documents": documents(layout, kb, v)}


@router.get("/ui/api/kbs/{kb}/documents/{doc_id}")
def api_document(
    request: Request, kb: str, doc_id: str, version: str | None = Query(None, max_length=80)
) -> dict[str, Any]:
    layout = _layout(request)
    return document_view(layout, kb, check_version(layout, kb, version), doc_id)


@router.get("/ui/images/{prefix}/{name}")
def image(request: Request, prefix: str, name: str) -> Response:
    path = image_file(_layout(request), f"{prefix}/{name}")
    mime = _IMAGE_MIME.get(path.suffix.lstrip("."), "application/octet-stream")
    headers = {
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; sandbox",  # an SVG runs nothing
        "Cache-Control": "private, max-age=86400, immutable",  # content-addressed
    }
    return Response(path.read_bytes(), media_type=mime, headers=headers)


@router.get("/ui/fragments/documents")
def fragment_documents(
    request: Request, kb: str = Query(max_length=64), version: str | None = Query(None, max_length=80)
) -> HTMLResponse:
    layout = _layout(request)
    v = check_version(layout, kb, version)
    return render(
        "_documents.html", kb=kb, version=v, docs=documents(layout, kb, v), versions=built_versions(layout, kb)
    )


@router.get("/ui/fragments/document")
def fragment_document(
    request: Request,
    kb: str = Query(max_length=64),
    doc: str = Query(max_length=80),
    version: str | None = Query(None, max_length=80),
) -> HTMLResponse:
    layout = _layout(request)
    view = document_view(layout, kb, check_version(layout, kb, version), doc)
    return render("_document.html", view=view, versions=built_versions(layout, kb), differs=None)


@router.get("/ui/fragments/compare")
def fragment_compare(
    request: Request,
    kb: str = Query(max_length=64),
    doc: str = Query(max_length=80),
    a: str | None = Query(None, max_length=80),
    b: str | None = Query(None, max_length=80),
) -> HTMLResponse:
    layout = _layout(request)
    check_version(layout, kb, None)
    built = built_versions(layout, kb)
    if not (a and b) and len(built) < 2:
        raise HttpError(409, "one_version", f"{kb!r} has one built version ({', '.join(built)}): nothing to compare")
    a = check_version(layout, kb, a or built[1])
    b = check_version(layout, kb, b or (built[0] if built[0] != a else built[1]))
    left, right = document_view(layout, kb, a, doc), document_view(layout, kb, b, doc)
    bounds = [
        {(c["start_offset"], c["end_offset"]) for p in v["parents"] for c in p["children"]} for v in (left, right)
    ]
    parent_bounds = [{(p["start_offset"], p["end_offset"]) for p in v["parents"]} for v in (left, right)]
    return render(
        "_compare.html",
        kb=kb,
        doc=doc,
        views=[left, right],
        versions=built,
        differs=[bounds[0] - bounds[1], bounds[1] - bounds[0]],
        parents_differ=[len(parent_bounds[0] - parent_bounds[1]), len(parent_bounds[1] - parent_bounds[0])],
    )


@router.get("/ui/fragments/search")
def fragment_search(
    request: Request,
    kb: str = Query(max_length=64),
    q: str = Query(min_length=1, max_length=2000),
    version: str | None = Query(None, max_length=80),
    top_k: int | None = Query(None, ge=1, le=50),
) -> HTMLResponse:
    layout = _layout(request)
    v = check_version(layout, kb, version)
    registry = server(request).registry
    try:
        handle = registry.get(kb)
        result = handle.search(q, top_k=top_k, version=v)
        data = result.to_dict()
    except KeyError:
        raise HttpError(404, "kb_not_found", f"no knowledge base {kb!r}") from None
    except (ConfigError, ValueError) as exc:
        raise HttpError(422, "invalid_request", mask(str(exc))[:1000]) from None
    except StoreError as exc:
        raise HttpError(409, "not_indexed", mask(str(exc))[:1000]) from None
    snap = result.snapshot if result.snapshot is not None else resolve(layout, kb, v)  # (what the search read)
    docs = {h.doc_id for r in result.results for h in r.hits}
    parents = {
        p.parent_id: p
        for p in SnapshotReader(snap).parents([r.parent_id for r in result.results], docs=None if "" in docs else docs)
    }
    doc_ids = {pid: p.doc_id for pid, p in parents.items()}
    return render(
        "_search.html",
        data=data,
        parents=parents,
        doc_ids=doc_ids,
        kb=kb,
        version=v,
        model=model_limits(layout, kb, v),
        hit_images=_hit_images(snap, result),
    )


def _hit_images(snap: Snapshot, result: SearchResult) -> dict[str, str]:
    """The page URL of the image of each image hit, by chunk id."""
    hits = [h for r in result.results for h in r.hits if h.chunk_type in IMAGE_CHUNK_TYPES]
    if not hits:
        return {}
    ids = [h.chunk_id for h in hits]
    read = SnapshotReader(snap)
    docs = {h.doc_id for h in hits}
    chunks = read.children(ids=ids, docs=None if "" in docs else docs)
    image_ids = {c.image_id for c in chunks if c.image_id}
    stored = {im.image_id: im.path for im in read.stored_images(image_ids=image_ids)} if image_ids else {}
    out = {}
    for c in chunks:
        url = image_url(snap.layout, stored.get(c.image_id or "") or "")
        if url:
            out[c.chunk_id] = url
    return out


# ---------------------------------------------------------------------------------------------- the public shell


async def _page(_request: Any) -> Response:
    html = templates().get_template("page.html").render()
    return HTMLResponse(
        html,
        headers={"Content-Security-Policy": PAGE_CSP, "X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"},
    )


async def _static(request: Any) -> Response:
    name = request.path_params["name"]
    if name not in STATIC_FILES:  # a fixed set: no path from the request reaches the disk
        return JSONResponse({"error": {"code": "not_found", "message": f"no static file {name!r}"}}, status_code=404)
    return Response(
        (STATIC / name).read_bytes(),
        media_type=STATIC_FILES[name],
        headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"},
    )


_PUBLIC = Router(
    routes=[Route("/", _page, methods=["GET", "HEAD"]), Route("/ui/static/{name}", _static, methods=["GET", "HEAD"])]
)


def _page_shell(path: str) -> bool:
    """The page shell and its static files (public paths: ``serve.deps.PUBLIC``)."""
    return is_public(path) and (path == "/" or path.startswith(PUBLIC_PREFIX))


class PublicPages:
    """Serves the page shell and its static files before the app's middleware (the key
    check): the outermost layer of the app. Everything else goes on unchanged."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and scope.get("method") in ("GET", "HEAD") and _page_shell(path):
            await _PUBLIC(scope, receive, send)
        else:
            await self.app(scope, receive, send)


def mount_web(app: FastAPI) -> None:
    """Add the page to the app of ``corpus serve`` (``create_app`` calls it)."""
    app.include_router(router)
    app.add_middleware(PublicPages)
