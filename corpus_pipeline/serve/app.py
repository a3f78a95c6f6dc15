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
import json
import os
import threading
from collections.abc import AsyncIterator
from pathlib import Path

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from corpus_pipeline.serve import errors, routes
from corpus_pipeline.serve.deps import DOCS_STATIC, Server
from corpus_pipeline.serve.limits import RateLimiter, RequestGuard
from corpus_pipeline.store.layout import Layout

API_KEYS_ENV = "CORPUS_API_KEYS"
DOCS_DESCRIPTION = (
    "Every endpoint but /healthz, /readyz and these pages needs `Authorization: Bearer <key>`, a key of the "
    "server's `CORPUS_API_KEYS` (none when the server runs without keys). Here: press **Authorize** and paste "
    "the key. With curl: `curl -H 'Authorization: Bearer <key>' -H 'content-type: application/json' "
    '-d \'{"kb": "<kb>", "query": "..."}\' http://127.0.0.1:8000/search`.'
)
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
    key_rate_per_s: float = 0.0,
    key_burst: int = 0,
    body_timeout: float = 10.0,
    warm: bool = False,
) -> FastAPI:
    """The HTTP app over ``home`` (default ``$CORPUS_HOME``). ``api_keys``: None reads
    ``CORPUS_API_KEYS``; [] means no key is required (bind to 127.0.0.1 then). Rates are
    token buckets per client address and per key (0: none). With ``warm``, every KB with
    an active version is opened and searched once at start, in the background, and
    ``/readyz`` answers 503 until that is done."""
    keys = api_keys_from_env() if api_keys is None else list(api_keys)
    server = Server(
        Layout.at(home),
        keys,
        RateLimiter(rate_per_s, burst),
        RateLimiter(key_rate_per_s, key_burst or max(1, int(2 * key_rate_per_s))),
    )

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        from corpus_pipeline.serve.protocol import mark_stopping_on_signals

        mark_stopping_on_signals()
        if warm:
            threading.Thread(target=server.warm, name="corpus-serve-warm", daemon=True).start()
        else:
            server.ready.set()
        yield
        server.registry.close()
        from corpus_pipeline.serve.local import withdraw

        withdraw(server.layout)  # (`corpus search` stops asking this process)

    app = FastAPIOffline(  # (FastAPI whose /docs page is served with its own assets: it works offline)
        lifespan=lifespan,
        title="corpus_pipeline",
        summary="Hybrid search over knowledge bases indexed by corpus_pipeline (and Dify's external knowledge API).",
        description=DOCS_DESCRIPTION,
        version="1",
        redoc_url=None,
        static_url=DOCS_STATIC,
    )
    app.state.server = server
    app.state.layout = server.layout  # (read by serve.errors.roots_of)
    errors.install(app)
    app.include_router(routes.public)
    app.include_router(routes.api)

    from corpus_pipeline.serve.web import mount_web  # the web page at /

    mount_web(app)
    app.add_middleware(RequestGuard, max_bytes=max_body_bytes, body_timeout=body_timeout)  # (outermost)
    return app


#: How ``corpus serve --workers N`` hands its settings to each worker process.
SETTINGS_ENV = "CORPUS_SERVE_SETTINGS"


def app_from_env() -> FastAPI:
    """The app of one worker of ``corpus serve --workers N`` (uvicorn's factory): the
    keyword arguments of ``create_app`` as JSON in ``CORPUS_SERVE_SETTINGS``, the keys
    from ``CORPUS_API_KEYS`` (never in the settings)."""
    settings = json.loads(os.environ.get(SETTINGS_ENV) or "{}")
    return create_app(**settings)


def check_bind(host: str, keys: list[str]) -> str | None:
    """Why ``host`` may not be used (None when it may): without a key, loopback only."""
    if keys or host in LOOPBACK:
        return None
    return (
        f"refusing to listen on {host} without an API key: set {API_KEYS_ENV}=<key>[,<key>...] "
        "(clients send 'Authorization: Bearer <key>'), or listen on 127.0.0.1"
    )
