"""Stage 3, describe: a description of every extracted image (the ``image_descriptions``
asset): vision model, OCR fallback, or skipped with the reason; cached by image hash."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa

from corpus_pipeline.indexing.stats import DescribeStats, StageResult
from corpus_pipeline.kbconfig import KnowledgeBase
from corpus_pipeline.models import ExtractedImage, ImageDescription
from corpus_pipeline.progress import ProgressFn, tracked
from corpus_pipeline.store import schemas


def images_to_describe(kb: KnowledgeBase, parsed: dict[str, pa.Table], cache_dir: Path | None) -> list[ExtractedImage]:
    """The images that need the vision model or OCR (neither skipped nor cached), one per
    image hash: the work a fanned-out run cuts into batches."""
    from corpus_pipeline.vision import vision_settings
    from corpus_pipeline.vision.describe import images_to_describe as pending

    images = schemas.from_table(parsed["images"], ExtractedImage)
    return pending(images, vision_settings(kb.config.vision), cache_dir)


def describe_batch(
    kb: KnowledgeBase, images: list[ExtractedImage], cache_dir: Path | None, *, progress: ProgressFn | None = None
) -> list[ImageDescription]:
    """One batch of ``images_to_describe`` described (answers cached as they come)."""
    from corpus_pipeline.vision import describe_images, vision_settings

    todo = tracked(images, progress, "describe", "images")
    return describe_images(todo, vision_settings(kb.config.vision), cache_dir) if images else []


def merge_descriptions(
    kb: KnowledgeBase,
    parsed: dict[str, pa.Table],
    cache_dir: Path | None,
    parts: list[list[ImageDescription]],
) -> StageResult:
    """A description per image row, in table order: a batch's, placed at this row, or made
    here (skipped, or from the cache)."""
    from corpus_pipeline.vision import describe_images, vision_settings

    images = schemas.from_table(parsed["images"], ExtractedImage)
    done = {d.image_id: d for part in parts for d in part}
    descs = describe_images(images, vision_settings(kb.config.vision), cache_dir, described=done) if images else []
    stats = DescribeStats(images=len(images), by_status=dict(sorted(Counter(d.status for d in descs).items())))
    return StageResult(schemas.to_table(descs, ImageDescription), stats)


def describe_kb_images(
    kb: KnowledgeBase, parsed: dict[str, pa.Table], cache_dir: Path | None, *, progress: ProgressFn | None = None
) -> StageResult:
    """Describe every extracted image; unchanged images cost nothing on a re-run: the
    fanned-out asset's plan, one batch and merge in one process. ``progress`` is told as
    each image that needs the model or OCR is done (``describe``, done, total, ``images``)."""
    todo = images_to_describe(kb, parsed, cache_dir)
    return merge_descriptions(kb, parsed, cache_dir, [describe_batch(kb, todo, cache_dir, progress=progress)])


def descriptions_by_doc(descriptions: pa.Table) -> dict[str, list[ImageDescription]]:
    out: dict[str, list[ImageDescription]] = {}
    for d in schemas.from_table(descriptions, ImageDescription):
        out.setdefault(d.doc_id, []).append(d)
    return out
