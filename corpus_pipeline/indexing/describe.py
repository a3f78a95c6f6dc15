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


def describe_kb_images(
    kb: KnowledgeBase, parsed: dict[str, pa.Table], cache_dir: Path | None, *, progress: ProgressFn | None = None
) -> StageResult:
    """Describe every extracted image; unchanged images cost nothing on a re-run.
    ``progress`` is told as each image is done (``describe``, done, total, ``images``)."""
    from corpus_pipeline.vision import describe_images, vision_settings

    images = schemas.from_table(parsed["images"], ExtractedImage)
    todo = tracked(images, progress, "describe", "images")
    descs = describe_images(todo, vision_settings(kb.config.vision), cache_dir) if images else []
    stats = DescribeStats(images=len(images), by_status=dict(sorted(Counter(d.status for d in descs).items())))
    return StageResult(schemas.to_table(descs, ImageDescription), stats)


def descriptions_by_doc(descriptions: pa.Table) -> dict[str, list[ImageDescription]]:
    out: dict[str, list[ImageDescription]] = {}
    for d in schemas.from_table(descriptions, ImageDescription):
        out.setdefault(d.doc_id, []).append(d)
    return out
