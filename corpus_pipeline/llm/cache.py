"""The on-disk cache of LLM answers, so a re-run never pays twice for the same question.

Keyed by sha256 of (model, the messages, the request parameters, ``CACHE_FORMAT``): the
same prompt to the same model with the same parameters is answered from disk. The base
URL and the API key are deliberately not in the key (the model name is the identity of
what answers, and nothing secret is hashed or stored).

``<root>/<key[:2]>/<key>.json`` holds ``{"model", "content", "prompt_tokens",
"completion_tokens"}`` or ``{"model", "rejected"}`` (an answer refused for its size, so a
re-run does not buy it again). Failed calls (HTTP errors, timeouts) are never stored.
Entries are written to a temporary file and renamed: a crash never leaves half an entry,
and concurrent writers of one key are harmless. A damaged entry reads as a miss.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from corpus_pipeline.store.jsoncache import JsonCache

CACHE_FORMAT = "1"  # bump when what a cached answer means changes


class ResponseCache(JsonCache):
    @staticmethod
    def key(model: str, messages: Any, params: dict[str, Any]) -> str:
        blob = json.dumps(
            {"format": CACHE_FORMAT, "model": model, "messages": messages, "params": params},
            ensure_ascii=False,
            sort_keys=True,
            separators=(",", ":"),
        )
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()
