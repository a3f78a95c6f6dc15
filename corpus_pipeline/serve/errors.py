"""Errors over HTTP: one table from the library's errors to (status, code), one body shape
(Dify's on ``/retrieval``), and nothing of the server in any answer.

    {"error": {"code": "version_not_published", "message": "..."}}      every route
    {"error_code": 2001, "error_msg": "..."}                           POST /retrieval (Dify)

A route answers an error by raising ``HttpError`` (status, code, message, Dify's code); a
library error it does not catch is answered by ``ERROR_TABLE``; the framework's own (no
route, a body over the limit, a request its model refuses) in the same shape. Handlers:
``install(app)``.

A message may name the server's files (a kb.yaml, a partition, a table) or, from a library
underneath, a source file of its own (``…/lance/src/dataset.rs:123``): ``public_message``
writes ``$CORPUS_HOME`` / ``$CORPUS_WAREHOUSE`` for the server's roots, ``<path>`` for any
other absolute path, ``<url>`` for a URL and ``<source>`` for a source location, after
masking keys. An error nobody expected is logged whole (with its traceback) on the server
and answered ``internal_error`` with an id to find it there, never with its text.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterable
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from corpus_pipeline.errors import ConfigError, CorpusError, ModelError, StoreError
from corpus_pipeline.secrets import mask
from corpus_pipeline.store.snapshots import SnapshotNotFound

log = logging.getLogger("corpus_pipeline.serve")

#: (error type, HTTP status, code, Dify's error_code): the first row the error is an
#: instance of answers. Dify's API documents 1001 (bad Authorization header), 1002 (failed
#: authorization) and 2001 (no such knowledge base); other rows send the HTTP status.
ERROR_TABLE: tuple[tuple[type[Exception], int, str, int], ...] = (
    (SnapshotNotFound, 404, "version_not_published", 2001),
    (ConfigError, 422, "invalid_request", 422),
    (ModelError, 502, "model_unavailable", 502),
    (StoreError, 409, "not_indexed", 2001),
    (CorpusError, 400, "bad_request", 400),
)
_MESSAGE_LIMIT = 1000
_URL = re.compile(r"\b[a-z][a-z0-9+.-]{1,15}://[^\s'\"<>)]+", re.IGNORECASE)
_SOURCE = re.compile(r"[\w./-]*\.(?:rs|cc|cpp|c|h|go):\d+(?::\d+)?")
_PATH = re.compile(r"(?<![\w.~$<>-])/(?:[\w.@+~-]+/)*[\w.@+~-]+")


class HttpError(Exception):
    """An answer a route chose: its status, code and message (``dify_code`` on ``/retrieval``,
    default the status). The one error type of every route, JSON and page alike."""

    def __init__(self, status: int, code: str, message: str, *, dify_code: int = 0) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.dify_code = status, code, message, dify_code or status


def public_message(message: str, roots: Iterable[tuple[str, str]] = ()) -> str:
    """``message`` as a client may read it: keys masked, ``roots`` (``(path, name)``, e.g.
    the server's home as ``$CORPUS_HOME``) named, any other path, URL or source location
    replaced, cut to 1,000 characters."""
    text = mask(message)
    for path, name in sorted(roots, key=lambda r: -len(r[0])):
        if path:
            text = text.replace(path.rstrip("/"), name)
    text = _URL.sub("<url>", text)
    text = _SOURCE.sub("<source>", text)
    text = _PATH.sub("<path>", text)
    return text[:_MESSAGE_LIMIT]


def roots_of(request: Request) -> list[tuple[str, str]]:
    """The server's own roots, named, for ``public_message``."""
    layout = getattr(request.app.state, "layout", None)
    if layout is None:
        return []
    return [(str(layout.warehouse), "$CORPUS_WAREHOUSE"), (str(layout.home), "$CORPUS_HOME")]


def error_body(status: int, code: str, message: str, *, dify: bool = False, dify_code: int = 0) -> JSONResponse:
    """The one body of an error (Dify's shape on ``/retrieval``)."""
    if dify:
        return JSONResponse({"error_code": dify_code or status, "error_msg": message}, status_code=status)
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def classify(exc: Exception) -> tuple[int, str, int]:
    """(status, code, Dify's code) of a library error, from ``ERROR_TABLE``."""
    for kind, status, code, dify_code in ERROR_TABLE:
        if isinstance(exc, kind):
            return status, code, dify_code
    return 500, "internal_error", 500


def is_dify(request: Request) -> bool:
    return request.url.path == "/retrieval"


async def library_error(request: Request, exc: Exception) -> JSONResponse:
    """A ``CorpusError`` a route did not answer itself, by ``ERROR_TABLE``."""
    status, code, dify_code = classify(exc)
    return error_body(
        status, code, public_message(str(exc), roots_of(request)), dify=is_dify(request), dify_code=dify_code
    )


async def http_error(request: Request, exc: Exception) -> JSONResponse:
    """An ``HttpError`` a route or a dependency raised."""
    assert isinstance(exc, HttpError)
    message = public_message(exc.message, roots_of(request))
    return error_body(exc.status, exc.code, message, dify=is_dify(request), dify_code=exc.dify_code)


#: The codes of the HTTP errors the framework raises (no route, body too large, ...).
_FRAMEWORK_CODES = {404: "not_found", 405: "method_not_allowed", 413: "body_too_large"}


async def framework_error(request: Request, exc: Exception) -> JSONResponse:
    """An HTTP error of the framework itself (an unknown path, a wrong method, a body cut
    off at the limit), in the same shape."""
    assert isinstance(exc, StarletteHTTPException)
    code = _FRAMEWORK_CODES.get(exc.status_code, "http_error")
    message = public_message(str(exc.detail), roots_of(request))
    return error_body(exc.status_code, code, message, dify=is_dify(request), dify_code=exc.status_code)


async def invalid_request(request: Request, exc: Exception) -> JSONResponse:
    """A request its models refused (422), the fields named."""
    assert isinstance(exc, RequestValidationError)
    detail = "; ".join(
        f"{'.'.join(str(p) for p in e.get('loc', ()) if p != 'body')}: {e.get('msg')}" for e in exc.errors()
    )
    return error_body(422, "invalid_request", detail[:_MESSAGE_LIMIT], dify=is_dify(request), dify_code=422)


async def unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    """Anything else: the whole of it in the server's log, an id in the answer."""
    ref = uuid.uuid4().hex[:12]
    log.error("internal error %s on %s %s", ref, request.method, request.url.path, exc_info=exc)
    message = f"internal error {ref}: the server's log has the details"
    return error_body(500, "internal_error", message, dify=is_dify(request), dify_code=500)


def install(app: Any) -> None:
    """Every error handler of the app: one shape for every error, Dify's on ``/retrieval``."""
    app.add_exception_handler(HttpError, http_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(StarletteHTTPException, framework_error)
    app.add_exception_handler(CorpusError, library_error)  # (what a route did not answer: ERROR_TABLE)
    app.add_exception_handler(Exception, unexpected_error)  # (logged whole; answered with an id)
