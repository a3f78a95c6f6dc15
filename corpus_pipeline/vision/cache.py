"""A small on-disk JSON cache for vision and OCR results, keyed by image hash (+ model).

``<cache_dir>/vision/<key[:2]>/<key>.json``, written to a temporary file and renamed, so
a crash never leaves half an entry and concurrent writers of one key are harmless.
Only successes are cached: a failed vision call is tried again on the next run.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from corpus_pipeline.store.jsoncache import JsonCache


class ResultCache(JsonCache):
    def __init__(self, cache_dir: Path | None) -> None:
        super().__init__(cache_dir / "vision" if cache_dir is not None else None)

    @staticmethod
    def key(*parts: str) -> str:
        return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()
