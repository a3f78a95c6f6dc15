"""Describing a document's images: the vision model first, OCR as the fallback (seed 000 §6.2).

For each ``ExtractedImage``, one ``ImageDescription``:

=============  ========  ===================  =============================================
status         degraded  reason               when
=============  ========  ===================  =============================================
DESCRIBED      false     -                    the vision model answered (or its cached answer)
DEGRADED       true      VLM_FAILED_WITH_OCR  the vision call failed; OCR found text
OCR_ONLY       true      OCR_ONLY_NO_VLM      no vision model is configured; OCR found text
SKIPPED        -         ``skip_reason``      no description and no OCR text, an unreadable or
                                              tiny image, or image description disabled
=============  ========  ===================  =============================================

Vision answers and OCR text are cached on disk by image hash (and model / languages), so a
second run over the same images makes no calls. After ``MAX_CONSECUTIVE_FAILURES`` failed
vision calls in a row the model is considered down for the rest of the run (no more
timeouts to wait for); every image then goes to OCR, marked as degraded with the error.
Every error and reason stored is masked and capped (``corpus_pipeline.secrets.mask_error``):
no key of any shape reaches ``image_descriptions``, the chunks or the index.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from upath import UPath

from corpus_pipeline.errors import ModelError
from corpus_pipeline.language import is_chinese
from corpus_pipeline.models import ExtractedImage, ImageDescription, ImageStatus
from corpus_pipeline.secrets import mask_error
from corpus_pipeline.vision.cache import ResultCache
from corpus_pipeline.vision.client import PROMPT_VERSION, OpenAIVisionClient, VisionAnswer, VisionClient
from corpus_pipeline.vision.config import VisionConfig
from corpus_pipeline.vision.ocr import OCR_VERSION, ocr_image

VLM_FAILED_WITH_OCR = "VLM_FAILED_WITH_OCR"
OCR_ONLY_NO_VLM = "OCR_ONLY_NO_VLM"
MAX_CONSECUTIVE_FAILURES = 3
_READABLE = {"image/png", "image/jpeg", "image/gif", "image/bmp", "image/tiff", "image/webp", "image/x-icon"}
_CJK = re.compile(r"[\u4e00-\u9fff]")

OcrFunction = Callable[[bytes, str], str]


def degraded_embedding_text(ocr_text: str, context: str = "") -> str:
    """Seed 000 §6.2: ``"[图片]" + ocrText`` in a Chinese document, ``[image]`` otherwise; the
    document's language is read from the text around the image (``context``), else from
    the OCR text (any Chinese character)."""
    chinese = is_chinese(context) if context.strip() else bool(_CJK.search(ocr_text))
    return ("[图片] " if chinese else "[image] ") + ocr_text


def skip_reason(image: ExtractedImage, s: VisionConfig) -> str | None:
    """Why ``image`` gets no description without even reading it (None: it is described)."""
    if not s.enabled:
        return "DISABLED: vision.enabled is false in kb.yaml"
    if image.mime_type not in _READABLE:
        return f"UNSUPPORTED_FORMAT: {image.mime_type} cannot be sent to a vision model or OCR"
    if image.width and image.height and min(image.width, image.height) < s.min_side_px:
        return f"TOO_SMALL: {image.width}x{image.height} px, under vision.min_side_px = {s.min_side_px}"
    if not image.path:
        return "NOT_STORED: the image bytes were not stored at parsing (no images_dir)"
    return None


def _vlm_key(image: ExtractedImage, model: str) -> str:
    return ResultCache.key("vlm", model, PROMPT_VERSION, image.image_id)


def _ocr_key(image: ExtractedImage, languages: str) -> str:
    return ResultCache.key("ocr", languages, OCR_VERSION, image.image_id)


def images_to_describe(
    images: Sequence[ExtractedImage], settings: VisionConfig, cache_dir: Path | None
) -> list[ExtractedImage]:
    """The images describing would call the vision model or OCR for (neither skipped nor
    cached): one per image hash, first occurrence, in order. What a fanned-out run hands
    to its batches; the rest are described from the cache (or skipped) where they are."""
    cache = ResultCache(cache_dir)
    out: list[ExtractedImage] = []
    seen: set[str] = set()
    for image in images:
        if image.image_id in seen or skip_reason(image, settings):
            continue
        seen.add(image.image_id)
        if settings.has_vision_model and settings.model:
            if cache.get(_vlm_key(image, settings.model)) is None:
                out.append(image)
        elif settings.ocr and cache.get(_ocr_key(image, settings.ocr_languages)) is None:
            out.append(image)
    return out


class _Describer:
    def __init__(
        self, settings: VisionConfig, cache_dir: Path | None, client: VisionClient | None, ocr: OcrFunction
    ) -> None:
        self.settings = settings
        self.cache = ResultCache(cache_dir)
        self.ocr = ocr
        self.client = client
        self.client_error: str | None = None
        if client is None and settings.has_vision_model:
            try:
                self.client = OpenAIVisionClient(settings)
            except ModelError as exc:
                self.client_error = str(exc)
        self.failures = 0
        self.memo: dict[tuple[str, str], VisionAnswer | str] = {}  # per run: answer or error

    # ----------------------------------------------------------------- pieces
    def vision(self, image: ExtractedImage, data: bytes) -> VisionAnswer | str:
        """The model's answer, or the error text."""
        assert self.settings.model
        model = self.client.model if self.client is not None else self.settings.model
        memo_key = (image.image_id, model)
        if memo_key in self.memo:
            return self.memo[memo_key]
        key = _vlm_key(image, model)
        cached = self.cache.get(key)
        if cached is not None:
            answer = VisionAnswer(
                cached["description"], tuple(cached["keywords"]), cached["image_type"], cached["embedding_text"]
            )
            self.memo[memo_key] = answer
            return answer
        if self.client is None:
            return self.client_error or "no vision client"
        if self.failures >= MAX_CONSECUTIVE_FAILURES:
            return f"vision model skipped after {self.failures} consecutive failures"
        context = "\n".join(t for t in (image.context_before, image.context_after) if t)
        try:
            answer = self.client.describe(data, image.mime_type, context)
        except ModelError as exc:
            self.failures += 1
            self.memo[memo_key] = str(exc)
            return str(exc)
        self.failures = 0
        self.cache.put(
            key,
            {
                "description": answer.description,
                "keywords": list(answer.keywords),
                "image_type": answer.image_type,
                "embedding_text": answer.embedding_text,
            },
        )
        self.memo[memo_key] = answer
        return answer

    def ocr_text(self, image: ExtractedImage, data: bytes) -> tuple[str, str | None]:
        """``(text, error)``; cached by image hash and languages."""
        langs = self.settings.ocr_languages
        key = _ocr_key(image, langs)
        cached = self.cache.get(key)
        if cached is not None:
            return str(cached.get("text", "")), None
        try:
            text = self.ocr(data, langs)
        except ModelError as exc:
            return "", str(exc)
        except Exception as exc:  # noqa: BLE001 - an image tesseract cannot read must not stop the KB
            return "", f"OCR failed: {type(exc).__name__}: {exc}"
        self.cache.put(key, {"text": text})
        return text, None

    # ----------------------------------------------------------------- one image
    def describe(self, image: ExtractedImage) -> ImageDescription:
        base: dict[str, Any] = {
            "image_id": image.image_id,
            "doc_id": image.doc_id,
            "block_index": image.block_index,
            "page_num": image.page_num,
        }

        def skipped(reason: str, error: str | None = None) -> ImageDescription:
            reason = mask_error(reason)
            return ImageDescription(
                **base,
                status=ImageStatus.SKIPPED.value,
                skip_reason=reason,
                error=mask_error(error) if error else None,
                metadata={"skip_reason": reason},
            )

        s = self.settings
        reason = skip_reason(image, s)
        if reason:
            return skipped(reason)
        try:
            data = UPath(image.path).read_bytes()
        except OSError as exc:
            return skipped(f"NOT_READABLE: {image.path}: {exc.strerror or exc}")

        vlm_error: str | None = None
        if s.has_vision_model:
            answer = self.vision(image, data)
            if isinstance(answer, VisionAnswer):
                return ImageDescription(
                    **base,
                    status=ImageStatus.DESCRIBED.value,
                    image_type=answer.image_type,
                    description=answer.description,
                    keywords=answer.keywords,
                    embedding_text=answer.embedding_text,
                    model=self.client.model if self.client else s.model or "",
                )
            vlm_error = answer
        if not s.ocr:
            reason = "VLM_FAILED_OCR_DISABLED" if vlm_error else "NO_VLM_OCR_DISABLED"
            return skipped(f"{reason}: no vision model answer and vision.ocr is false", vlm_error)
        text, ocr_error = self.ocr_text(image, data)
        if not text.strip():
            reason = "VLM_FAILED_NO_OCR_TEXT" if vlm_error else "NO_VLM_NO_OCR_TEXT"
            error = "; ".join(e for e in (vlm_error, ocr_error) if e) or None
            return skipped(f"{reason}: OCR found no text" if not ocr_error else f"{reason}: {ocr_error}", error)
        reason = VLM_FAILED_WITH_OCR if vlm_error else OCR_ONLY_NO_VLM
        return ImageDescription(
            **base,
            status=(ImageStatus.DEGRADED if vlm_error else ImageStatus.OCR_ONLY).value,
            image_type="IMAGE",
            description="",
            embedding_text=degraded_embedding_text(text, image.context_before + image.context_after),
            ocr_text=text,
            degraded=True,
            degrade_reason=reason,
            error=mask_error(vlm_error) if vlm_error else None,
            metadata={"degraded": True, "degrade_reason": reason},
        )


