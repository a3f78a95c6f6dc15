"""Images found in documents: read, identified, stored content-addressed, given context.

Bytes are stored once per content under ``<images_dir>/<sha[:2]>/<sha>.<ext>`` (written to
a temporary file and renamed, so a crash never leaves a half image). ``images_dir=None``
means "identify but do not store" (``ExtractedImage.path == ""``).

References in markdown / HTML are resolved on disk only: relative to the document's
folder (a leading ``/`` means the KB folder); ``data:`` URIs are decoded; ``http(s)://``
and other remote references are never fetched; a path that resolves outside the KB folder
(``../``, absolute paths, symlinks) is refused. A reference that cannot be read still
gives an IMAGE block, whose ``metadata["image_error"]`` says why.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import os
import urllib.parse
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from upath import UPath

from corpus_pipeline.models import Block, BlockType, ExtractedImage
from corpus_pipeline.store.files import put_bytes

MAX_IMAGE_BYTES = 50 * 1024 * 1024
CONTEXT_CHARS = 300

_PIL_MIME = {
    "PNG": "image/png",
    "JPEG": "image/jpeg",
    "GIF": "image/gif",
    "BMP": "image/bmp",
    "TIFF": "image/tiff",
    "WEBP": "image/webp",
    "ICO": "image/x-icon",
    "MPO": "image/jpeg",
}
_EXT_MIME = {
    ".svg": "image/svg+xml",
    ".emf": "image/emf",
    ".wmf": "image/wmf",
}


def identify(data: bytes, name_hint: str = "") -> tuple[str, int, int] | None:
    """``(mime_type, width, height)`` of image bytes; None if they are not an image."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as im:
            mime = _PIL_MIME.get(im.format or "")
            if mime is not None:
                return mime, int(im.width), int(im.height)
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError):
        pass
    ext = os.path.splitext(name_hint.lower())[1]
    if ext == ".svg" or (data[:256].lstrip().startswith((b"<svg", b"<?xml")) and b"<svg" in data[:2048]):
        return "image/svg+xml", 0, 0
    if ext in _EXT_MIME:
        return _EXT_MIME[ext], 0, 0
    return None


def _extension(mime: str) -> str:
    return {"image/jpeg": ".jpg", "image/svg+xml": ".svg", "image/x-icon": ".ico"}.get(mime, "." + mime.split("/")[-1])


class ImageCollector:
    """Collects the images of one document while its blocks are built."""

    def __init__(self, doc_id: str, images_dir: UPath | Path | None, kb_dir: Path, doc_path: Path) -> None:
        self.doc_id = doc_id
        self.images_dir = images_dir
        self.kb_root = kb_dir.resolve()
        self.doc_dir = doc_path.parent
        self.images: list[ExtractedImage] = []

    # ----------------------------------------------------------------- sources
    def read_reference(self, src: str) -> tuple[bytes | None, str | None]:
        """The bytes a markdown/HTML ``src`` points at, or ``(None, reason)``. Never fetches."""
        src = src.strip().strip("<>")
        if not src:
            return None, "empty image reference"
        low = src.lower()
        if low.startswith("data:"):
            header, _, payload = src.partition(",")
            try:
                if ";base64" in header.lower():
                    return base64.b64decode(payload, validate=False), None
                return urllib.parse.unquote_to_bytes(payload), None
            except (binascii.Error, ValueError) as exc:
                return None, f"undecodable data: URI ({exc})"
        scheme = urllib.parse.urlsplit(src).scheme
        if low.startswith("//") or (scheme and scheme != "file" and len(scheme) > 1):
            return None, f"remote image {src!r} not fetched (only files inside the KB folder are read)"
        path_part = urllib.parse.unquote(
            urllib.parse.urlsplit(src).path if scheme == "file" else src.split("#")[0].split("?")[0]
        )
        if scheme == "file" or (os.path.isabs(path_part) and not path_part.startswith("/")):
            return None, f"absolute image path {src!r} refused: it must be relative to the document"
        candidate = (self.kb_root / path_part.lstrip("/")) if path_part.startswith("/") else (self.doc_dir / path_part)
        try:
            resolved = candidate.resolve()
        except (OSError, RuntimeError) as exc:
            return None, f"cannot resolve image path {src!r}: {exc}"
        if not resolved.is_relative_to(self.kb_root):
            return None, f"image path {src!r} escapes the KB folder; refused"
        if not resolved.is_file():
            return None, f"image file {src!r} not found"
        if resolved.stat().st_size > MAX_IMAGE_BYTES:
            return None, f"image file {src!r} is larger than {MAX_IMAGE_BYTES // 1048576} MB"
        return resolved.read_bytes(), None

    # ----------------------------------------------------------------- storing
    def add(
        self, data: bytes, *, block_index: int, page_num: int | None, source_ref: str, name_hint: str = ""
    ) -> tuple[ExtractedImage | None, str | None]:
        """Identify and store ``data``; ``(image, None)`` or ``(None, reason)``."""
        info = identify(data, name_hint or source_ref)
        if info is None:
            return None, f"{source_ref or 'image'}: not a readable image"
        mime, width, height = info
        sha = hashlib.sha256(data).hexdigest()
        path = self._store(sha, mime, data) if self.images_dir is not None else ""
        image = ExtractedImage(
            image_id=sha,
            doc_id=self.doc_id,
            block_index=block_index,
            page_num=page_num,
            mime_type=mime,
            path=path,
            source_ref=source_ref,
            width=width,
            height=height,
        )
        self.images.append(image)
        return image, None

    def _store(self, sha: str, mime: str, data: bytes) -> str:
        assert self.images_dir is not None
        target = self.images_dir / sha[:2] / f"{sha}{_extension(mime)}"
        if not target.exists():
            put_bytes(target, data)
        return str(target)

    # ----------------------------------------------------------------- context
    def finish(self, blocks: Sequence[Block]) -> tuple[ExtractedImage, ...]:
        """The images with their neighbouring text (the text blocks before and after them)."""
        return tuple(with_context(im, blocks) for im in self.images)


def with_context(image: ExtractedImage, blocks: Sequence[Block], limit: int = CONTEXT_CHARS) -> ExtractedImage:
    """Fill ``context_before`` / ``context_after`` from the non-image blocks around the image."""
    before: list[str] = []
    size = 0
    for b in reversed(blocks[: image.block_index]):
        if b.block_type == BlockType.IMAGE.value or not b.text:
            continue
        before.append(b.text)
        size += len(b.text)
        if size >= limit:
            break
    after: list[str] = []
    size = 0
    for b in blocks[image.block_index + 1 :]:
        if b.block_type == BlockType.IMAGE.value or not b.text:
            continue
        after.append(b.text)
        size += len(b.text)
        if size >= limit:
            break
    text_before = "\n".join(reversed(before))[-limit:]
    text_after = "\n".join(after)[:limit]
    return replace(image, context_before=text_before, context_after=text_after)
