"""The OpenAI-compatible embeddings provider over real HTTP to a local server: batches,
concurrency, prefixes, dimensions, the key from the environment, and every way a reply can
be wrong (each a ModelError naming the endpoint, with the key masked)."""

from __future__ import annotations

import math
import threading
import time

import numpy as np
import pytest
from support.openai_server import OpenAIServer, Reply, Request, embeddings_handler, hashed_vector

from corpus_pipeline.embedding import EmbeddingConfig, open_embedder
from corpus_pipeline.embedding.remote import OpenAIEmbedder
from corpus_pipeline.errors import ModelError

_opened: list[OpenAIEmbedder] = []


@pytest.fixture(autouse=True)
def _close_embedders():
    """Every endpoint client a test opens is closed (its pooled sockets with it)."""
    yield
    while _opened:
        _opened.pop().close()


@pytest.fixture
def server():
    with OpenAIServer() as s:
        s.handler = embeddings_handler(32)
        yield s


def _embedder(server: OpenAIServer, **cfg) -> OpenAIEmbedder:
    config = EmbeddingConfig(
        **{"provider": "openai", "base_url": server.base_url, "model": "bge-m3", "max_retries": 0, **cfg}
    )
    embedder = open_embedder(config)
    assert isinstance(embedder, OpenAIEmbedder)
    _opened.append(embedder)
    return embedder


def test_vectors_come_back_normalised_in_order_in_batches(server):
    texts = [f"passage number {i} about pumps" for i in range(7)]
    emb = _embedder(server, batch_size=3, max_concurrency=1)
    vecs = emb.embed(texts)
    calls = server.calls("/v1/embeddings")
    assert [len(c.body["input"]) for c in calls] == [3, 3, 1]
    assert all(c.body["model"] == "bge-m3" and c.body["encoding_format"] == "float" for c in calls)
    want = np.asarray([hashed_vector(t, 32) for t in texts], dtype=np.float32)
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    assert vecs.shape == (7, 32) and vecs.dtype == np.float32
    assert np.allclose(vecs, want, atol=1e-6)
    assert emb.dimension == 32 and emb.model_name == "openai:bge-m3"
    emb.close()


def test_prefixes_are_sent_for_passages_and_queries(server):
    emb = _embedder(server, model="intfloat/multilingual-e5-base")  # e5 family: its published prefixes
    emb.embed(["the pump"])
    emb.embed_queries(["which pump"])
    inputs = [c.body["input"] for c in server.calls("/v1/embeddings")]
    assert inputs == [["passage: the pump"], ["query: which pump"]]
    custom = _embedder(server, query_prefix="Q> ", passage_prefix="")
    custom.embed_queries(["x"])
    assert server.calls("/v1/embeddings")[-1].body["input"] == ["Q> x"]


def test_dimensions_are_asked_for_and_checked(server):
    emb = _embedder(server, dimensions=8)
    assert emb.embed(["a b c"]).shape == (1, 8)
    assert server.calls("/v1/embeddings")[-1].body["dimensions"] == 8
    assert emb.dimension == 8 and emb.model_name == "openai:bge-m3@8"
    server.handler = lambda r: Reply.embeddings([[1.0] * 16 for _ in r.body["input"]])  # ignores dimensions
    with pytest.raises(ModelError, match="returned 16-dimensional vectors, expected 8"):
        emb.embed(["a"])


def test_an_unknown_dimension_is_asked_of_the_endpoint_once(server):
    emb = _embedder(server)
    assert emb.dimension == 32 and emb.dimension == 32
    assert len(server.calls("/v1/embeddings")) == 1


def test_the_key_comes_from_the_variable_named_and_is_masked_in_errors(server, monkeypatch):
    monkeypatch.setenv("EMB_KEY", "plainsecret123456")
    emb = _embedder(server, api_key_env="EMB_KEY")
    emb.embed(["x"])
    assert server.calls("/v1/embeddings")[-1].headers["authorization"] == "Bearer plainsecret123456"
    server.queue(Reply.error(401, "invalid key plainsecret123456 for Bearer plainsecret123456"))
    with pytest.raises(ModelError) as err:
        emb.embed(["y"])
    message = str(err.value)
    assert "plainsecret123456" not in message and "embedding endpoint http://127.0.0.1" in message
    assert "'bge-m3'" in message and "AuthenticationError" in message


def test_requests_run_concurrently_but_never_more_than_max_concurrency(server):
    lock, state = threading.Lock(), {"now": 0, "peak": 0}
    inner = embeddings_handler(32)

    def slow(request: Request) -> Reply:
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.15)
        with lock:
            state["now"] -= 1
        return inner(request)

    server.handler = slow
    emb = _embedder(server, batch_size=1, max_concurrency=3)
    vecs = emb.embed([f"text {i}" for i in range(9)])
    assert vecs.shape == (9, 32)
    assert state["peak"] == 3


def test_a_server_error_is_retried_then_reported(server):
    server.queue(Reply.error(503, "overloaded"))
    emb = _embedder(server, max_retries=1)
    assert emb.embed(["x"]).shape == (1, 32)  # the retry succeeded
    server.queue(Reply.error(503, "overloaded"), Reply.error(503, "overloaded"))
    with pytest.raises(ModelError, match="InternalServerError"):
        emb.embed(["x"])


def test_a_slow_endpoint_times_out(server):
    server.queue(Reply.embeddings([[1.0] * 32]).after(1.5))
    emb = _embedder(server, timeout_s=0.3)
    with pytest.raises(ModelError, match="Timeout"):
        emb.embed(["x"])


def test_a_refused_connection_names_the_endpoint():
    emb = open_embedder(EmbeddingConfig(provider="openai", base_url="http://127.0.0.1:9/v1", model="m", max_retries=0))
    assert isinstance(emb, OpenAIEmbedder)
    _opened.append(emb)
    with pytest.raises(ModelError, match=r"embedding endpoint http://127.0.0.1:9/v1 \(model 'm'\) failed"):
        emb.embed(["x"])


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (Reply.embeddings([[1.0, 0.0]]), "returned 1 vectors for 2 texts"),
        (Reply.embeddings([[1.0, 0.0], [1.0]]), "vectors of sizes"),
        (Reply.embeddings([[1.0, 0.0], [0.0, 0.0]]), "NaN, infinite or all-zero"),
        (Reply.json({"object": "list", "data": [{"index": 0, "embedding": [1.0, math.inf]}] * 2}), "bad or repeated"),
        (Reply.json({"data": "nope"}), "returned str vectors for 2 texts"),
        (
            Reply.json({"data": [{"index": 0, "embedding": ["a", "b"]}, {"index": 1, "embedding": ["c", "d"]}]}),
            "not numbers",
        ),
        (Reply.malformed(), "unreadable response"),
    ],
)
def test_a_wrong_reply_is_an_error_never_a_vector(server, reply, message):
    server.queue(reply)
    with pytest.raises(ModelError, match=message):
        _embedder(server).embed(["a", "b"])


def test_a_nan_in_a_reply_is_refused(server):
    server.queue(Reply(200, b'{"data": [{"index": 0, "embedding": [NaN, 1.0]}]}'))
    with pytest.raises(ModelError, match="NaN"):
        _embedder(server).embed(["a"])
