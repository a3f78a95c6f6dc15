"""What ``corpus serve`` answers, as models: ``/openapi.json`` describes every answer.

The models name and type the fields an application reads; the library's answers (the JSON
of ``corpus search --json`` and ``corpus lineage --json``) carry more, which passes through
unchanged (``extra="allow"``), so the server and the CLI answer the same JSON.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Open(BaseModel):
    """A model whose other fields pass through as the library wrote them."""

    model_config = ConfigDict(extra="allow")


# ------------------------------------------------------------------------------------------ requests


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


# ------------------------------------------------------------------------------------------ answers


class Health(BaseModel):
    status: str
    kbs: int = Field(description="knowledge bases found under the server's home")
    auth: bool = Field(description="whether requests need a key")


class KBSummary(BaseModel):
    kb: str
    active_version: str | None


class VersionRow(_Open):
    strategy_version: str
    active: bool
    built: bool


class Hit(_Open):
    """A child chunk that matched, inside its result's parent."""

    chunk_id: str
    score: float
    relevance: float
    chunk_type: str
    text: str = Field(description="the chunk's text (a preview)")
    start_offset: int
    end_offset: int


class Result(_Open):
    """A parent block returned, with the children that found it."""

    parent_id: str
    score: float
    relevance: float = Field(description="0 to 1, comparable across queries (what score thresholds mean)")
    text: str
    evidence: str = Field(description="what an application should put in its prompt")
    doc_path: str
    doc_title: str = Field("", description="the document's title: front matter, first heading or file name")
    section_path: str
    start_offset: int
    end_offset: int
    hits: list[Hit]


class SearchResponse(_Open):
    kb: str
    strategy_version: str
    query: str
    results: list[Result]
    warnings: list[str]


class Lineage(_Open):
    """Where a chunk comes from (the JSON of ``corpus lineage --json``)."""

    chunk_id: str
    kb: str
    strategy_version: str
    active: bool
    chunk: dict[str, Any]
    parent: dict[str, Any] | None
    blocks: list[dict[str, Any]]
    document: dict[str, Any]
    plan: dict[str, Any]
    run: dict[str, Any] | None
    notes: list[str]


class DifyMetadata(BaseModel):
    kb: str
    strategy_version: str
    doc_path: str
    section_path: str
    parent_id: str
    start_offset: int
    end_offset: int
    chunk_ids: list[str]


class DifyRecord(BaseModel):
    content: str
    score: float
    title: str
    metadata: DifyMetadata


class DifyResponse(BaseModel):
    records: list[DifyRecord]


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorBody(BaseModel):
    """Every error but ``/retrieval``'s."""

    error: ErrorDetail


class DifyErrorBody(BaseModel):
    """``/retrieval``'s errors, in Dify's shape."""

    error_code: int
    error_msg: str


def errors(*statuses: int, dify: bool = False) -> dict[int | str, dict[str, Any]]:
    """The error answers of a route, for its OpenAPI description."""
    model = DifyErrorBody if dify else ErrorBody
    return {s: {"model": model} for s in statuses}
