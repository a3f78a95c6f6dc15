"""Connecting to the warehouse's LanceDB and opening, listing and dropping search tables."""

from __future__ import annotations

import contextlib
import os
from typing import Any

from corpus_pipeline.errors import StoreError
from corpus_pipeline.store.layout import Layout, search_table_name

os.environ.setdefault("LANCE_LOG", "error")


def index_name(column: str) -> str:
    """LanceDB's default name for the index on ``column`` (the name every index here has)."""
    return f"{column}_idx"


def storage_options(layout: Layout) -> dict[str, str]:
    """LanceDB's object-store options for the warehouse: credentials, region and endpoint
    come from the usual environment (``AWS_*``, ``GOOGLE_*``, ``AZURE_*``); an ``http://``
    endpoint (MinIO, a local S3 server) needs ``allow_http``."""
    if not layout.remote:
        return {}
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or ""
    opts = {"aws_endpoint": endpoint} if endpoint else {}
    if endpoint.startswith("http://"):
        opts["allow_http"] = "true"
    return opts


def connect(layout: Layout) -> Any:
    """The LanceDB database of a CORPUS_HOME's warehouse, local or on an object store
    (created if missing)."""
    import lancedb

    if not layout.remote:
        layout.lancedb.mkdir(parents=True, exist_ok=True)
    return lancedb.connect(str(layout.lancedb), storage_options=storage_options(layout) or None)


def list_table_names(db: Any) -> list[str]:
    names: list[str] = []
    token = None
    while True:
        resp = db.list_tables(page_token=token) if token else db.list_tables()
        names.extend(resp.tables)
        token = resp.page_token
        if not token:
            return names


def open_search_table(layout: Layout, kb: str, version: str) -> Any:
    db = connect(layout)
    name = search_table_name(kb, version)
    if name not in list_table_names(db):
        raise StoreError(
            f"no search table for kb={kb!r} strategy_version={version!r}; run `corpus index --kb {kb}` first"
        )
    return db.open_table(name)


def drop_search_table(layout: Layout, kb: str, version: str) -> None:
    if not layout.lancedb.is_dir():
        return
    db = connect(layout)
    with contextlib.suppress(ValueError, FileNotFoundError):
        db.drop_table(search_table_name(kb, version))
