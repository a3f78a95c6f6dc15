"""A local OpenAI-compatible HTTP server for tests: scripted, deterministic, recording.

Serves ``POST /v1/chat/completions`` (and any other ``/v1/...`` path a handler wants, e.g.
``/v1/embeddings``: ``server.handler = embeddings_handler()``) on ``127.0.0.1`` with an ephemeral port, in a thread. What it answers:

* ``server.queue(reply, ...)``: replies used in order, one per request;
* ``server.handler = fn``: ``fn(request) -> Reply`` when the queue is empty;
* otherwise ``server.default`` (a chat answer ``"{}"``).

Replies: ``Reply.chat(content)`` (a normal completion), ``Reply.error(status, message)``
(``key_echo_reply`` / ``key_echo_handler``: an error echoing the caller's key),
``Reply.malformed()`` (a 200 whose body is not JSON), ``Reply.json(obj)`` (any body), each
optionally ``.after(seconds)`` (sleep first: a timeout for a client with a shorter one).
Every request is recorded in ``server.requests`` (``Request(path, body, headers)``), so a
test can assert call counts, models and messages.

    with OpenAIServer() as server:
        server.queue(Reply.chat('{"description": "a cat"}'), Reply.error(500))
        client = OpenAI(base_url=server.base_url, api_key="test", max_retries=0)

The pytest fixture ``openai_server`` below: ``from support.openai_server import openai_server``
in a conftest (the folder ``tests/`` is on ``sys.path``; see tests/parsing/__init__.py).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass(frozen=True)
class Request:
    path: str
    body: Any  # parsed JSON, or the raw text when it is not JSON
    headers: dict[str, str]

    @property
    def model(self) -> str | None:
        return self.body.get("model") if isinstance(self.body, dict) else None

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages", []) if isinstance(self.body, dict) else []

    def parts(self, kind: str) -> list[dict[str, Any]]:
        """Content parts of the given type (``"text"``, ``"image_url"``) over all messages."""
        out = []
        for m in self.messages:
            content = m.get("content")
            if isinstance(content, list):
                out.extend(p for p in content if isinstance(p, dict) and p.get("type") == kind)
        return out


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: bytes = b""
    delay_s: float = 0.0
    content_type: str = "application/json"

    @staticmethod
    def json(obj: Any, status: int = 200) -> Reply:
        return Reply(status, json.dumps(obj, ensure_ascii=False).encode())

    @staticmethod
    def chat(content: str, model: str = "test-model") -> Reply:
        return Reply.json(
            {
                "id": "chatcmpl-test",
                "object": "chat.completion",
                "created": 0,
                "model": model,
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )

    @staticmethod
    def embeddings(vectors: list[list[float]], model: str = "test-embed") -> Reply:
        return Reply.json(
            {
                "object": "list",
                "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
                "model": model,
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            }
        )

    @staticmethod
    def error(status: int = 500, message: str = "internal error") -> Reply:
        return Reply.json({"error": {"message": message, "type": "server_error", "code": status}}, status)

    @staticmethod
    def malformed() -> Reply:
        return Reply(200, b"{this is not json")

    def after(self, seconds: float) -> Reply:
        return replace(self, delay_s=seconds)


Handler = Callable[[Request], Reply]


def hashed_vector(text: str, dim: int = 64) -> list[float]:
    """A deterministic vector of ``text``: its words and CJK character bigrams hashed into
    ``dim`` buckets (texts that share terms are similar, like a real model's, crudely)."""
    import hashlib
    import re

    terms = re.findall(r"[a-z0-9]+", text.lower())
    for run in re.findall(r"[\u4e00-\u9fff]+", text):
        terms += [run[i : i + 2] for i in range(max(1, len(run) - 1))]
    vec = [0.0] * dim
    for term in terms:
        h = int.from_bytes(hashlib.blake2b(term.encode(), digest_size=8).digest(), "big")
        vec[h % dim] += 1.0 if (h >> 32) & 1 else -1.0
    if not any(vec):
        vec[0] = 1.0
    return vec


def embeddings_handler(dim: int = 64) -> Handler:
    """A ``/v1/embeddings`` endpoint answering with ``hashed_vector`` of every input (a
    chat request gets the default chat reply). With ``dimensions`` in the request, vectors
    have that size (as text-embedding-3 shortens them)."""

    def handle(request: Request) -> Reply:
        if request.path != "/v1/embeddings" or not isinstance(request.body, dict):
            return Reply.chat("{}")
        inputs = request.body.get("input")
        texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
        size = int(request.body.get("dimensions") or dim)
        return Reply.embeddings([hashed_vector(t, size) for t in texts], str(request.body.get("model")))

    return handle


def key_echo_reply(request: Request, status: int = 401) -> Reply:
    """An error that echoes the caller's key, as some servers do: the bare key (whatever its
    shape) and the ``Authorization`` header it came in."""
    auth = request.headers.get("authorization", "")
    key = auth.removeprefix("Bearer ").strip()
    return Reply.error(status, f"invalid key {key} (request header 'Authorization: {auth}')")


def key_echo_handler(*, embeddings: bool = False, dim: int = 64) -> Handler:
    """Every request refused with ``key_echo_reply`` (chat, vision, rerank, embeddings); with
    ``embeddings=True`` the ``/v1/embeddings`` requests are answered (``embeddings_handler``)."""
    answer = embeddings_handler(dim)

    def handle(request: Request) -> Reply:
        if embeddings and request.path == "/v1/embeddings":
            return answer(request)
        return key_echo_reply(request)

    return handle


@dataclass
class OpenAIServer:
    default: Reply = field(default_factory=lambda: Reply.chat("{}"))
    handler: Handler | None = None
    requests: list[Request] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------- scripting
    def queue(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    def _next(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._queue:
                return self._queue.popleft()
        return self.handler(request) if self.handler is not None else self.default

    def calls(self, path: str = "/v1/chat/completions") -> list[Request]:
        return [r for r in self.requests if r.path == path]

    # ------------------------------------------------------------- lifecycle
    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> OpenAIServer:
        server = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode("utf-8", "replace")
                try:
                    body: Any = json.loads(raw)
                except json.JSONDecodeError:
                    body = raw
                path = self.path.split("?")[0]
                reply = server._next(Request(path, body, {k.lower(): v for k, v in self.headers.items()}))
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", reply.content_type)
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): fine

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="openai-test-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    """A started ``OpenAIServer``, stopped after the test."""
    with OpenAIServer() as server:
        yield server
