"""Fixtures for vision tests: the local OpenAI-compatible server and stored test images."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest
from parsing.builders import CJK_FONT, png
from support.openai_server import openai_server  # noqa: F401  (the fixture)

from corpus_pipeline.models import ExtractedImage

MakeImage = Callable[..., ExtractedImage]


@pytest.fixture
def make_image(tmp_path: Path) -> MakeImage:
    """Store a PNG with ``text`` and return its ExtractedImage (block ``block_index``)."""

    def make(text: str = "", block_index: int = 0, cjk: bool = False, **kw: object) -> ExtractedImage:
        if cjk and not CJK_FONT.exists():
            pytest.skip("a CJK font (fonts-wqy-microhei) is needed to draw Chinese test images")
        data = png(text, cjk=cjk, **kw)  # type: ignore[arg-type]
        sha = hashlib.sha256(data).hexdigest()
        path = tmp_path / "images" / f"{sha}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return ExtractedImage(
            sha,
            "doc1",
            block_index,
            1,
            "image/png",
            str(path),
            context_before="before",
            context_after="after",
            width=360,
            height=120,
        )

    return make
