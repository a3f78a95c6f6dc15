"""Fixtures for LLM tests: the local OpenAI-compatible server with a deterministic "model".

``FakeModel`` answers like a well-behaved LLM, from the request alone (so answers do not
depend on the order of concurrent calls): PROPOSITION prompts get one ``- `` line per
sentence of the document, LLM-split prompts a JSON array of the text's paragraphs.
Tests replace it with scripted replies (``server.queue``) to play a misbehaving model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.openai_server import OpenAIServer, Reply, Request

from corpus_pipeline.llm import LLMClient, LLMConfig

KEY = "sk-test-secret-0123456789"


def user_text(request: Request) -> str:
    return next(m["content"] for m in request.messages if m["role"] == "user")


def is_proposition_prompt(request: Request) -> bool:
    return "atomic propositions" in request.messages[0]["content"]


def document_of(request: Request) -> str:
    """The text a strategy sent: inside <document> for PROPOSITION, the user turn for LLM."""
    text = user_text(request)
    m = re.search(r"<document>\n(.*)\n</document>", text, re.DOTALL)
    return m.group(1) if m else text


def fake_model(request: Request) -> Reply:
    text = document_of(request)
    if is_proposition_prompt(request):
        sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+|(?<=[。！？])", " ".join(text.split())) if s.strip()]
        return Reply.chat("\n".join(f"- {s}" for s in sentences))
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    return Reply.chat(json.dumps(paragraphs, ensure_ascii=False))


@pytest.fixture(scope="session")
def _shared_server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:  # stopping a server waits ~0.5 s: one for the whole session
        yield server


@pytest.fixture
def openai_server(_shared_server: OpenAIServer) -> OpenAIServer:
    """The local server, reset: no scripted replies, no handler, no recorded requests."""
    s = _shared_server
    with s._lock:
        s._queue.clear()
        s.requests.clear()
    s.handler = None
    s.default = Reply.chat("{}")
    return s


@pytest.fixture
def model_server(openai_server: OpenAIServer) -> OpenAIServer:
    """The local server answering as ``fake_model`` (scripted replies go first)."""
    openai_server.handler = fake_model
    return openai_server


MakeClient = Callable[..., LLMClient]


@pytest.fixture
def make_client(tmp_path: Path) -> Iterator[MakeClient]:
    """An ``LLMClient`` for a server: no retries, one call at a time, a cache under tmp_path
    (timeouts are tested with an explicit short ``timeout_s``); closed after the test."""
    made: list[LLMClient] = []

    def make(server: OpenAIServer, *, cache: bool = True, **settings: object) -> LLMClient:
        base: dict[str, object] = {
            "model": "llm-test",
            "base_url": server.base_url,
            "api_key": KEY,
            "timeout_s": 10.0,
            "max_retries": 0,
            "max_concurrency": 1,
        }
        base.update(settings)
        limits = {
            k: base.pop(k) for k in ("temperature", "max_consecutive_failures", "max_response_chars") if k in base
        }
        key = base.pop("api_key")
        config = LLMConfig(**base).with_api_key(str(key))  # type: ignore[arg-type]
        client = LLMClient(config, cache_root=tmp_path / "cache" / "llm" if cache else None, **limits)  # type: ignore[arg-type]
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()
