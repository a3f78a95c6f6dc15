"""Pandas preparation of the partition frames the GX suites validate.

GX compares columns; some rules need values computed across tables first: the source
span of each chunk in its document's canonical text, each chunk's parent span, the size
bound of each row's plan, the number of chunks per document, vector sizes and norms.
These functions add them as ``_``-prefixed columns (``NaN`` / ``None`` where a rule does
not apply to the row, which GX then skips) and never decide pass or fail themselves.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from corpus_pipeline.quality.bounds import TableThresholds

EXEMPT_TYPES = frozenset({"IMAGE", "TABLE_IMAGE"})  # image descriptions: derived text, no source span


def to_frame(table: pa.Table | pd.DataFrame, columns: list[str] | None = None) -> pd.DataFrame:
    if isinstance(table, pd.DataFrame):
        df = table.reset_index(drop=True)
        return df[columns].copy() if columns else df.copy()
    if columns:
        table = table.select([c for c in columns if c in table.column_names])
    return table.to_pandas(types_mapper=None).reset_index(drop=True)


def canonical_texts(texts: pa.Table | pd.DataFrame | Mapping[str, str]) -> dict[str, str]:
    """doc_id -> canonical text of every successfully parsed document."""
    if isinstance(texts, Mapping):
        return dict(texts)
    df = to_frame(texts, ["doc_id", "status", "text"])
    if "status" in df.columns:
        df = df[df["status"].fillna("OK") == "OK"]
    return {str(d): (t or "") for d, t in zip(df["doc_id"], df["text"])}


def document_frame(texts: pa.Table | pd.DataFrame) -> pd.DataFrame:
    """One row per parsed document with text: doc_id, path."""
    df = to_frame(texts)
    if "status" in df.columns:
        df = df[df["status"].fillna("OK") == "OK"]
    has_text = df["text"].fillna("").astype(str).str.strip().str.len() > 0
    out = df.loc[has_text, ["doc_id"] + (["path"] if "path" in df.columns else [])].reset_index(drop=True)
    if "path" not in out.columns:
        out["path"] = None
    return out


def _exempt(df: pd.DataFrame) -> pd.Series:
    derived = df["derived"].fillna(False).astype(bool) if "derived" in df.columns else pd.Series(False, index=df.index)
    if "chunk_type" in df.columns:
        derived = derived | df["chunk_type"].isin(EXEMPT_TYPES)
    return derived


def add_span_columns(df: pd.DataFrame, texts: Mapping[str, str]) -> pd.DataFrame:
    """``_doc_len`` (NaN: document unknown), ``_len`` (len of text), ``_source_span``
    (canonical_text[start:end] for rows that keep source text, else None), ``_span_start``
    / ``_span_end`` (the offsets of those rows, else NaN)."""
    doc_len = df["doc_id"].map(lambda d: len(texts[d]) if d in texts else np.nan).astype(float)
    exempt = _exempt(df)
    spans: list[Any] = []
    for doc, s, e, ex in zip(df["doc_id"], df["start_offset"], df["end_offset"], exempt):
        t = texts.get(doc)
        if ex or t is None or pd.isna(s) or pd.isna(e):
            spans.append(None)
        else:
            spans.append(t[int(s) : int(e)])
    out = df.assign(
        _doc_len=doc_len,
        _len=df["text"].fillna("").astype(str).str.len().astype(float),
        _source_span=pd.Series(spans, index=df.index, dtype=object),
        _span_start=df["start_offset"].astype(float).where(~exempt),
        _span_end=df["end_offset"].astype(float).where(~exempt),
    )
    return out


def add_limit_columns(df: pd.DataFrame, th: TableThresholds, token_slack: int, *, minimum: bool) -> pd.DataFrame:
    """Per-row bounds from the row's plan: ``_max_chars``, ``_max_tokens`` (bound + the
    re-tokenization slack), and with ``minimum`` ``_min_chars`` / ``_min_tokens``. Derived
    and image rows get NaN (exempt); for the minimum, so does each parent's last chunk."""
    paths = df["doc_path"] if "doc_path" in df.columns else pd.Series([None] * len(df), index=df.index)
    limits = [th.limits_for(p) for p in paths]
    exempt = _exempt(df)

    def col(values: list[Any], mask: pd.Series) -> pd.Series:
        s = pd.Series([np.nan if v is None else float(v) for v in values], index=df.index, dtype=float)
        return s.where(~mask)

    out = df.assign(
        _max_chars=col([lim.max_chars for lim in limits], exempt),
        _max_tokens=col([None if lim.max_tokens is None else lim.max_tokens + token_slack for lim in limits], exempt),
    )
    if minimum:
        last = pd.Series(False, index=df.index)
        if "parent_id" in df.columns and "chunk_index" in df.columns and len(df):
            # The last text chunk of each parent: the remainder of its split (image chunks
            # placed after it do not count).
            kept = df.loc[~exempt]
            last_idx = kept.groupby("parent_id", dropna=False)["chunk_index"].max()
            last = (~exempt) & (df["chunk_index"] == df["parent_id"].map(last_idx))
        mask = exempt | last
        out = out.assign(
            _min_chars=col([lim.min_chars or None for lim in limits], mask),
            _min_tokens=col([lim.min_tokens or None for lim in limits], mask),
        )
    return out