def describe_images(
    images: Sequence[ExtractedImage],
    settings: VisionConfig,
    cache_dir: Path | None,
    *,
    client: VisionClient | None = None,
    ocr: OcrFunction = ocr_image,
    described: dict[str, ImageDescription] | None = None,
) -> list[ImageDescription]:
    """One description per image, in the given order; never raises for one bad image.

    ``cache_dir``: the warehouse cache folder (``Layout.from_env().cache``); None disables
    the cache. ``client``: a ``VisionClient`` to use instead of the OpenAI-compatible one
    built from ``settings``. ``ocr``: the OCR function ``(bytes, languages) -> text``.
    ``described``: descriptions already made (by a batch of a fanned-out run), by image
    hash: taken as they are (a vision failure in a batch is not retried here).
    """
    describer = _Describer(settings, cache_dir, client, ocr)
    try:
        out = []
        for image in images:
            done = (described or {}).get(image.image_id)
            if done is not None:  # described by a batch: this occurrence's place, its answer
                out.append(
                    dataclasses.replace(
                        done, doc_id=image.doc_id, block_index=image.block_index, page_num=image.page_num
                    )
                )
            else:
                out.append(describer.describe(image))
        return out
    finally:
        if client is None and isinstance(describer.client, OpenAIVisionClient):
            describer.client.close()  # the one it opened (a client passed in is the caller's)
