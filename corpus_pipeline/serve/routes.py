"""The JSON API's routes (the page's are in ``serve.web``): module-level routers.

    GET  /healthz                  liveness, the KBs found (no key)
    GET  /readyz                   readiness: 503 while the models load and while stopping (no key)
    GET  /kbs                      the knowledge bases and their active versions
    GET  /kbs/{kb}/versions        every version (active, current, built, counts)
    POST /search                   {query, kb, top_k?, filters?, version?} -> the JSON of `corpus search --json`
    GET  /chunks/{chunk_id}        a chunk's lineage (`corpus lineage --json`)
    POST /retrieval                Dify's external knowledge base API (knowledge_id = a KB name)

Each route is the library call and nothing else: the guard (``serve.deps``), the KB
lookup, and the errors (``serve.errors.HttpError``, and ``ERROR_TABLE`` for the library's
own) are shared. A route's answer is a model of ``serve.schemas``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response

from corpus_pipeline.api import KB
from corpus_pipeline.errors import ConfigError, CorpusError, StoreError
from corpus_pipeline.secrets import mask
from corpus_pipeline.serve.deps import GUARDED, kb_of_path, open_kb, rate_limited, server
from corpus_pipeline.serve.errors import HttpError
from corpus_pipeline.serve.schemas import (
    DifyRequest,
    DifyResponse,
    Health,
    KBSummary,
    Lineage,
    SearchRequest,
    SearchResponse,
    VersionRow,
    errors,
)

public = APIRouter(dependencies=[Depends(rate_limited)])
api = APIRouter(dependencies=GUARDED, responses=errors(401, 403, 413, 429, 500))


@public.get("/healthz", summary="liveness", response_model=Health)
def healthz(request: Request) -> dict[str, Any]:
    s = server(request)
    return {"status": "ok", "kbs": len(s.registry.names()), "auth": s.auth_required}


@public.get(
    "/readyz",
    summary="readiness: 200 once the KBs' models and tables are loaded, 503 while starting or stopping",
    response_model=Health,
    responses={503: {"model": Health}},
)
def readyz(request: Request, response: Response) -> dict[str, Any]:
    from corpus_pipeline.serve.deps import STOPPING

    s = server(request)
    status = "stopping" if STOPPING.is_set() else "ready" if s.ready.is_set() else "starting"
    if status != "ready":
        response.status_code = 503
    return {"status": status, "kbs": len(s.registry.names()), "auth": s.auth_required}


@api.get("/kbs", summary="knowledge bases and their active versions", response_model=list[KBSummary])
def kbs(request: Request) -> list[dict[str, Any]]:
    from corpus_pipeline.store.versions import active_version

    s = server(request)
    return [{"kb": n, "active_version": active_version(s.layout, n)} for n in s.registry.names()]


@api.get(
    "/kbs/{kb}/versions",
    summary="every version of a knowledge base",
    response_model=list[VersionRow],
    responses=errors(404, 409),
)
def versions(handle: Annotated[KB, Depends(kb_of_path)]) -> list[dict[str, Any]]:
    return handle.versions()


@api.post(
    "/search",
    summary="hybrid search; the JSON of `corpus search --json`",
    response_model=SearchResponse,
    responses=errors(404, 409, 422, 502),
)
def search(req: SearchRequest, request: Request) -> dict[str, Any]:
    handle = open_kb(request, req.kb)
    try:
        result = handle.search(req.query, top_k=req.top_k, filters=req.filters, version=req.version)
    except (ConfigError, ValueError) as exc:
        raise HttpError(422, "invalid_request", mask(str(exc))[:1000]) from None
    except StoreError as exc:
        raise HttpError(409, "not_indexed", mask(str(exc))[:1000]) from None
    return result.to_dict()


@api.get("/chunks/{chunk_id}", summary="a chunk's lineage", response_model=Lineage, responses=errors(404))
def chunk(chunk_id: str, request: Request) -> dict[str, Any]:
    from corpus_pipeline.lineage import trace_chunk

    try:
        return trace_chunk(server(request).layout, chunk_id)
    except CorpusError as exc:
        raise HttpError(404, "chunk_not_found", mask(str(exc))[:1000]) from None


@api.post(
    "/retrieval",
    summary="Dify external knowledge base API",
    response_model=DifyResponse,
    responses=errors(401, 403, 404, 413, 422, 429, 500, dify=True),
)
def retrieval(req: DifyRequest, request: Request) -> dict[str, Any]:
    registry = server(request).registry
    if req.knowledge_id not in registry.names():
        raise HttpError(404, "kb_not_found", f"The knowledge does not exist: {req.knowledge_id!r}", dify_code=2001)
    handle = registry.get(req.knowledge_id)
    setting = req.retrieval_setting
    try:
        result = handle.search(req.query, top_k=setting.top_k)
    except StoreError as exc:
        raise HttpError(
            404, "not_indexed", f"The knowledge is not indexed yet: {mask(str(exc))[:300]}", dify_code=2001
        ) from None
    records = []
    for r in result.results:
        score = float(r.relevance)  # in [0, 1]: what score_threshold means (retrieval.relevance)
        if score < setting.score_threshold:
            continue
        records.append(
            {
                "content": r.evidence or r.text,
                "score": round(score, 6),
                "title": r.doc_title or r.doc_path,  # (front matter, first heading or file name)
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
