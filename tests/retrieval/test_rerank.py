"""Rerank over real HTTP (TEI's API and Cohere's, which Jina and vLLM share) and with a local
CrossEncoder folder; every failure keeps the fused order and is recorded."""

from __future__ import annotations

import shutil

import pytest
from pydantic import ValidationError
from support.openai_server import OpenAIServer, Reply, Request

from corpus_pipeline.kbconfig import KBConfig
from corpus_pipeline.retrieval.rerank import RerankConfig, open_reranker, rerank_order
from corpus_pipeline.retrieval.rerank.local import CrossEncoderReranker

from .tiny_index import _searcher

QUERY = "告警"
VECTORS = {QUERY: [0.7, 0.7, 0.1, 0.0]}


@pytest.fixture
def server():
    with OpenAIServer() as s:
        yield s


def _by_marker(markers: dict[str, float], api: str):
    """A rerank endpoint scoring each document by the parent marker it holds ("<P2 ...")."""

    def handle(request: Request) -> Reply:
        docs = request.body["texts"] if api == "tei" else request.body["documents"]
        scores = [next((v for k, v in markers.items() if f"<{k} " in d), 0.0) for d in docs]
        if api == "tei":
            return Reply.json([{"index": i, "score": s} for i, s in sorted(enumerate(scores), key=lambda x: -x[1])])
        return Reply.json({"results": [{"index": i, "relevance_score": s} for i, s in enumerate(scores)]})

    return handle


@pytest.fixture
def with_reranker(index):
    """Searchers over the test index with a reranker; their clients closed after the test."""
    made = []

    def make(config: RerankConfig, **settings):
        s = _searcher(index, VECTORS, **settings)
        s.reranker = open_reranker(config)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def test_a_tei_endpoint_reorders_the_parents(index, with_reranker, server):
    server.handler = _by_marker({"P3": 0.9, "P2": 0.5, "P1": 0.1}, "tei")
    fused = [r.parent_id for r in _searcher(index, VECTORS).search(QUERY).results]
    res = with_reranker(RerankConfig(url=f"{server.base_url[:-3]}/rerank", api="tei")).search(QUERY)
    [call] = server.calls("/rerank")
    assert set(call.body) == {"query", "texts", "truncate"} and call.body["query"] == QUERY
    assert len(call.body["texts"]) == len(fused)
    ranked = [r.parent_id for r in res.results]
    assert ranked == sorted(fused, key=lambda p: -{"P3": 0.9, "P2": 0.5, "P1": 0.1}.get(p, 0.0))
    assert ranked != fused and res.results[0].rerank_score == {"P3": 0.9, "P2": 0.5, "P1": 0.1}[ranked[0]]
    assert res.rerank[0].status == "reranked" and res.to_dict()["rerank"][0]["documents"] == len(fused)


def test_a_cohere_style_endpoint_gets_the_model_and_top_n_and_the_key(index, with_reranker, server, monkeypatch):
    monkeypatch.setenv("RERANK_API_KEY", "rr-secret-77")
    server.handler = _by_marker({"P1": 0.2, "P2": 0.8}, "cohere")
    cfg = RerankConfig(url=f"{server.base_url}/rerank", model="BAAI/bge-reranker-v2-m3")
    res = with_reranker(cfg).search(QUERY)
    [call] = server.calls("/v1/rerank")
    assert call.body["model"] == "BAAI/bge-reranker-v2-m3" and call.body["top_n"] == len(call.body["documents"])
    assert call.headers["authorization"] == "Bearer rr-secret-77"
    assert res.results[0].parent_id == "P2"


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (Reply.error(500, "boom"), "HTTP 500"),
        (Reply.error(400, "bad request"), "refused: HTTP 400"),
        (Reply.malformed(), "not JSON"),
        (Reply.json({"results": [{"index": 0, "relevance_score": 1.0}]}), "scored 1 of"),
        (
            Reply.json({"results": [{"index": 0, "relevance_score": "high"}, {"index": 1, "relevance_score": 1}]}),
            "not a number",
        ),
        (Reply.json({"results": [{"index": 9, "relevance_score": 1.0}]}), "bad or repeated index 9"),
        (Reply.json({"nothing": 1}), "without a list"),
    ],
)
def test_a_failing_reranker_keeps_the_fused_order_and_says_why(index, with_reranker, server, reply, message):
    server.handler = lambda request: reply
    fused = [r.parent_id for r in _searcher(index, VECTORS).search(QUERY).results]
    res = with_reranker(RerankConfig(url=f"{server.base_url}/rerank", max_retries=0)).search(QUERY)
    assert [r.parent_id for r in res.results] == fused
    assert res.rerank[0].status == "failed" and message in (res.rerank[0].error or "")
    assert any("rerank failed, the fused order is kept" in w for w in res.warnings)


