"""``corpus serve``: the index over HTTP (FastAPI; the OpenAPI schema at ``/docs``).

    GET  /healthz                  liveness, the KBs found
    GET  /kbs                      the knowledge bases and their active versions
    GET  /kbs/{kb}/versions        every version (active, current, built, counts)
    POST /search                   {query, kb, top_k?, filters?, version?} -> the JSON of `corpus search --json`
    GET  /chunks/{chunk_id}        a chunk's lineage (`corpus lineage --json`)
    POST /retrieval                Dify's external knowledge base API (knowledge_id = a KB name)

One process keeps every KB's searcher (table, parents, model) open through
``corpus_pipeline.api.KB``, which reopens it when the KB's active version changes or its
version is rebuilt. Keys come from the environment (``CORPUS_API_KEYS``, comma-separated):
when set, every endpoint but ``/healthz`` needs ``Authorization: Bearer <key>``; when unset,
the server binds to 127.0.0.1 only. Bodies are bounded (``max_body_bytes``), requests are
rate-limited per client (a token bucket), and every error is JSON with a code:
``{"error": {"code": ..., "message": ...}}`` — on ``/retrieval`` Dify's own
``{"error_code": 1001|1002|2001, "error_msg": ...}`` — with no path, URL or source location
of the server in it (``serve.errors``: the one table from library errors to answers).
"""

from __future__ import annotations

import contextlib
import hmac
import os
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from corpus_pipeline.api import KB
from corpus_pipeline.errors import ConfigError, CorpusError, StoreError
from corpus_pipeline.secrets import mask
from corpus_pipeline.serve.errors import (
    error_body,
    is_dify,
    library_error,
    public_message,
    roots_of,
    unexpected_error,
)
from corpus_pipeline.store.layout import Layout

API_KEYS_ENV = "CORPUS_API_KEYS"
LOOPBACK = {"127.0.0.1", "::1", "localhost"}


def api_keys_from_env() -> list[str]:
    return [k.strip() for k in os.environ.get(API_KEYS_ENV, "").split(",") if k.strip()]


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class DifyError(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, max_length=2000)
    kb: str = Field(min_length=1, max_length=64)
    top_k: int | None = Field(None, ge=1, le=50)
    filters: dict[str, Any] | None = None
    version: str | None = Field(None, max_length=80)


class DifyRetrievalSetting(BaseModel):
    top_k: int = Field(ge=1, le=50)
    score_threshold: float = Field(0.0, ge=0.0, le=1.0)


class DifyRequest(BaseModel):
    knowledge_id: str = Field(min_length=1, max_length=64)
    query: str = Field(min_length=1, max_length=2000)
    retrieval_setting: DifyRetrievalSetting
    metadata_condition: dict[str, Any] | None = None  # accepted and not applied (Dify has no UI for it)


class _Bucket:
    """A token bucket per client address: ``rate`` requests a second, bursts of ``burst``."""

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


