"""Running the app under uvicorn: deadlines on slow clients, graceful stops, worker processes.

- ``GuardedHttpTools``: uvicorn's httptools protocol with a deadline on a request's
  headers. uvicorn has none: a client sending its headers a byte every few seconds (each
  byte resets the keep-alive timer) held a connection for as long as it liked, and a few
  hundred of them held every connection. From the moment a connection opens, or a new
  request on it starts, its headers must be complete within ``header_timeout`` seconds, or
  it is answered 408 and closed. (The body's deadline is ``serve.limits.RequestGuard``'s.)
- Graceful stops: on SIGTERM / SIGINT uvicorn stops accepting connections and finishes the
  requests in flight (at most ``timeout_graceful_shutdown`` seconds) before it exits;
  ``mark_stopping_on_signals`` makes ``/readyz`` answer 503 meanwhile
  (``serve.deps.STOPPING``).
- ``serve(config, workers)``: one process, or ``workers`` processes sharing the listening
  socket (uvicorn's supervisor, which restarts a worker that dies); each worker builds its
  own app (``serve.app.app_from_env``) and shares nothing with the others but the
  warehouse: each one opens the KBs itself and moves to a new published version on its own.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from corpus_pipeline.serve.deps import STOPPING

#: Seconds a client has to send a request's headers (``corpus serve --client-timeout``).
HEADER_TIMEOUT = 10.0


class GuardedHttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline on each request's headers."""

    def __init__(self, config: uvicorn.Config, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        self._header_timeout = float(getattr(config, "header_timeout", HEADER_TIMEOUT))
        self._header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._header_deadline is None and self._header_timeout > 0:
            self._header_deadline = self.loop.call_later(self._header_timeout, self._headers_too_slow)

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_too_slow(self) -> None:
        self._header_deadline = None
        if self.transport.is_closing():
            return
        body = b'{"error":{"code":"request_timeout","message":"request headers not received in time"}}'
        self.transport.write(
            b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
        self.transport.close()


def mark_stopping_on_signals() -> None:
    """Chain ``serve.deps.STOPPING`` before uvicorn's own SIGINT / SIGTERM handlers (called
    from the app's start-up, inside the process that serves, where uvicorn installed them;
    a no-op off the main thread, as in tests)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous = signal.getsignal(sig)
        if callable(previous):

            def stopping(signum: int, frame: Any, previous: Any = previous) -> None:
                STOPPING.set()
                previous(signum, frame)

            signal.signal(sig, stopping)


def config(app: Any, *, header_timeout: float = HEADER_TIMEOUT, **kwargs: Any) -> uvicorn.Config:
    """uvicorn's configuration with the guarded protocol; ``app`` is an app, or with
    ``factory=True`` the import string of a function that builds one."""
    cfg = uvicorn.Config(app, http=GuardedHttpTools, **kwargs)
    cfg.header_timeout = header_timeout  # type: ignore[attr-defined]  # (read by GuardedHttpTools)
    return cfg


def serve(cfg: uvicorn.Config) -> None:
    """Run ``cfg``: in this process, or in ``cfg.workers`` processes sharing its socket
    (uvicorn's supervisor, as ``uvicorn.run`` does)."""
    if cfg.workers > 1:
        import inspect

        from uvicorn.supervisors import Multiprocess

        sockets = [cfg.bind_socket()]
        if "target" in inspect.signature(Multiprocess).parameters:  # (older uvicorn took the worker's run)
            Multiprocess(cfg, target=uvicorn.Server(cfg).run, sockets=sockets).run()  # type: ignore[call-arg]
        else:
            Multiprocess(cfg, sockets=sockets).run()
    else:
        uvicorn.Server(cfg).run()
