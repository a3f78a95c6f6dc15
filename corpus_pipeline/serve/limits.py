"""Bounds every request meets before a route runs: its body's size, its client's rate.

``BodyLimit`` is the outermost layer of the app: a declared ``Content-Length`` over the
limit is answered 413 before anything is read, and a body without one (chunked) or with a
lying one is counted as it streams and cut off at the limit, so no request makes the
server hold more than ``max_bytes`` of body. ``RateLimiter`` is a token bucket per client
address (``serve.deps.rate_limited`` applies it).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from corpus_pipeline.serve.errors import error_body


class BodyTooLarge(StarletteHTTPException):
    """Raised from the body's stream at the limit: a route reading its body answers 413
    through the app's handler of HTTP errors (FastAPI lets an ``HTTPException`` through)."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, f"request body over {max_bytes} bytes")


class BodyLimit:
    """Refuses a request body over ``max_bytes`` (413, in the route's error shape)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await self._refuse(scope, receive, send)
            return
        seen = 0
        started = False

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, sending)
        except BodyTooLarge:
            if not started:
                await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        dify = scope.get("path") == "/retrieval"
        response = error_body(
            413, "body_too_large", f"request body over {self.max_bytes} bytes", dify=dify, dify_code=413
        )
        await response(scope, receive, send)


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
