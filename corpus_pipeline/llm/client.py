"""One client for every chat model call (text, JSON, images) over an OpenAI-compatible API.

``LLMClient.chat(messages)`` sends one chat completion through the ``openai`` package
(any ``base_url``: vLLM, Ollama, llama.cpp, OpenAI) and returns a ``ChatResult``; every
failure is raised as ``ModelError`` with the key masked (``corpus_pipeline.secrets``: the
configured key whatever its shape, anything key-like; the endpoint's text cut to 500
characters), and the caller takes its
fallback. ``chat_many`` runs several at once (at most ``max_concurrency`` in flight) and
returns each result or its error, in order.

What makes it cheap and safe to re-run:

* answers are cached on disk (``ResponseCache``): a repeated question costs no call;
* after ``max_consecutive_failures`` failed calls in a row the model is taken as down:
  later requests fail at once (counted as ``skipped``) instead of waiting for timeouts;
* an answer longer than ``max_response_chars`` is refused (and that refusal cached);
* ``usage`` counts calls, cache hits, tokens, errors and skipped requests for reports.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

from corpus_pipeline.errors import ModelError
from corpus_pipeline.llm.cache import ResponseCache
from corpus_pipeline.llm.config import LLMConfig
from corpus_pipeline.secrets import mask_error, mask_secrets, register_secret

Messages = list[dict[str, Any]]


@dataclass(frozen=True)
class ChatResult:
    content: str
    model: str  # the model asked (not the server's echo: stable across servers)
    cached: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class LLMUsage:
    """What a client spent: ``calls`` requests sent (``errors`` of them failed),
    ``cache_hits`` answered from disk, ``skipped`` refused because the model was down."""

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    errors: int = 0
    skipped: int = 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


T = TypeVar("T")


def openai_client(base_url: str | None, api_key: str | None, timeout_s: float, max_retries: int) -> Any:
    """The ``openai`` client of an OpenAI-compatible endpoint (the LLM, vision and embedding
    clients all make theirs here). Local servers (vLLM, Ollama, TEI) accept any key; the
    openai package insists on one. The key is registered as a secret (masked everywhere)."""
    from openai import OpenAI

    register_secret(api_key)
    return OpenAI(base_url=base_url, api_key=api_key or "not-needed", timeout=timeout_s, max_retries=max_retries)


def openai_call(what: str, call: Callable[[], T]) -> T:
    """``call()`` (a request of the ``openai`` client), its failures as one ``ModelError``
    naming ``what`` ("LLM call", "embedding endpoint … (model …)"): the client's errors
    (status, timeout, connection) as "failed", anything else (a body it cannot read:
    untrusted input, never a crash) as "returned an unreadable response", the text masked.
    ``from None``: the endpoint's own exception is not chained (Dagster stores a cause's
    text unmasked in its event log); its type and masked text are in the message."""
    import openai

    try:
        return call()
    except openai.OpenAIError as exc:
        raise ModelError(f"{what} failed: {type(exc).__name__}: {mask_error(str(exc))}") from None
    except Exception as exc:  # noqa: BLE001 - see above
        raise ModelError(
            f"{what} returned an unreadable response: {type(exc).__name__}: {mask_error(str(exc), 200)}"
        ) from None


class LLMClient:
    """Chat completions with a disk cache, for a resolved ``llm:`` section (``llm_settings``).
    ``cache_root`` None disables the cache.

    ``max_consecutive_failures``: after that many failed calls in a row the client stops
    calling for the rest of its life (a model that is down costs one timeout, not one per
    batch); None never stops. ``max_response_chars``: a longer answer is refused."""

    def __init__(
        self,
        settings: LLMConfig,
        *,
        cache_root: Path | None = None,
        temperature: float = 0.0,
        max_consecutive_failures: int | None = 3,
        max_response_chars: int = 200_000,
    ) -> None:
        if not settings.model:
            raise ModelError("no LLM model configured: set llm.model in kb.yaml or CORPUS_LLM_MODEL")
        self.settings = settings
        self.temperature = temperature
        self.max_consecutive_failures = max_consecutive_failures
        self.max_response_chars = max_response_chars
        self.model = settings.model
        self.cache = ResponseCache(cache_root)
        self.usage = LLMUsage()
        self._lock = threading.Lock()
        self._failures = 0
        self._last_error = ""
        self._client = openai_client(settings.base_url, settings.api_key, settings.timeout_s, settings.max_retries)

    def __repr__(self) -> str:
        return f"LLMClient(model={self.model!r}, base_url={self.settings.base_url!r})"

    # ------------------------------------------------------------------ one call
    def chat(
        self,
        messages: Messages,
        *,
        json_object: bool = False,
        temperature: float | None = None,
        max_tokens: int | None = None,
        cache: bool = True,
    ) -> ChatResult:
        """The model's answer to ``messages``; ModelError when it cannot be had."""
        params: dict[str, Any] = {
            "temperature": self.temperature if temperature is None else temperature,
        }
        if json_object:
            params["response_format"] = {"type": "json_object"}
        tokens = max_tokens if max_tokens is not None else self.settings.max_output_tokens
        if tokens:
            params["max_tokens"] = tokens
        key = ResponseCache.key(self.model, messages, params) if cache else ""
        hit = self.cache.get(key) if cache else None
        if hit is not None and ("content" in hit or "rejected" in hit):
            with self._lock:
                self.usage.cache_hits += 1
            if "rejected" in hit:
                raise ModelError(str(hit["rejected"]))
            return ChatResult(
                mask_secrets(str(hit["content"] or "")),  # (a cache written before answers were masked)
                self.model,
                True,
                int(hit.get("prompt_tokens") or 0),
                int(hit.get("completion_tokens") or 0),
            )
        self._check_alive()
        try:
            content, usage = self._call(messages, params)
        except ModelError as exc:
            self._failed(str(exc))
            raise
        limit = self.max_response_chars
        if len(content) > limit:
            reason = f"the LLM answered {len(content)} characters, over the limit of {limit}"
            self._succeeded(usage)
            if cache:
                self.cache.put(key, {"model": self.model, "rejected": reason})
            raise ModelError(reason)
        self._succeeded(usage)
        if cache:
            self.cache.put(key, {"model": self.model, "content": content, **usage})
        return ChatResult(content, self.model, False, usage["prompt_tokens"], usage["completion_tokens"])

    def chat_many(self, requests: Sequence[Messages], **kwargs: Any) -> list[ChatResult | ModelError]:
        """``chat`` for each request, at most ``max_concurrency`` at a time; results in order.

        Identical requests are asked once: concurrent copies would otherwise each miss the
        cache, so what they cost would depend on thread timing."""

        def one(messages: Messages) -> ChatResult | ModelError:
            try:
                return self.chat(messages, **kwargs)
            except ModelError as exc:
                return exc

        slot: dict[str, int] = {}
        distinct: list[Messages] = []
        order: list[int] = []
        for messages in requests:
            key = json.dumps(messages, sort_keys=True, ensure_ascii=False)
            if key not in slot:
                slot[key] = len(distinct)
                distinct.append(messages)
            order.append(slot[key])
        workers = min(self.settings.max_concurrency, len(distinct))
        if workers <= 1:
            answers = [one(m) for m in distinct]
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="llm") as pool:
                answers = list(pool.map(one, distinct))
        return [answers[i] for i in order]

    def close(self) -> None:
        self._client.close()

    # ------------------------------------------------------------------ internals
    def _call(self, messages: Messages, params: dict[str, Any]) -> tuple[str, dict[str, int]]:
        with self._lock:
            self.usage.calls += 1
        response = openai_call(
            "LLM call",
            lambda: self._client.chat.completions.create(model=self.model, messages=cast(Any, messages), **params),
        )
        try:
            message = response.choices[0].message
            content = message.content
        except (AttributeError, IndexError, TypeError) as exc:
            raise ModelError("LLM call returned no message") from exc
        if content is not None and not isinstance(content, str):
            raise ModelError(f"LLM call returned content of type {type(content).__name__}, not text")
        content = mask_secrets(content or "")  # a key the endpoint echoed never goes further
        u = getattr(response, "usage", None)
        usage = {
            "prompt_tokens": int(getattr(u, "prompt_tokens", 0) or 0),
            "completion_tokens": int(getattr(u, "completion_tokens", 0) or 0),
        }
        return content or "", usage

    def _check_alive(self) -> None:
        limit = self.max_consecutive_failures
        with self._lock:
            if limit is not None and self._failures >= limit:
                self.usage.skipped += 1
                raise ModelError(
                    f"LLM skipped after {self._failures} consecutive failed calls (last: {self._last_error})"[:600]
                )

    def _failed(self, error: str) -> None:
        with self._lock:
            self.usage.errors += 1
            self._failures += 1
            self._last_error = error[:300]

    def _succeeded(self, usage: dict[str, int]) -> None:
        with self._lock:
            self._failures = 0
            self.usage.prompt_tokens += usage["prompt_tokens"]
            self.usage.completion_tokens += usage["completion_tokens"]


def open_llm(
    config: Any = None,
    *,
    resource: Any = None,
    cache_dir: Path | None = None,
    env: Any = None,
) -> LLMClient | None:
    """The client for kb.yaml's ``llm:`` section (``config``; None: defaults), the resource's
    values and the environment, caching under ``<cache_dir>/llm``; None when no model is
    configured (or ``enabled: false``): callers then take their fallbacks."""
    from corpus_pipeline.llm.config import llm_settings

    settings = llm_settings(config, resource, env)
    if not settings.configured:
        return None
    return LLMClient(settings, cache_root=cache_dir / "llm" if cache_dir is not None else None)
