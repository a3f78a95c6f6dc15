"""Distributions of the chunk tables, computed with DuckDB over Arrow tables or Parquet.

    table_stats(source)            count, documents, counts by chunk_type, derived,
                                   min/p5/p50/p95/max/mean of char_count and token_count
    histogram(source, column)      equal-width bins of a column (JSON-friendly)
    histogram_markdown(...)        the same as a markdown table, for Dagster metadata
    partition_stats(layout, kb, v) one KB version's stats from its published snapshot
    versions_with_data(layout, kb) the versions of a KB whose snapshot has child_chunks

Quantiles are observed values: the one at position ``floor(q * (n - 1))`` of the sorted
column, as pandas' ``interpolation="lower"`` that the quality suites use, so the numbers
here and in the checks agree.
"""

from __future__ import annotations

import math
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.dataset as pads

from corpus_pipeline.errors import CorpusError, StoreError
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.reader import SnapshotReader
from corpus_pipeline.store.snapshots import Snapshot, SnapshotNotFound, read_published, resolve
from corpus_pipeline.store.versions import active_version, version_info

QUANTILES = {"p5": 0.05, "p50": 0.5, "p95": 0.95}
#: What the stats report (by asset name) and the table of the snapshot it comes from.
CHUNK_TABLES = {"child_chunks": "children", "parent_blocks": "parents"}

#: A table in memory, or a partition's table as a (lazy) pyarrow dataset.
Source = pa.Table | pads.Dataset


def _relation(con: duckdb.DuckDBPyConnection, source: Source) -> str:
    con.register("src", source)
    return "src"


def _columns(con: duckdb.DuckDBPyConnection, rel: str) -> set[str]:
    return {r[0] for r in con.execute(f"describe select * from {rel}").fetchall()}


def _summary(con: duckdb.DuckDBPyConnection, rel: str, col: str) -> dict[str, Any]:
    # The value at position floor(q * (n - 1)) of the sorted column: pandas'
    # interpolation="lower", which the GX suites use (DuckDB's quantile_disc is nearest-rank).
    picks = ", ".join(f"list_extract(s, cast(floor({q} * (n - 1)) as bigint) + 1)" for q in QUANTILES.values())
    row = con.execute(
        f"select lo, {picks}, hi, mean from (select min({col}) lo, max({col}) hi, avg({col}) mean, "
        f"count({col}) n, list_sort(list({col})) s from {rel})"
    ).fetchone()
    if row is None or row[0] is None:
        return {"min": None, **dict.fromkeys(QUANTILES), "max": None, "mean": None}
    lo, *quant, hi, mean = row
    return {
        "min": int(lo),
        **{q: int(v) for q, v in zip(QUANTILES, quant, strict=True)},
        "max": int(hi),
        "mean": round(float(mean), 1),
    }


