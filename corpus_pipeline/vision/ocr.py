"""OCR with tesseract (``pytesseract``), the fallback when the vision model fails or is absent.

``eng+chi_sim`` by default. Page segmentation 3 (automatic) reads mixed screenshots and
tables best; Chinese-only images often come back empty or garbled from it, so when the
first pass finds little, ``--psm 6`` (one uniform block) is tried and the richer result
kept. Tesseract puts a space between Chinese characters; those spaces are removed.
"""

from __future__ import annotations

import io
import re
import shutil

from corpus_pipeline.errors import ModelError

_CJK = r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]"
_CJK_SPACE = re.compile(rf"(?<={_CJK})[ \t]+(?={_CJK})")
_MEANINGFUL = re.compile(rf"[A-Za-z0-9]|{_CJK}")
OCR_VERSION = "1"  # part of the cache key: bump when the OCR procedure changes


def tesseract_available() -> bool:
    return shutil.which("tesseract") is not None


def clean_ocr_text(text: str) -> str:
    """Remove the spaces tesseract puts between CJK characters, and blank-line noise."""
    lines = [_CJK_SPACE.sub("", ln).strip() for ln in text.splitlines()]
    out: list[str] = []
    for ln in lines:
        if ln or (out and out[-1]):
            out.append(ln)
    return "\n".join(out).strip()


def _score(text: str) -> int:
    return len(_MEANINGFUL.findall(text))


def ocr_image(data: bytes, languages: str = "eng+chi_sim") -> str:
    """The text tesseract reads in the image ("" if none); ModelError if tesseract is missing."""
    import pytesseract
    from PIL import Image

    if not tesseract_available():
        raise ModelError(
            "tesseract is not installed; install it (apt-get install tesseract-ocr tesseract-ocr-chi-sim) "
            "or set vision.ocr: false in kb.yaml"
        )
    with Image.open(io.BytesIO(data)) as im:
        im.load()
        image = im.convert("RGB") if im.mode not in ("RGB", "L") else im.copy()
    try:
        first = clean_ocr_text(pytesseract.image_to_string(image, lang=languages, config="--psm 3"))
        if _score(first) >= 20:
            return first
        second = clean_ocr_text(pytesseract.image_to_string(image, lang=languages, config="--psm 6"))
    except pytesseract.TesseractError as exc:
        raise ModelError(f"tesseract failed ({languages}): {exc}") from exc
    return second if _score(second) > _score(first) else first
