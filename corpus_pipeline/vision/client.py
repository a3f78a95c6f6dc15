"""The vision model behind an OpenAI-compatible chat endpoint (vLLM, Ollama, llama.cpp, OpenAI).

One call per image: the image goes as a ``data:`` URL ``image_url`` part with the text of
the document around it, and the model is asked for a JSON object::

    {"description": "...", "keywords": ["..."], "image_type": "IMAGE" | "TABLE_IMAGE",
     "embedding_text": "..."}

The answer is parsed leniently (code fences and text around the object are tolerated)
and validated strictly (a description is required; an unknown image type is an error).
Every failure is raised as ``ModelError``; the caller decides the fallback. The HTTP side
(timeout, retries, key masking) is the project's one LLM client, ``corpus_pipeline.llm``.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from typing import Any, Protocol

from corpus_pipeline.errors import ModelError
from corpus_pipeline.vision.config import VisionConfig

PROMPT_VERSION = "1"  # part of the cache key: bump when the prompt or parsing changes

SYSTEM_PROMPT = (
    "You describe images from technical documents for a search index. Answer with one JSON "
    'object only: {"description": string, "keywords": [string], "image_type": "IMAGE" or '
    '"TABLE_IMAGE", "embedding_text": string}. Use TABLE_IMAGE when the image is mainly a '
    "table. Transcribe important visible text (labels, numbers, table cells). Write in the "
    "language of the surrounding document text."
)


@dataclass(frozen=True)
class VisionAnswer:
    description: str
    keywords: tuple[str, ...]
    image_type: str
    embedding_text: str


class VisionClient(Protocol):
    """Anything that can describe one image: the OpenAI-compatible client, or a test fake."""

    model: str

    def describe(self, image: bytes, mime_type: str, context: str) -> VisionAnswer: ...


def parse_answer(content: str) -> VisionAnswer:
    """The model's JSON answer, validated; ModelError with the reason otherwise."""
    text = content.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.S)
    if fenced:
        text = fenced.group(1).strip()
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise ModelError(f"the vision model did not answer with a JSON object: {content[:200]!r}")
    try:
        obj = json.loads(text[start : end + 1])
    except json.JSONDecodeError as exc:
        raise ModelError(f"the vision model's JSON is malformed ({exc}): {content[:200]!r}") from exc
    if not isinstance(obj, dict):
        raise ModelError("the vision model's answer is not a JSON object")
    description = str(obj.get("description") or "").strip()
    if not description:
        raise ModelError("the vision model's answer has no description")
    image_type = str(obj.get("image_type") or "IMAGE").strip().upper()
    if image_type in ("TABLE", "TABLEIMAGE"):
        image_type = "TABLE_IMAGE"
    if image_type not in ("IMAGE", "TABLE_IMAGE"):
        raise ModelError(f"the vision model gave image_type {image_type!r}; expected IMAGE or TABLE_IMAGE")
    raw_keywords = obj.get("keywords") or []
    if isinstance(raw_keywords, str):
        raw_keywords = re.split(r"[,，;；]", raw_keywords)
    keywords = tuple(k for k in (str(x).strip() for x in raw_keywords) if k)
    embedding_text = str(obj.get("embedding_text") or "").strip() or description
    return VisionAnswer(description, keywords, image_type, embedding_text)


class OpenAIVisionClient:
    """``VisionClient`` over the project's one LLM client (``corpus_pipeline.llm``), with a
    configurable ``base_url``. Its answers are cached by image hash in ``describe``, so the
    LLM client's own response cache is not used here."""

    def __init__(self, settings: VisionConfig) -> None:
        if not settings.model:
            raise ModelError("no vision model configured: set vision.model in kb.yaml or CORPUS_VISION_MODEL")
        from corpus_pipeline.llm import LLMClient, LLMConfig

        self.model = settings.model
        endpoint = LLMConfig(
            model=settings.model,
            base_url=settings.base_url,
            timeout_s=settings.timeout_s,
            max_retries=settings.max_retries,
        ).with_api_key(settings.api_key())
        self._llm = LLMClient(endpoint, max_consecutive_failures=None)  # (describe_images stops after failures itself)

    def close(self) -> None:
        self._llm.close()

    def describe(self, image: bytes, mime_type: str, context: str) -> VisionAnswer:
        url = f"data:{mime_type};base64,{base64.b64encode(image).decode('ascii')}"
        user: list[dict[str, Any]] = [
            {
                "type": "text",
                "text": f"Text around the image in the document:\n{context[:1500]}"
                if context
                else "Describe this image.",
            },
            {"type": "image_url", "image_url": {"url": url}},
        ]
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": user},
        ]
        try:
            result = self._llm.chat(messages, json_object=True, temperature=0, cache=False)
        except ModelError as exc:
            raise ModelError(
                f"vision {exc}" if str(exc).startswith("LLM call") else f"vision call failed: {exc}"
            ) from exc
        return parse_answer(result.content)