def test_a_slow_reranker_times_out_and_a_5xx_is_retried(index, with_reranker, server):
    server.queue(Reply.error(503, "busy"))
    server.handler = _by_marker({"P2": 1.0}, "cohere")
    res = with_reranker(RerankConfig(url=f"{server.base_url}/rerank", max_retries=1)).search(QUERY)
    assert res.rerank[0].status == "reranked" and len(server.calls("/v1/rerank")) == 2
    server.queue(Reply.json({"results": []}).after(1.0))
    slow = with_reranker(RerankConfig(url=f"{server.base_url}/rerank", timeout_s=0.2, max_retries=0))
    out = slow.search(QUERY)
    assert out.rerank[0].status == "failed" and "Timeout" in (out.rerank[0].error or "")


def test_a_refused_connection_is_a_recorded_failure():
    reranker = open_reranker(RerankConfig(url="http://127.0.0.1:9/rerank", max_retries=0))
    order, scores, outcome = rerank_order(reranker, "q", ["a", "b"])
    reranker.close()
    assert order == [0, 1] and scores is None and outcome.status == "failed" and "ConnectError" in outcome.error


def test_a_local_cross_encoder_folder_reranks(tmp_path, index, with_reranker):
    from sentence_transformers import CrossEncoder

    from corpus_pipeline.embedding.models import MINILM, require_model_folder

    folder = tmp_path / "tiny-cross-encoder"
    shutil.copytree(require_model_folder(MINILM), tmp_path / "base")
    CrossEncoder(str(tmp_path / "base"), num_labels=1, device="cpu").save(str(folder))
    cfg = RerankConfig(model=str(folder))
    reranker = open_reranker(cfg)
    assert isinstance(reranker, CrossEncoderReranker)
    docs = ["the web console listens on port 8443", "disk usage alerts", "CPU usage"]
    model_scores = [float(x) for x in CrossEncoder(str(folder), device="cpu").predict([("port?", d) for d in docs])]
    order, scores, outcome = rerank_order(reranker, "port?", docs)
    assert outcome.status == "reranked" and scores == pytest.approx(model_scores, abs=1e-5)
    assert order == sorted(range(3), key=lambda i: -model_scores[i])
    res = with_reranker(cfg).search(QUERY)
    assert res.rerank[0].status == "reranked" and all(r.rerank_score is not None for r in res.results)


def test_the_rerank_section_is_validated_in_kb_yaml():
    assert not KBConfig().rerank.configured
    assert KBConfig.model_validate({"rerank": {"url": "http://h/rerank", "api": "tei"}}).rerank.configured
    assert not KBConfig.model_validate({"rerank": {"url": "http://h/rerank", "enabled": False}}).rerank.configured
    for bad in ({"api": "tei"}, {"url": "ftp://h"}, {"url": "http://h", "api": "openai"}, {"urll": "http://h"}):
        with pytest.raises(ValidationError):
            KBConfig.model_validate({"rerank": bad})
    with pytest.raises(Exception, match="not a local CrossEncoder folder"):
        open_reranker(RerankConfig(model="/no/such/folder"))


class _ByLength:
    """A rerank provider of this test: the longer document first."""

    def __init__(self, config: RerankConfig) -> None:
        self.config, self.name = config, "by-length"

    def scores(self, query: str, documents: list[str]) -> list[float]:
        return [float(len(d)) for d in documents]

    def close(self) -> None:
        pass


def test_a_rerank_provider_is_one_row_and_one_class(monkeypatch):
    from corpus_pipeline.retrieval.rerank import providers

    with pytest.raises(ValueError, match="by-length"):
        RerankConfig(url="http://h/rerank", api="by-length")
    row = providers.RerankProvider("by-length", True, f"{__name__}:_ByLength")
    monkeypatch.setitem(providers.PROVIDERS, "by-length", row)
    config = RerankConfig(url="http://h/rerank", api="by-length")
    reranker = open_reranker(config)
    assert isinstance(reranker, _ByLength) and reranker.config is config
    order, scores, outcome = rerank_order(reranker, "q", ["a", "ccc", "bb"])
    assert scores == [1.0, 3.0, 2.0]
    assert order == [1, 2, 0] and outcome.status == "reranked" and outcome.model == "by-length"
