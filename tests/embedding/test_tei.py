"""The text-embeddings-inference provider (``provider: tei``) over real HTTP to a local
server speaking TEI's native ``POST /embed``: the request's shape, checked and normalised
vectors, retries, the key, a reply too big; and the unit a provider is: the same model
name through two providers never shares cached vectors, nor a strategy version."""

from __future__ import annotations

import numpy as np
import pytest
from dagster import instance_for_test
from support.openai_server import OpenAIServer, Reply, Request, embeddings_handler, hashed_vector

from assets.definitions import build_definitions
from assets.runner import index_kb
from corpus_pipeline.embedding import EmbeddingConfig, open_embedder
from corpus_pipeline.embedding import tei as tei_module
from corpus_pipeline.embedding.cache import EmbeddingCache, embed_with_cache
from corpus_pipeline.embedding.tei import TEIEmbedder
from corpus_pipeline.errors import ConfigError, ModelError
from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.parquet import read_partition
from corpus_pipeline.store.versions import register_version
from corpus_pipeline.versioning import strategy_version

DIM = 24


def tei_handler(dim: int = DIM, *, flip: bool = False):
    """``/embed`` answering a JSON list of ``hashed_vector`` of each input (negated with
    ``flip``: another server's vectors for the same texts)."""

    def handle(request: Request) -> Reply:
        if request.path != "/embed" or not isinstance(request.body, dict):
            return Reply.json({"error": "not found", "error_type": "Validation"}, 404)
        vecs = [hashed_vector(t, dim) for t in request.body["inputs"]]
        return Reply.json([[-x for x in v] for v in vecs] if flip else vecs)

    return handle


@pytest.fixture
def server():
    with OpenAIServer() as s:
        s.handler = tei_handler()
        yield s


def _root(server: OpenAIServer) -> str:
    return server.base_url.removesuffix("/v1")


def _tei(server: OpenAIServer, **cfg) -> TEIEmbedder:
    config = EmbeddingConfig(
        **{"provider": "tei", "base_url": _root(server), "model": "bge-m3", "max_retries": 0, **cfg}
    )
    emb = open_embedder(config)
    assert isinstance(emb, TEIEmbedder)
    return emb


def test_vectors_come_back_checked_normalised_in_order(server):
    texts = [f"pump {i} maintenance" for i in range(5)]
    emb = _tei(server, batch_size=2, max_concurrency=1, passage_prefix="passage: ", query_prefix="query: ")
    vecs = emb.embed(texts)
    calls = server.calls("/embed")
    assert [c.body["inputs"] for c in calls] == [
        ["passage: pump 0 maintenance", "passage: pump 1 maintenance"],
        ["passage: pump 2 maintenance", "passage: pump 3 maintenance"],
        ["passage: pump 4 maintenance"],
    ]
    assert all(c.body["truncate"] is True for c in calls)
    want = np.asarray([hashed_vector("passage: " + t, DIM) for t in texts], dtype=np.float32)
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    assert vecs.shape == (5, DIM) and np.allclose(vecs, want, atol=1e-6)
    assert emb.embed_queries(["why"]).shape == (1, DIM)
    assert server.calls("/embed")[-1].body["inputs"] == ["query: why"]
    assert emb.model_name == "tei:bge-m3|passage: " and emb.dimension == DIM
    emb.close()


def test_the_key_is_sent_when_set_and_masked_in_errors(server, monkeypatch):
    monkeypatch.setenv("TEI_KEY", "tei-secret-98765")
    server.handler = lambda r: Reply.json({"error": "bad token tei-secret-98765", "error_type": "Unauthorized"}, 401)
    emb = _tei(server, api_key_env="TEI_KEY")
    with pytest.raises(ModelError) as err:
        emb.embed(["x"])
    assert server.calls("/embed")[0].headers["authorization"] == "Bearer tei-secret-98765"
    assert "tei-secret-98765" not in str(err.value) and "HTTP 401" in str(err.value) and "/embed" in str(err.value)
    assert len(server.calls("/embed")) == 1  # (401 is not retried)
    emb.close()


