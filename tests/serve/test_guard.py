"""The fast tier of the HTTP layer, part two (TestClient, no index built): the key, the
body limit and the rate limit in front of every route, the public paths listed once, and an
OpenAPI description of every answer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from corpus_pipeline.serve import routes, web
from corpus_pipeline.serve.app import create_app
from corpus_pipeline.serve.deps import PUBLIC, is_public

KEY = "k-" + "7" * 30


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "corpus"
    (home / "kbs" / "docs").mkdir(parents=True)
    (home / "kbs" / "docs" / "a.md").write_text("# A\n\nnot indexed yet\n", encoding="utf-8")
    return home


@pytest.fixture
def client(home: Path) -> Iterator[TestClient]:
    with TestClient(create_app(home, api_keys=[KEY], rate_per_s=0, max_body_bytes=1024)) as c:
        yield c


def _concrete(path: str) -> str:
    for name, value in (("{kb}", "docs"), ("{chunk_id}", "0123456789abcdef"), ("{doc_id}", "abc")):
        path = path.replace(name, value)
    return path.replace("{prefix}", "00").replace("{name}", "11.png")


def _routes() -> list[tuple[str, str]]:
    """Every route of the routers the app includes (the JSON API's and the page's)."""
    out = []
    for router in (routes.public, routes.api, web.router):
        for r in router.routes:
            assert isinstance(r, APIRoute)
            out += [(m, r.path) for m in sorted(r.methods)]
    return out


def test_every_route_but_the_public_ones_needs_a_key(client: TestClient, home: Path) -> None:
    every = _routes()
    assert len(every) >= 12  # the JSON API and the page's routes
    guarded = [(m, p) for m, p in every if not is_public(p)]
    for method, path in guarded:
        r = client.request(method, _concrete(path), json={} if method == "POST" else None)
        assert r.status_code == 401, (method, path, r.status_code)
        wrong = client.request(
            method, _concrete(path), json={} if method == "POST" else None, headers={"Authorization": "Bearer nope"}
        )
        assert wrong.status_code == 403, (method, path, wrong.status_code)
    for path in ("/healthz", "/openapi.json", "/"):
        assert path in PUBLIC and client.get(path).status_code == 200, path
    assert client.get("/ui/static/app.js").status_code in (200, 404)  # public: never 401
    assert client.post("/retrieval", json={}).json() == {
        "error_code": 1001,
        "error_msg": "missing or malformed Authorization header: expected 'Bearer <key>'",
    }


def test_a_body_over_the_limit_is_refused_declared_or_streamed(client: TestClient) -> None:
    auth = {"Authorization": f"Bearer {KEY}"}
    big = b'{"query": "' + b"x" * 4096 + b'", "kb": "docs"}'
    declared = client.post("/search", content=big, headers={**auth, "Content-Type": "application/json"})
    assert declared.status_code == 413 and declared.json()["error"]["code"] == "body_too_large"

    def chunks() -> Iterator[bytes]:  # no Content-Length: chunked, counted as it streams
        for i in range(0, len(big), 500):
            yield big[i : i + 500]

    streamed = client.post("/search", content=chunks(), headers={**auth, "Content-Type": "application/json"})
    assert streamed.status_code == 413 and streamed.json()["error"]["code"] == "body_too_large"
    dify = client.post("/retrieval", content=chunks(), headers={**auth, "Content-Type": "application/json"})
    assert dify.status_code == 413 and dify.json()["error_code"] == 413
    small = client.post("/search", json={"query": "q", "kb": "docs"}, headers=auth)
    assert small.status_code == 409  # (under the limit: the route answers; the KB is not indexed)


def test_the_rate_limit_is_per_client_and_answers_in_the_routes_shape(home: Path) -> None:
    with TestClient(create_app(home, api_keys=[KEY], rate_per_s=0.01, burst=2)) as c:
        auth = {"Authorization": f"Bearer {KEY}"}
        assert [c.get("/kbs", headers=auth).status_code for _ in range(2)] == [200, 200]
        limited = c.get("/kbs", headers=auth)
        assert limited.status_code == 429 and limited.json()["error"]["code"] == "rate_limited"
        dify = c.post("/retrieval", json={}, headers=auth)
        assert dify.status_code == 429 and dify.json()["error_code"] == 429


def test_openapi_describes_every_answer(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    api = {r.path for router in (routes.public, routes.api) for r in router.routes if isinstance(r, APIRoute)}
    assert (
        set(paths) == api and {"/search", "/retrieval", "/chunks/{chunk_id}"} <= api
    )  # (every JSON route, no page route)
    for path, ops in paths.items():
        for method, op in ops.items():
            ok = op["responses"]["200"]["content"]["application/json"]["schema"]
            assert "$ref" in ok or ok.get("type") == "array", (method, path, ok)
            if path not in ("/healthz", "/readyz"):  # (the probes: public)
                for status in ("401", "403", "413", "429"):
                    assert status in op["responses"], (method, path, status)
    schemas = spec["components"]["schemas"]
    assert {"SearchResponse", "Result", "Hit", "Lineage", "DifyResponse", "ErrorBody", "DifyErrorBody"} <= set(schemas)
    assert paths["/retrieval"]["post"]["responses"]["404"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/DifyErrorBody"
    }


def test_readiness_is_503_while_starting_and_while_stopping(home: Path) -> None:
    from corpus_pipeline.serve.deps import STOPPING

    app = create_app(home, api_keys=["k"], warm=True)
    server = app.state.server
    with TestClient(app) as c:
        assert c.get("/healthz").status_code == 200  # (liveness: up, whatever the readiness)
        server.ready.wait(60)  # (the warm-up thread: no KB with an active version here)
        assert c.get("/readyz").json()["status"] == "ready"
        server.ready.clear()
        r = c.get("/readyz")
        assert (r.status_code, r.json()["status"]) == (503, "starting")
        server.ready.set()
        STOPPING.set()
        try:
            r = c.get("/readyz")
            assert (r.status_code, r.json()["status"]) == (503, "stopping")
        finally:
            STOPPING.clear()
        assert c.get("/readyz").status_code == 200


def test_the_docs_page_works_offline_and_says_how_to_send_the_key(client: TestClient) -> None:
    page = client.get("/docs")
    assert page.status_code == 200 and "cdn." not in page.text and "http" not in page.text.split("<body>")[0]
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css"):
        assert f"/docs-static/{asset}" in page.text
        r = client.get(f"/docs-static/{asset}")  # (no key needed: served by the server itself)
        assert r.status_code == 200 and len(r.content) > 10_000, asset
    spec = client.get("/openapi.json").json()
    assert "Authorization: Bearer" in spec["info"]["description"]
    [scheme] = spec["components"]["securitySchemes"].values()
    assert scheme == {"type": "http", "scheme": "bearer", "description": "a key of the server's CORPUS_API_KEYS"}
    assert spec["paths"]["/search"]["post"]["security"] and "security" not in spec["paths"]["/healthz"]["get"]
