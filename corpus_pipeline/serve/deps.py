"""What a route depends on: the server's state, the rate limit, the key, the KB asked for.

    router = APIRouter(dependencies=GUARDED)          every data route: rate limit, then key
    def search(req, kb: KB = Depends(kb_of_request))  the open KB, or 404 / 409

The paths that need no key are listed once (``PUBLIC``): the liveness probe, the API's
own description, and the page shell with its static files (they hold no data; the page
sends the key with each of its data requests). Everything else is reached only through a
router guarded by ``GUARDED``.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from corpus_pipeline.api import KB
from corpus_pipeline.errors import ConfigError
from corpus_pipeline.secrets import mask
from corpus_pipeline.serve.errors import HttpError
from corpus_pipeline.serve.limits import RateLimiter, client_of
from corpus_pipeline.store.layout import Layout

#: The paths answered without a key, and the prefix of the page's static files. Every
#: other route is on a router guarded by ``GUARDED`` (tests/serve/test_fast.py checks each).
PUBLIC = ("/healthz", "/readyz", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/")
PUBLIC_PREFIX = "/ui/static/"
#: Where /docs loads Swagger UI's script and style from (this server, no CDN): public, like /docs.
DOCS_STATIC = "/docs-static"


def is_public(path: str) -> bool:
    """Whether ``path`` is answered without a key."""
    return path in PUBLIC or (path.startswith(PUBLIC_PREFIX) and path.count("/") == 3)


class KBRegistry:
    """The open KBs of one CORPUS_HOME (opened on first use, kept open). Searches of one KB
    run in parallel (FastAPI's thread pool): a searcher is safe to share, and the query
    embeddings of concurrent searches are batched (``embedding.batching``)."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self._kbs: dict[str, KB] = {}
        self._lock = threading.Lock()

    def names(self) -> list[str]:
        return self.layout.list_kbs()

    def get(self, name: str) -> KB:
        if name not in self.names():
            raise KeyError(name)
        with self._lock:
            if name not in self._kbs:
                self._kbs[name] = KB(name, self.layout.home)
            return self._kbs[name]

    def close(self) -> None:
        with self._lock:
            for kb in self._kbs.values():
                kb.close()
            self._kbs.clear()


#: Set when this process was asked to stop (``serve.protocol.GracefulServer``): ``/readyz``
#: answers 503 while the requests in flight finish.
STOPPING = threading.Event()


@dataclass
class Server:
    """What every request of one app reads (``app.state.server``). ``limiter`` is the
    bucket per client address, ``key_limiter`` the one per key (a key shared by many
    addresses, or a client rotating addresses, is bounded by it)."""

    layout: Layout
    keys: list[str]
    limiter: RateLimiter
    key_limiter: RateLimiter = field(default_factory=lambda: RateLimiter(0, 0))
    registry: KBRegistry = field(init=False)
    ready: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.registry = KBRegistry(self.layout)

    def warm(self) -> None:
        """Open every KB that has an active version and run its two search channels once
        (the model, the table, the parents load now, not in the first user's request; no
        reranker or LLM is called; the query model's ONNX export is made if it is missing,
        once per machine), then mark the server ready. A KB that fails here
        answers its error to its own requests."""
        from corpus_pipeline.embedding.opening import prepare_query_runtime
        from corpus_pipeline.store.versions import active_version

        try:
            for name in self.registry.names():
                if STOPPING.is_set():
                    return
                if active_version(self.layout, name) is None:
                    continue
                try:
                    searcher = self.registry.get(name).searcher()
                    if prepare_query_runtime(searcher.embedding, searcher.settings.query_backend):
                        searcher.refresh_query_runtime()
                    searcher.candidates("warm up")
                except Exception:  # noqa: BLE001 - its requests answer the error
                    continue
        finally:
            self.ready.set()

    @property
    def auth_required(self) -> bool:
        return bool(self.keys)

    def key_ok(self, header: str | None) -> bool | None:
        """True/False for a well-formed Bearer header; None when it is missing or malformed."""
        if not header or not header.startswith("Bearer ") or not header[7:].strip():
            return None
        given = header[7:].strip().encode()
        return any(hmac.compare_digest(given, k.encode()) for k in self.keys)


def key_id(header: str) -> str:
    """A name for the key of a (valid) Bearer header in the key buckets: a digest, never
    the key."""
    return "key:" + hashlib.sha256(header[7:].strip().encode()).hexdigest()[:16]


def server(request: Request) -> Server:
    state: Server = request.app.state.server
    return state


def rate_limited(request: Request) -> None:
    """429 when the client's bucket is empty."""
    if not server(request).limiter.allow(client_of(request)):
        raise HttpError(429, "rate_limited", "too many requests: slow down", dify_code=429)


#: The key as OpenAPI describes it (the Authorize button of /docs); read by ``authorized``.
BEARER = HTTPBearer(auto_error=False, description="a key of the server's CORPUS_API_KEYS")


def authorized(request: Request, _: Annotated[HTTPAuthorizationCredentials | None, Security(BEARER)] = None) -> None:
    """401 without a well-formed key, 403 with an unknown one (when the server has keys)."""
    s = server(request)
    if not s.keys:
        return
    ok = s.key_ok(request.headers.get("authorization"))
    if ok is None:
        raise HttpError(
            401, "unauthorized", "missing or malformed Authorization header: expected 'Bearer <key>'", dify_code=1001
        )
    if not ok:
        raise HttpError(403, "forbidden", "authorization failed: unknown key", dify_code=1002)
    if not s.key_limiter.allow(key_id(request.headers["authorization"])):
        raise HttpError(429, "rate_limited", "too many requests with this key: slow down", dify_code=429)


#: The dependencies of every router that answers data.
GUARDED = [Depends(rate_limited), Depends(authorized)]


def open_kb(request: Request, name: str) -> KB:
    """The open KB ``name``: 404 when there is no such folder, 409 when its kb.yaml is invalid."""
    registry = server(request).registry
    try:
        return registry.get(name)
    except KeyError:
        raise HttpError(
            404, "kb_not_found", f"no knowledge base {name!r}; known: {', '.join(registry.names())}", dify_code=2001
        ) from None
    except ConfigError as exc:
        raise HttpError(409, "kb_invalid", mask(str(exc))[:1000]) from None


def kb_of_path(request: Request, kb: str) -> KB:
    """``open_kb`` of the route's ``{kb}``."""
    return open_kb(request, kb)