def _row(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[Any, ...]:
    """The one row an aggregate query returns."""
    row = con.execute(sql).fetchone()
    if row is None:  # (an aggregate always returns a row)
        raise RuntimeError(f"no row from {sql}")
    return tuple(row)


def table_stats(source: Source, *, token_limit: int | None = None) -> dict[str, Any]:
    """Stats of one chunk table (child_chunks or parent_blocks) partition."""
    con = duckdb.connect()
    try:
        rel = _relation(con, source)
        cols = _columns(con, rel)
        count, docs = _row(con, f"select count(*), count(distinct doc_id) from {rel}")
        out: dict[str, Any] = {"count": int(count), "documents": int(docs)}
        if "chunk_type" in cols:
            rows = con.execute(f"select chunk_type, count(*) from {rel} group by 1 order by 2 desc, 1").fetchall()
            out["by_chunk_type"] = {str(k): int(v) for k, v in rows}
        if "derived" in cols:
            out["derived"] = int(_row(con, f"select count(*) from {rel} where derived")[0])
        for col in ("char_count", "token_count"):
            if col in cols:
                out[col] = _summary(con, rel, col)
        if token_limit is not None and "token_count" in cols:
            out["token_limit"] = token_limit
            out["over_token_limit"] = int(
                _row(con, f"select count(*) from {rel} where token_count > {int(token_limit)}")[0]
            )
        return out
    finally:
        con.close()


def _nice_width(span: float, bins: int) -> int:
    raw = max(1.0, span / max(1, bins))
    mag = float(10 ** math.floor(math.log10(raw)))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return max(1, math.ceil(m * mag))
    return math.ceil(raw)


def histogram(
    source: Source, column: str = "token_count", *, bins: int = 10, limit: int | None = None
) -> dict[str, Any]:
    """Equal-width bins from 0 over ``column``: ``{"column", "width", "bins": [{lo, hi, count}]}``
    (``hi`` exclusive). With ``limit``, the bin edges include it so bars above it are exact."""
    con = duckdb.connect()
    try:
        rel = _relation(con, source)
        top = _row(con, f"select max({column}) from {rel}")[0]
        if top is None:
            return {"column": column, "width": 0, "bins": []}
        width = _nice_width(max(float(top), float(limit or 0)) + 1, bins)
        rows = dict(
            con.execute(
                f"select cast(floor({column} / {width}) as bigint) b, count(*) from {rel} group by 1"
            ).fetchall()
        )
        n = int(top) // width + 1
        out = [{"lo": i * width, "hi": (i + 1) * width, "count": int(rows.get(i, 0))} for i in range(n)]
        return {"column": column, "width": width, "bins": out}
    finally:
        con.close()


def histogram_markdown(source: Source, column: str = "token_count", *, bins: int = 10, limit: int | None = None) -> str:
    """The histogram as a markdown table with bars; bins past ``limit`` are flagged."""
    h = histogram(source, column, bins=bins, limit=limit)
    if not h["bins"]:
        return f"no rows: no {column} histogram"
    peak = max(b["count"] for b in h["bins"]) or 1
    lines = [f"| {column} | chunks | |", "|---:|---:|:---|"]
    for b in h["bins"]:
        bar = "█" * max(1 if b["count"] else 0, round(30 * b["count"] / peak))
        flag = " ⚠ over the model's limit" if limit is not None and b["hi"] - 1 > limit and b["count"] else ""
        lines.append(f"| {b['lo']}–{b['hi'] - 1} | {b['count']} | {bar}{flag} |")
    if limit is not None:
        lines.append(f"\nmodel token limit: {limit}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- on disk


def versions_with_data(layout: Layout, kb: str) -> list[str]:
    """Versions of ``kb`` whose published snapshot holds child chunks, oldest written first."""
    found = []
    for v in layout.versions_with_partition("child_chunks", kb):
        try:
            snap = resolve(layout, kb, v)
        except SnapshotNotFound:
            continue
        read = SnapshotReader(snap)
        if read.has("children"):
            found.append((str(read.written("children").get("written_at") or ""), v))
    return [v for _, v in sorted(found)]


def _token_limit(registered: dict[str, Any]) -> int | None:
    """The token limit of the model a version was registered with (None if unknown)."""
    from corpus_pipeline.embedding.settings import EmbeddingConfig
    from corpus_pipeline.embedding.tokens import token_counter_for

    section = (registered.get("config") or {}).get("embedding")
    model = (registered.get("inputs") or {}).get("embedding_model")
    if section is None and not model:
        return None
    try:
        config = EmbeddingConfig.model_validate(section) if section is not None else EmbeddingConfig(model=model)
        return token_counter_for(config).max_tokens
    except (CorpusError, ValueError):
        return None


def partition_stats(layout: Layout, kb: str, version: str, *, bins: int = 10) -> dict[str, Any]:
    """Stats of one KB version from its published snapshot's Parquet files (DuckDB over them)."""
    try:
        return read_published(layout, kb, version, lambda snap: _snapshot_stats(snap, bins))
    except SnapshotNotFound:
        return _snapshot_stats(None, bins, layout, kb, version)


def _snapshot_stats(
    snap: Snapshot | None, bins: int, layout: Layout | None = None, kb: str = "", version: str = ""
) -> dict[str, Any]:
    if snap is None or not SnapshotReader(snap).has("children"):
        layout = snap.layout if snap is not None else layout
        kb, version = (snap.kb, snap.version) if snap is not None else (kb, version)
        assert layout is not None
        known = versions_with_data(layout, kb)
        raise StoreError(
            f"no child_chunks for knowledge base {kb!r} at strategy_version {version!r}; "
            f"versions with data: {', '.join(known) or 'none'} (run `corpus index --kb {kb}`)."
        )
    layout, kb, version = snap.layout, snap.kb, snap.version
    info = version_info(layout, kb, version)
    inputs = info.get("inputs") or {}
    model = inputs.get("embedding_model")
    limit = _token_limit(info)
    read = SnapshotReader(snap)
    manifest = read.written("children")
    out: dict[str, Any] = {
        "kb": kb,
        "strategy_version": version,
        "active": active_version(layout, kb) == version,
        "plan": (inputs.get("plan") or {}).get("snapshot"),
        "embedding_model": model,
        "written_at": manifest.get("written_at"),
        "run_id": manifest.get("run_id"),
    }
    for asset, table in CHUNK_TABLES.items():
        if read.has(table):
            source = read.dataset(table)
            stats = table_stats(source, token_limit=limit if asset == "child_chunks" else None)
            if asset == "child_chunks" and stats["count"]:
                stats["histogram"] = histogram(source, "token_count", bins=bins, limit=limit)
            out[asset] = stats
        else:
            out[asset] = {"count": 0, "missing": True}
    if read.has("embeddings"):
        con = duckdb.connect()
        try:
            rel = _relation(con, read.dataset("embeddings"))
            n, dim = _row(con, f"select count(*), max(len(vector)) from {rel}")
            out["chunk_embeddings"] = {"count": int(n), "dimension": int(dim) if dim is not None else None}
        finally:
            con.close()
    return out


def compare(stats: list[dict[str, Any]]) -> dict[str, Any]:
    """Differences of the last version against the first (counts and quantiles)."""
    if len(stats) < 2:
        return {}
    a, b = stats[0], stats[-1]
    delta: dict[str, Any] = {"from": a["strategy_version"], "to": b["strategy_version"]}
    for asset in CHUNK_TABLES:
        sa, sb = a.get(asset) or {}, b.get(asset) or {}
        d: dict[str, Any] = {"count": (sb.get("count") or 0) - (sa.get("count") or 0)}
        for col in ("char_count", "token_count"):
            ca, cb = sa.get(col) or {}, sb.get(col) or {}
            d[col] = {
                k: cb[k] - ca[k]
                for k in ("min", "p5", "p50", "p95", "max")
                if ca.get(k) is not None and cb.get(k) is not None
            }
        delta[asset] = d
    return delta