def test_a_server_error_is_retried_then_succeeds(server):
    server.queue(Reply.json({"error": "overloaded", "error_type": "Overloaded"}, 503))
    emb = _tei(server, max_retries=2)
    assert emb.embed(["a", "b"]).shape == (2, DIM)
    assert len(server.calls("/embed")) == 2
    emb.close()


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (Reply.json([[1.0, 0.0]]), "1 vectors for 2 texts"),
        (Reply.json({"embeddings": []}), "dict vectors for 2 texts"),
        (Reply.json([[1.0, 0.0], [1.0]]), "sizes"),
        (Reply.json([[1.0, "x"], [1.0, 0.0]]), "not numbers"),
        (Reply(200, b"[[1.0, NaN], [1.0, 0.0]]"), "NaN"),
        (Reply(200, b"<html>"), "not JSON"),
    ],
)
def test_a_wrong_reply_is_an_error_never_a_vector(server, reply, message):
    server.queue(reply)
    emb = _tei(server)
    with pytest.raises(ModelError, match=message):
        emb.embed(["one", "two"])
    emb.close()


def test_a_reply_past_the_bound_is_refused_not_read(server, monkeypatch):
    monkeypatch.setattr(tei_module, "MAX_REPLY_BYTES", 1000)
    server.handler = tei_handler(dim=200)
    emb = _tei(server)
    with pytest.raises(ModelError, match="more than 1000"):
        emb.embed(["a long reply"])
    emb.close()


def test_tei_needs_a_base_url_and_takes_no_dimensions():
    with pytest.raises(ValueError, match=r"needs embedding\.base_url"):
        EmbeddingConfig(provider="tei", model="bge-m3")
    with pytest.raises(ValueError, match="dimensions is not taken"):
        EmbeddingConfig(provider="tei", model="bge-m3", base_url="http://tei:8080", dimensions=256)
    with pytest.raises(ValueError, match="one of: sentence-transformers, openai, tei"):
        EmbeddingConfig(provider="cohere", model="bge-m3")


def test_two_providers_of_the_same_model_name_never_share_cached_vectors(tmp_path):
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite")
    texts = ["the console listens on port 8443", "monthly snapshots are kept 12 months"]
    with OpenAIServer() as openai_srv, OpenAIServer() as tei_srv:
        openai_srv.handler = embeddings_handler(DIM)
        tei_srv.handler = tei_handler(flip=True)  # (another server: other vectors for the same texts)
        via_openai = EmbeddingConfig(provider="openai", base_url=openai_srv.base_url, model="bge-m3", max_retries=0)
        via_tei = EmbeddingConfig(provider="tei", base_url=_root(tei_srv), model="bge-m3", max_retries=0)
        assert via_openai.vector_key != via_tei.vector_key
        a_emb, t_emb = open_embedder(via_openai), open_embedder(via_tei)
        a, embedded, _ = embed_with_cache(texts, a_emb, cache)
        assert embedded == 2
        t, embedded, reused = embed_with_cache(texts, t_emb, cache)
        assert (embedded, reused) == (2, 0) and len(tei_srv.calls("/embed")) == 1  # not the other's vectors
        assert np.allclose(t, -a, atol=1e-6)
        again, embedded, reused = embed_with_cache(texts, t_emb, cache)  # its own vectors are cached
        assert (embedded, reused) == (0, 2) and np.allclose(again, t) and len(tei_srv.calls("/embed")) == 1
        a_emb.close()  # type: ignore[attr-defined]
        t_emb.close()  # type: ignore[attr-defined]


def test_a_kb_indexed_through_tei_has_its_own_version_and_vectors(tiny_kb, corpus_home):
    layout = Layout(corpus_home)
    base = (tiny_kb / "kb.yaml").read_text(encoding="utf-8")
    with OpenAIServer() as openai_srv, OpenAIServer() as tei_srv, instance_for_test() as instance:
        openai_srv.handler = embeddings_handler(DIM)
        tei_srv.handler = tei_handler()
        versions = {}
        for name, url in (("openai", openai_srv.base_url), ("tei", _root(tei_srv))):
            (tiny_kb / "kb.yaml").write_text(
                base + f"embedding:\n  provider: {name}\n  base_url: {url}\n  model: bge-m3\n  max_retries: 0\n",
                encoding="utf-8",
            )
            kb = resolve_kb(tiny_kb)
            version = register_version(layout, kb)
            summary = index_kb(build_definitions(str(corpus_home)), instance, layout, kb, version, say=lambda s: None)
            assert summary.status == "ok", summary.error
            versions[name] = version
            stored = read_partition(layout.partition_dir("chunk_embeddings", "tiny", version))
            assert set(stored.column("model").to_pylist()) == {f"{name}:bge-m3"}
        assert versions["openai"] != versions["tei"]
        assert tei_srv.calls("/embed") and openai_srv.calls("/v1/embeddings")
        assert strategy_version(resolve_kb(tiny_kb)) == versions["tei"]
    (tiny_kb / "kb.yaml").write_text(base + "embedding:\n  provider: tei\n  model: bge-m3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="base_url"):
        resolve_kb(tiny_kb)
