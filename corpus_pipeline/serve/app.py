"""``corpus serve``: the index over HTTP (FastAPI; the OpenAPI schema at ``/docs``).

``create_app`` is the composition: the server's state (``serve.deps.Server``), the body
limit (``serve.limits``), the error handlers (``serve.errors``), the JSON API's routers
(``serve.routes``: /healthz, /kbs, /kbs/{kb}/versions, /search, /chunks/{id}, Dify's
/retrieval) and the page's (``serve.web``).

One process keeps every KB's searcher (table, parents, model) open through
``corpus_pipeline.api.KB``, which reopens it when the KB's active version changes or its
version is rebuilt. Keys come from the environment (``CORPUS_API_KEYS``, comma-separated):
when set, every endpoint but ``serve.deps.PUBLIC`` needs ``Authorization: Bearer <key>``; when unset,
the server binds to 127.0.0.1 only. Bodies are bounded (``max_body_bytes``), requests are
rate-limited per client (a token bucket), and every error is JSON with a code:
``{"error": {"code": ..., "message": ...}}`` — on ``/retrieval`` Dify's own
``{"error_code": 1001|1002|2001, "error_msg": ...}`` — with no path, URL or source location
of the server in it (``serve.errors``: the one table from library errors to answers).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

from fastapi import FastAPI

from corpus_pipeline.serve import errors, routes
from corpus_pipeline.serve.deps import Server
from corpus_pipeline.serve.limits import BodyLimit, RateLimiter
from corpus_pipeline.store.layout import Layout

API_KEYS_ENV = "CORPUS_API_KEYS"
LOOPBACK = {"127.0.0.1", "::1", "localhost"}


def api_keys_from_env() -> list[str]:
    return [k.strip() for k in os.environ.get(API_KEYS_ENV, "").split(",") if k.strip()]


def create_app(
    home: str | Path | None = None,
    *,
    api_keys: list[str] | None = None,
    max_body_bytes: int = 64 * 1024,
    rate_per_s: float = 20.0,
    burst: int = 40,
) -> FastAPI:
    """The HTTP app over ``home`` (default ``$CORPUS_HOME``). ``api_keys``: None reads
    ``CORPUS_API_KEYS``; [] means no key is required (bind to 127.0.0.1 then)."""
    keys = api_keys_from_env() if api_keys is None else list(api_keys)
    server = Server(Layout.at(home), keys, RateLimiter(rate_per_s, burst))

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        server.registry.close()

    app = FastAPI(
        lifespan=lifespan,
        title="corpus_pipeline",
        summary="Hybrid search over knowledge bases indexed by corpus_pipeline (and Dify's external knowledge API).",
        version="1",
    )
    app.state.server = server
    app.state.layout = server.layout  # (read by serve.errors.roots_of)
    errors.install(app)
    app.include_router(routes.public)
    app.include_router(routes.api)

    from corpus_pipeline.serve.web import mount_web  # the web page at /

    mount_web(app)
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)  # (outermost: before anything reads the body)
    return app


def check_bind(host: str, keys: list[str]) -> str | None:
    """Why ``host`` may not be used (None when it may): without a key, loopback only."""
    if keys or host in LOOPBACK:
        return None
    return (
        f"refusing to listen on {host} without an API key: set {API_KEYS_ENV}=<key>[,<key>...] "
        "(clients send 'Authorization: Bearer <key>'), or listen on 127.0.0.1"
    )