class KBRegistry:
    """The open KBs of one CORPUS_HOME (opened on first use, kept open)."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self._kbs: dict[str, KB] = {}
        self._lock = threading.Lock()
        self.search_locks: dict[str, threading.Lock] = {}  # one search at a time per KB (one model, one table)

    def names(self) -> list[str]:
        return self.layout.list_kbs()

    def get(self, name: str) -> KB:
        if name not in self.names():
            raise KeyError(name)
        with self._lock:
            if name not in self._kbs:
                self._kbs[name] = KB(name, self.layout.home)
                self.search_locks[name] = threading.Lock()
            return self._kbs[name]

    def close(self) -> None:
        with self._lock:
            for kb in self._kbs.values():
                kb.close()
            self._kbs.clear()


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
    layout = Layout.at(home)
    keys = api_keys_from_env() if api_keys is None else list(api_keys)
    registry = KBRegistry(layout)
    bucket = _Bucket(rate_per_s, burst)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        registry.close()

    app = FastAPI(
        lifespan=lifespan,
        title="corpus_pipeline",
        summary="Hybrid search over knowledge bases indexed by corpus_pipeline (and Dify's external knowledge API).",
        version="1",
    )
    app.state.registry = registry
    app.state.layout = layout
    app.state.auth_required = bool(keys)

    def _key_ok(header: str | None) -> bool | None:
        """True/False for a well-formed Bearer header; None when it is missing or malformed."""
        if not header or not header.startswith("Bearer ") or not header[7:].strip():
            return None
        given = header[7:].strip().encode()
        return any(hmac.compare_digest(given, k.encode()) for k in keys)

    @app.middleware("http")
    async def guard(request: Request, call_next: Any) -> Any:
        path = request.url.path
        dify = path == "/retrieval"
        client = request.client.host if request.client else "?"
        if not bucket.allow(client):
            return _error(429, "rate_limited", "too many requests: slow down", dify=dify, dify_code=429)
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > max_body_bytes):
            return _error(413, "body_too_large", f"request body over {max_body_bytes} bytes", dify=dify, dify_code=413)
        if keys and path not in ("/healthz",):
            ok = _key_ok(request.headers.get("authorization"))
            if ok is None:
                return _error(
                    401, "unauthorized", "missing or malformed Authorization header: expected 'Bearer <key>'",
                    dify=dify, dify_code=1001,
                )  # fmt: skip
            if not ok:
                return _error(403, "forbidden", "authorization failed: unknown key", dify=dify, dify_code=1002)
        body = await request.body()  # bounded even without (or with a lying) Content-Length
        if len(body) > max_body_bytes:
            return _error(413, "body_too_large", f"request body over {max_body_bytes} bytes", dify=dify, dify_code=413)
        return await call_next(request)

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return _error(exc.status, exc.code, public_message(exc.message, roots_of(request)))

    @app.exception_handler(DifyError)
    async def dify_error(request: Request, exc: DifyError) -> JSONResponse:
        return _error(exc.status, "", public_message(exc.message, roots_of(request)), dify=True, dify_code=exc.code)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        detail = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()) if p != 'body')}: {e.get('msg')}" for e in exc.errors()
        )
        return _error(422, "invalid_request", detail[:1000], dify=request.url.path == "/retrieval", dify_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = "not_found" if exc.status_code == 404 else "http_error"
        message = public_message(str(exc.detail), roots_of(request))
        return _error(exc.status_code, code, message, dify=is_dify(request), dify_code=exc.status_code)

    app.add_exception_handler(CorpusError, library_error)  # (what a route did not answer: ERROR_TABLE)
    app.add_exception_handler(Exception, unexpected_error)  # (logged whole; answered with an id)

    def _kb(name: str) -> KB:
        try:
            return registry.get(name)
        except KeyError:
            raise ApiError(
                404, "kb_not_found", f"no knowledge base {name!r}; known: {', '.join(registry.names())}"
            ) from None
        except ConfigError as exc:
            raise ApiError(409, "kb_invalid", mask(str(exc))[:1000]) from None

    @app.get("/healthz", summary="liveness")
    def healthz() -> dict[str, Any]:
        return {"status": "ok", "kbs": len(registry.names()), "auth": bool(keys)}

    @app.get("/kbs", summary="knowledge bases and their active versions")
    def kbs() -> list[dict[str, Any]]:
        from corpus_pipeline.store.versions import active_version

        return [{"kb": n, "active_version": active_version(layout, n)} for n in registry.names()]

    @app.get("/kbs/{kb}/versions", summary="every version of a knowledge base")
    def versions(kb: str) -> list[dict[str, Any]]:
        return _kb(kb).versions()

    @app.post("/search", summary="hybrid search; the JSON of `corpus search --json`")
    def search(req: SearchRequest) -> dict[str, Any]:
        handle = _kb(req.kb)
        try:
            with registry.search_locks[req.kb]:
                result = handle.search(req.query, top_k=req.top_k, filters=req.filters, version=req.version)
        except (ConfigError, ValueError) as exc:
            raise ApiError(422, "invalid_request", mask(str(exc))[:1000]) from None
        except StoreError as exc:
            raise ApiError(409, "not_indexed", mask(str(exc))[:1000]) from None
        return result.to_dict()

    @app.get("/chunks/{chunk_id}", summary="a chunk's lineage")
    def chunk(chunk_id: str) -> dict[str, Any]:
        from corpus_pipeline.lineage import trace_chunk

        try:
            return trace_chunk(layout, chunk_id)
        except CorpusError as exc:
            raise ApiError(404, "chunk_not_found", mask(str(exc))[:1000]) from None

    @app.post("/retrieval", summary="Dify external knowledge base API")
    def retrieval(req: DifyRequest) -> dict[str, Any]:
        if req.knowledge_id not in registry.names():
            raise DifyError(404, 2001, f"The knowledge does not exist: {req.knowledge_id!r}")
        handle = registry.get(req.knowledge_id)
        setting = req.retrieval_setting
        try:
            with registry.search_locks[req.knowledge_id]:
                result = handle.search(req.query, top_k=setting.top_k)
        except StoreError as exc:
            raise DifyError(404, 2001, f"The knowledge is not indexed yet: {mask(str(exc))[:300]}") from None
        records = []
        for r in result.results:
            score = float(r.relevance)  # in [0, 1]: what score_threshold means (retrieval.relevance)
            if score < setting.score_threshold:
                continue
            records.append(
                {
                    "content": r.evidence or r.text,
                    "score": round(score, 6),
                    "title": r.doc_path,
                    "metadata": {
                        "kb": result.kb,
                        "strategy_version": result.strategy_version,
                        "doc_path": r.doc_path,
                        "section_path": r.section_path or "",
                        "parent_id": r.parent_id,
                        "start_offset": r.start_offset,
                        "end_offset": r.end_offset,
                        "chunk_ids": [h.chunk_id for h in r.hits],
                    },
                }
            )
        return {"records": records}

    from corpus_pipeline.serve.web import mount_web  # the web page at / (issue 15)

    mount_web(app)
    return app


_error = error_body


def check_bind(host: str, keys: list[str]) -> str | None:
    """Why ``host`` may not be used (None when it may): without a key, loopback only."""
    if keys or host in LOOPBACK:
        return None
    return (
        f"refusing to listen on {host} without an API key: set {API_KEYS_ENV}=<key>[,<key>...] "
        "(clients send 'Authorization: Bearer <key>'), or listen on 127.0.0.1"
    )
