"""A text's language, as labels and headings in evidence need it: Chinese or not.

    is_chinese("部署前检查端口")        True
    image_label("Deploy 图", chinese=False)   "[image] Deploy 图"

The language of a document decides how its images are labelled (``[图片]`` in a Chinese one,
``[image]`` otherwise; issue 41): an English page whose image description holds one Chinese
character is still English.
"""

from __future__ import annotations

import re

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_SPACE = re.compile(r"\s")
IMAGE_LABELS = ("[image]", "[图片]")


def is_chinese(text: str) -> bool:
    """Whether at least a fifth of the visible characters of ``text`` are Han."""
    head = text[:2000]
    visible = len(head) - len(_SPACE.findall(head))  # (a regex: a loop over characters cost ~3 ms a search)
    return visible > 0 and len(_CJK.findall(head)) * 5 >= visible


def has_han(text: str) -> bool:
    return _CJK.search(text) is not None


def image_label(text: str, *, chinese: bool | None = None) -> str:
    """``text`` (an image's description or OCR text) labelled as an image in the language of
    its document (``chinese``; None when unknown: any Han character in ``text`` decides). A
    label already there is replaced when it is the other language's."""
    text = " ".join(text.split())
    for label in IMAGE_LABELS:
        if text.startswith(label):
            if chinese is None:
                return text
            text = text[len(label) :].lstrip()
            break
    if chinese is None:
        chinese = has_han(text)
    return ("[图片] " if chinese else "[image] ") + text
