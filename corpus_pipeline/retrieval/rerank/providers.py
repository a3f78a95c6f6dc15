"""The rerank providers: one row each here, one module each for its class.

    provider        remote  class                                  what it talks to
    cohere          yes     rerank.http.CohereReranker             Cohere's API (Jina, vLLM, Infinity, LocalAI)
    tei             yes     rerank.http.TEIReranker                text-embeddings-inference's /rerank
    cross-encoder   no      rerank.local.cross_encoder             a CrossEncoder folder on this machine

kb.yaml's ``rerank.api`` names a remote row (with ``rerank.url``); ``rerank.model`` alone
means the local one. A row's class is imported only when a KB's reranker is opened. Adding a
provider: one module with a class taking a ``RerankConfig`` (an endpoint subclasses
``rerank.http.HTTPReranker`` and says its body and its rows), one row here, and its test
against a local HTTP server (``tests/retrieval/test_rerank.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass


@dataclass(frozen=True)
class RerankProvider:
    name: str
    remote: bool
    #: ``module:callable`` taking a ``RerankConfig``
    opens: str


PROVIDERS: dict[str, RerankProvider] = {
    p.name: p
    for p in (
        RerankProvider("cohere", True, "corpus_pipeline.retrieval.rerank.http:CohereReranker"),
        RerankProvider("tei", True, "corpus_pipeline.retrieval.rerank.http:TEIReranker"),
        RerankProvider("cross-encoder", False, "corpus_pipeline.retrieval.rerank.local:cross_encoder"),
    )
}
LOCAL = "cross-encoder"


def remote_names() -> list[str]:
    """What ``rerank.api`` may name."""
    return [p.name for p in PROVIDERS.values() if p.remote]
