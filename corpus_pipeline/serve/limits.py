"""Bounds every request meets before a route runs: its body's size, time and shape, its
client's and its key's rate.

``RequestGuard`` is the outermost layer of the app (size, time, JSON shape: see it).
``RateLimiter`` is a token bucket per name: ``serve.deps`` keeps one per client address
and one per key, and a request must pass both.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from corpus_pipeline.serve.errors import error_body

#: JSON bodies: nesting deeper than this, or more values than ``MAX_JSON_VALUES``, is
#: refused before it is parsed (a 64 KB body of ``[[[[…`` made the parser recurse 32,000
#: deep; no request of the API nests more than 4).
MAX_JSON_DEPTH = 32
MAX_JSON_VALUES = 4096
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_JSON_BRACKETS = re.compile(rb"[\[\]{}]")


def json_shape_error(body: bytes) -> str | None:
    """Why a JSON body is refused before parsing (None: within the bounds). Strings are cut
    out first, so brackets inside them do not count."""
    bare = _JSON_STRING.sub(b'""', body)
    if bare.count(b",") + 1 > MAX_JSON_VALUES:
        return f"JSON with more than {MAX_JSON_VALUES} values"
    depth = 0
    for b in _JSON_BRACKETS.findall(bare):
        depth += 1 if b in (b"[", b"{") else -1
        if depth > MAX_JSON_DEPTH:
            return f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
    return None


class RequestGuard:
    """The outermost layer of the app: what a request's body may be before a route sees it.

    - Size: a declared ``Content-Length`` over ``max_bytes`` is answered 413 before anything
      is read; a body without one (chunked) or with a lying one is counted as it streams and
      cut off at the limit, so no request makes the server hold more than ``max_bytes``.
    - Time: the whole body must arrive within ``body_timeout`` seconds (408 otherwise): a
      client trickling a byte at a time holds nothing for long. (Headers have their own
      deadline in ``serve.protocol``.)
    - Shape: a JSON body nested deeper than ``MAX_JSON_DEPTH`` or with more than
      ``MAX_JSON_VALUES`` values is refused 400 before it is parsed.

    A request with a body is read whole here (it is at most ``max_bytes``) and handed on."""

    def __init__(self, app: ASGIApp, max_bytes: int, body_timeout: float = 10.0) -> None:
        self.app, self.max_bytes, self.body_timeout = app, max_bytes, body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await self._refuse(scope, receive, send, 413, "body_too_large", f"request body over {self.max_bytes} bytes")
            return
        if declared in (None, b"0") and b"transfer-encoding" not in headers:
            await self.app(scope, receive, send)  # (no body)
            return
        try:
            body = await asyncio.wait_for(self._read(receive), self.body_timeout)
        except TimeoutError:
            await self._refuse(
                scope,
                receive,
                send,
                408,
                "request_timeout",
                f"request body not received within {self.body_timeout:g} s",
            )
            return
        except _TooLarge:
            await self._refuse(scope, receive, send, 413, "body_too_large", f"request body over {self.max_bytes} bytes")
            return
        except _Gone:
            return
        if b"json" in headers.get(b"content-type", b""):
            why = json_shape_error(body)
            if why is not None:
                await self._refuse(scope, receive, send, 400, "invalid_request", f"request body refused: {why}")
                return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # (a disconnect)

        await self.app(scope, replay, send)

    async def _read(self, receive: Receive) -> bytes:
        parts: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Gone
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.max_bytes:
                raise _TooLarge
            parts.append(chunk)
            if not message.get("more_body", False):
                return b"".join(parts)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, status: int, code: str, message: str) -> None:
        dify = scope.get("path") == "/retrieval"
        response = error_body(status, code, message, dify=dify, dify_code=status)
        response.headers["connection"] = "close"  # (what is left of the body is not read)
        await response(scope, receive, send)


class _TooLarge(Exception):
    pass


class _Gone(Exception):
    pass


class RateLimiter:
    """A token bucket per client address: ``rate`` requests a second, bursts of ``burst``
    (``rate`` 0: no limit)."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, burst
        self._state: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def allow(self, client: str) -> bool:
        if self.rate <= 0:
            return True
        now = time.monotonic()
        with self._lock:
            tokens, last = self._state.get(client, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - last) * self.rate)
            if tokens < 1.0:
                self._state[client] = (tokens, now)
                return False
            self._state[client] = (tokens - 1.0, now)
            if len(self._state) > 10_000:  # forget idle clients
                self._state = {k: v for k, v in self._state.items() if now - v[1] < 60}
            return True


def client_of(scope_or_request: Any) -> str:
    client = getattr(scope_or_request, "client", None)
    return client.host if client else "?"
