"""The fast tier of the HTTP layer (FastAPI's TestClient, no index built): every route's
errors have one shape (Dify's on /retrieval), the status of the library's error table, and
nothing of the server in them: no path, URL, source location or traceback, whatever the
library's message said."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from corpus_pipeline.api import KB
from corpus_pipeline.serve.app import create_app
from corpus_pipeline.serve.errors import public_message

BAD_YAML = "chunking:\n  plan: PARENT:NOPE;CHILD:RECURSIVE\n  typo_key: 1\n"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "corpus-home-7f3a"
    (home / "kbs" / "bad").mkdir(parents=True)
    (home / "kbs" / "bad" / "kb.yaml").write_text(BAD_YAML, encoding="utf-8")
    (home / "kbs" / "empty").mkdir()
    (home / "kbs" / "empty" / "a.md").write_text("# A\n\nnot indexed yet\n", encoding="utf-8")
    return home


@pytest.fixture
def client(home: Path):
    with TestClient(create_app(home, api_keys=[], rate_per_s=0), raise_server_exceptions=False) as c:
        yield c


def _clean(home: Path, text: str) -> None:
    assert str(home) not in text and "/tmp/" not in text and ".rs:" not in text and "Traceback" not in text


REQUESTS = [
    ("POST", "/search", {"query": "q", "kb": "bad"}),
    ("POST", "/search", {"query": "q", "kb": "empty"}),
    ("POST", "/search", {"query": "q", "kb": "missing"}),
    ("POST", "/search", {"query": "q", "kb": "empty", "version": "../../etc"}),
    ("GET", "/kbs/bad/versions", None),
    ("GET", "/kbs/missing/versions", None),
    ("GET", "/chunks/0123456789abcdef", None),
    ("GET", "/ui/api/kbs/bad/documents", None),
    ("GET", "/ui/api/kbs/empty/documents", None),
    ("GET", "/ui/api/kbs/empty/documents/abc", None),
    ("GET", "/ui/fragments/search?kb=empty&q=x", None),
    ("GET", "/ui/fragments/documents?kb=bad", None),
    ("GET", "/ui/images/00/11.png", None),
    ("GET", "/no/such/route", None),
]


@pytest.mark.parametrize(("method", "path", "body"), REQUESTS)
def test_every_route_answers_an_error_in_one_shape_with_nothing_of_the_server(client, home, method, path, body):
    r = client.request(method, path, json=body)
    assert 400 <= r.status_code < 500, r.text
    err = r.json()["error"]
    assert set(err) == {"code", "message"} and err["code"] and err["message"]
    _clean(home, r.text)


def test_an_invalid_kb_yaml_is_named_relative_to_the_home(client, home):
    r = client.post("/search", json={"query": "q", "kb": "bad"})
    assert r.status_code == 409 and r.json()["error"]["code"] == "kb_invalid"
    assert "$CORPUS_HOME/kbs/bad/kb.yaml" in r.json()["error"]["message"]


def test_dify_gets_its_own_shape_for_every_error(client, home):
    cases = {
        "bad": 422,  # an invalid kb.yaml (was a 500 in the other shape)
        "empty": 404,  # not indexed
        "missing": 404,
    }
    for kb, status in cases.items():
        r = client.post("/retrieval", json={"knowledge_id": kb, "query": "q", "retrieval_setting": {"top_k": 3}})
        assert r.status_code == status, r.text
        body = r.json()
        assert set(body) == {"error_code", "error_msg"}, body
        _clean(home, r.text)
    r = client.post("/retrieval", json={"knowledge_id": "empty", "query": ""})
    assert r.status_code == 422 and set(r.json()) == {"error_code", "error_msg"}


def test_an_unexpected_error_is_logged_whole_and_answered_with_an_id(client, home, monkeypatch, caplog):
    def boom(*_a, **_k):
        raise RuntimeError(f"fell over in {home}/warehouse/lancedb at /root/.cargo/registry/src/lance/src/io.rs:42:7")

    monkeypatch.setattr(KB, "search", boom)
    (home / "kbs" / "empty" / "kb.yaml").write_text("description: ok\n", encoding="utf-8")
    with caplog.at_level(logging.ERROR, logger="corpus_pipeline.serve"):
        r = client.post("/search", json={"query": "q", "kb": "empty"})
        d = client.post("/retrieval", json={"knowledge_id": "empty", "query": "q", "retrieval_setting": {"top_k": 1}})
    assert r.status_code == 500 and r.json()["error"]["code"] == "internal_error"
    assert d.status_code == 500 and set(d.json()) == {"error_code", "error_msg"}
    for resp in (r, d):
        _clean(home, resp.text)
        assert "fell over" not in resp.text and "RuntimeError" not in resp.text
    ref = r.json()["error"]["message"].split()[2].rstrip(":")
    assert any(ref in rec.getMessage() and rec.exc_info for rec in caplog.records)  # the log has it all


def test_public_message_names_the_roots_and_hides_the_rest():
    roots = [("/srv/corpus", "$CORPUS_HOME"), ("/srv/corpus/warehouse", "$CORPUS_WAREHOUSE")]
    msg = (
        "partition /srv/corpus/warehouse/child_chunks/kb=a has not been materialized; "
        "kb.yaml at /srv/corpus/kbs/a/kb.yaml; lance said /home/ci/.cargo/src/lance-14/src/dataset.rs:881:23 "
        "and rust/lance/src/io/commit.rs:12; fetched s3://bucket/prefix/x and http://10.0.0.1:9000/y; "
        "key sk-abcdefghijklmnopqrstuvwxyz123456"
    )
    out = public_message(msg, roots)
    assert "$CORPUS_WAREHOUSE/child_chunks/kb=a" in out and "$CORPUS_HOME/kbs/a/kb.yaml" in out
    assert "/home/ci" not in out and ".rs" not in out and "s3://" not in out and "10.0.0.1" not in out
    assert "sk-abcdefghijklmnopqrstuvwxyz123456" not in out
    assert public_message("no knowledge base 'x'; run `corpus index --kb x`") == (
        "no knowledge base 'x'; run `corpus index --kb x`"
    )


HOSTILE = ["bad", "missing", "../../etc/passwd", "..%2f..%2fkb.yaml", "x" * 300, "%00", "empty"]


def _filled(path: str, value: str) -> str:
    for name in ("{kb}", "{chunk_id}", "{doc_id}", "{prefix}", "{name}"):
        path = path.replace(name, value)
    return path


def test_every_route_of_the_routers_answers_hostile_input_in_one_shape(client, home):
    """Not a list of known cases: every route the app's routers hold, each path parameter
    (and the KB and version of the query and the body) filled with names an attacker would
    try. No answer is a 5xx, none names the server's files, each is the route's error shape."""
    from fastapi.routing import APIRoute

    from corpus_pipeline.serve import routes, web

    seen = 0
    for router in (routes.public, routes.api, web.router):
        for route in router.routes:
            assert isinstance(route, APIRoute)
            for method in sorted(route.methods):
                for value in HOSTILE:
                    params = {"kb": value, "version": value, "q": "q", "doc": value, "a": value, "b": value}
                    body = {"query": "q", "kb": value, "version": value, "knowledge_id": value}
                    if method == "POST" and route.path == "/retrieval":
                        body["retrieval_setting"] = {"top_k": 1}
                    r = client.request(
                        method, _filled(route.path, value), params=params, json=body if method == "POST" else None
                    )
                    seen += 1
                    assert r.status_code < 500, (method, route.path, value, r.status_code, r.text[:300])
                    _clean(home, r.text)
                    if r.status_code >= 400 and r.headers.get("content-type", "").startswith("application/json"):
                        shape = set(r.json())
                        want = {"error_code", "error_msg"} if route.path == "/retrieval" else {"error"}
                        assert shape == want, (method, route.path, value, r.text[:300])
    assert seen >= 12 * len(HOSTILE)