def add_parent_columns(children: pd.DataFrame, parents: pd.DataFrame) -> pd.DataFrame:
    """``_parent_doc`` / ``_parent_start`` / ``_parent_end`` of each chunk's parent (None /
    NaN when the parent id is unknown)."""
    p = parents.drop_duplicates("parent_id").set_index("parent_id")
    pid = children["parent_id"]
    return children.assign(
        _parent_doc=pid.map(p["doc_id"]).astype(object),
        _parent_start=pid.map(p["start_offset"]).astype(float),
        _parent_end=pid.map(p["end_offset"]).astype(float),
    )


def add_coverage_column(docs: pd.DataFrame, table: pd.DataFrame, column: str = "_count") -> pd.DataFrame:
    counts = table.groupby("doc_id").size() if len(table) else pd.Series(dtype=int)
    return docs.assign(**{column: docs["doc_id"].map(counts).fillna(0).astype(int)})


def vector_columns(vectors: pa.ChunkedArray | pa.Array) -> pd.DataFrame:
    """Per row: ``_dim`` (NaN for a null vector), ``_nonfinite`` (NaN/inf values) and
    ``_norm`` (L2 norm over the finite values)."""
    arr = vectors.combine_chunks() if isinstance(vectors, pa.ChunkedArray) else vectors
    n = len(arr)
    valid = ~np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_fixed_size_list(arr.type):
        lengths = np.full(n, arr.type.list_size, dtype=float)
    else:
        lengths = np.asarray(pc.list_value_length(arr).to_numpy(zero_copy_only=False), dtype=float)
    dims = np.where(valid, lengths, np.nan)
    nonfinite = np.zeros(n, dtype=float)
    norms = np.full(n, np.nan)
    if pa.types.is_fixed_size_list(arr.type) and arr.offset == 0 and n:
        d = arr.type.list_size
        m = np.asarray(arr.values.slice(0, n * d).to_numpy(zero_copy_only=False), dtype=np.float64).reshape(n, d)
        finite = np.isfinite(m)
        nonfinite = (~finite).sum(axis=1).astype(float)
        norms = np.linalg.norm(np.where(finite, m, 0.0), axis=1)
        return pd.DataFrame(
            {"_dim": dims, "_nonfinite": np.where(valid, nonfinite, np.nan), "_norm": np.where(valid, norms, np.nan)}
        )
    for i in range(n):
        if not valid[i]:
            continue
        v = np.asarray(arr[i].values.to_numpy(zero_copy_only=False), dtype=np.float64)
        finite = np.isfinite(v)
        nonfinite[i] = float((~finite).sum())
        norms[i] = float(np.linalg.norm(v[finite])) if finite.any() else 0.0
    return pd.DataFrame({"_dim": dims, "_nonfinite": np.where(valid, nonfinite, np.nan), "_norm": norms})
