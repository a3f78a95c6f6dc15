"""The tables of one partition as the checks read them: pandas frames with the values that
rules compare computed once (``_``-prefixed columns).

    p = Partition(key, thresholds, parents=..., children=..., texts=..., embeddings=...)
    p.parents / p.children   rows with _doc_len, _len, _blank, _source_match, _exempt, the row's plan
                             limits (_max_chars, _max_tokens; children: _min_*), children
                             also _parent_doc/_parent_start/_parent_end/_parent_own_start, _last
    p.documents              the parsed documents with text (doc_id, path) and their counts
    p.embeddings             chunk_id, text_hash, _dim, _nonfinite, _norm, _child_text_hash

``NaN`` / ``None`` where a rule does not apply to a row (an image chunk has no source span).
Nothing here decides pass or fail: the checks (``quality.checks``) do.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import Any, cast

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from corpus_pipeline.models import IMAGE_CHUNK_TYPES
from corpus_pipeline.quality.thresholds import TableThresholds, Thresholds

Table = pa.Table | pd.DataFrame
ROW = "_row"


def to_frame(table: Table | None, columns: list[str] | None = None) -> pd.DataFrame:
    if table is None:
        return pd.DataFrame(columns=columns or [])
    if isinstance(table, pd.DataFrame):
        df = table.reset_index(drop=True)
        return df[[c for c in columns if c in df.columns]].copy() if columns else df.copy()
    if columns:
        table = table.select([c for c in columns if c in table.column_names])
    return table.to_pandas().reset_index(drop=True)


def _take(column: pd.Series, at: np.ndarray, missing: Any) -> np.ndarray:
    """``column``'s values at rows ``at`` (``missing`` where ``at`` is -1): floats for a
    number (``missing`` NaN), objects otherwise."""
    values = column.to_numpy(dtype=object if missing is None else float, na_value=missing)
    out = values[np.maximum(at, 0)] if len(values) else np.full(len(at), missing, dtype=values.dtype)
    out[at < 0] = missing
    return out


class Partition:
    """One partition's tables, prepared for the checks."""

    def __init__(
        self,
        key: str,
        thresholds: Thresholds,
        *,
        parents: Table | None = None,
        children: Table | None = None,
        texts: Table | Mapping[str, str] | None = None,
        embeddings: pa.Table | None = None,
        seen: Mapping[str, set[str]] | None = None,
    ) -> None:
        self.key = key
        self._seen = seen or {}
        self.th = thresholds
        self._parents = parents
        self._children = children
        self._texts = texts
        self._embeddings = embeddings

    def seen(self, id_column: str) -> set[str]:
        """The ``id_column`` values of the partition's groups of documents checked before
        this one (``quality.run.CheckRun``; empty for a partition checked whole)."""
        return self._seen.get(id_column, set())

    # ------------------------------------------------------------------ documents

    @cached_property
    def canonical(self) -> dict[str, str]:
        """doc_id -> canonical text of every successfully parsed document."""
        texts = self._texts
        if texts is None:
            return {}
        if isinstance(texts, Mapping):
            return {str(k): v for k, v in texts.items()}
        df = to_frame(texts, ["doc_id", "status", "text"])
        if "status" in df.columns:
            df = df[df["status"].fillna("OK") == "OK"]
        return {str(d): (t or "") for d, t in zip(df["doc_id"], df["text"], strict=True)}

    @cached_property
    def documents(self) -> pd.DataFrame:
        """One row per parsed document with text: doc_id, path."""
        texts = self._texts
        if isinstance(texts, Mapping) or texts is None:
            docs = pd.DataFrame({"doc_id": list(self.canonical), "path": [None] * len(self.canonical)})
        else:
            df = to_frame(texts)
            if "status" in df.columns:
                df = df[df["status"].fillna("OK") == "OK"]
            if "path" not in df.columns:
                df = df.assign(path=None)
            docs = df[["doc_id", "path"]]
        has_text = docs["doc_id"].map(lambda d: bool((self.canonical.get(d) or "").strip()))
        return docs[has_text.astype(bool)].reset_index(drop=True).assign(**{ROW: lambda d: range(len(d))})

    # ------------------------------------------------------------------ chunk tables

    def _spans(self, df: pd.DataFrame) -> pd.DataFrame:
        texts = self.canonical
        exempt = (
            df["derived"].fillna(False).astype(bool) if "derived" in df.columns else pd.Series(False, index=df.index)
        )
        if "chunk_type" in df.columns:
            exempt = exempt | df["chunk_type"].isin(IMAGE_CHUNK_TYPES)
        # Whether the row's text is its span of the canonical text (None: exempt, or no span
        # to compare with): compared row by row, not kept as a second copy of every text; the
        # text's length and blankness in the same pass (pandas' .str methods took ~1 s each
        # at 256k chunks).
        match: list[Any] = []
        lengths_of_text: list[int] = []
        blank: list[bool] = []
        starts = df["start_offset"].to_numpy(dtype=float, na_value=np.nan).tolist()  # (plain values: a
        ends = df["end_offset"].to_numpy(dtype=float, na_value=np.nan).tolist()  # pyarrow-backed column
        docs = df["doc_id"].tolist()  # iterates ~10x slower)
        for doc, s, e, ex, text in zip(docs, starts, ends, exempt.tolist(), df["text"].tolist(), strict=True):
            value = text if isinstance(text, str) else ""
            lengths_of_text.append(len(value))
            blank.append(not value.strip())
            t = texts.get(doc)
            match.append(None if ex or t is None or s != s or e != e else text == t[int(s) : int(e)])  # (NaN != NaN)
        lengths = {d: len(t) for d, t in texts.items()}
        return df.assign(
            _doc_len=df["doc_id"].map(lengths).astype(float),
            _len=pd.Series(lengths_of_text, index=df.index, dtype="int64"),
            _blank=pd.Series(blank, index=df.index, dtype=bool),
            _source_match=pd.Series(match, index=df.index, dtype=object),
            _exempt=exempt,
        )

    def _limits(self, df: pd.DataFrame, tt: TableThresholds, *, minimum: bool) -> pd.DataFrame:
        paths = df["doc_path"] if "doc_path" in df.columns else pd.Series([None] * len(df), index=df.index)
        limits = [tt.limits_for(p) for p in paths]
        exempt = df["_exempt"]
        slack = self.th.token_slack

        def col(values: list[Any], mask: pd.Series) -> pd.Series:
            s = pd.Series([np.nan if v is None else float(v) for v in values], index=df.index, dtype=float)
            return s.where(~mask)

        out = df.assign(
            _max_chars=col([lim.max_chars for lim in limits], exempt),
            _max_tokens=col([None if lim.max_tokens is None else lim.max_tokens + slack for lim in limits], exempt),
        )
        if minimum:
            # The last text chunk of each parent is the remainder of its split: it may be small
            # (image chunks placed after it do not count).
            last = pd.Series(False, index=df.index)
            if "parent_id" in df.columns and len(df):
                kept = df.loc[~exempt, ["parent_id", "chunk_index"]]  # (two columns: not a copy of every text)
                last_index = kept.groupby("parent_id", dropna=False)["chunk_index"].transform("max")
                last = (~exempt) & (df["chunk_index"] == last_index.reindex(df.index))
            mask = exempt | last
            out = out.assign(
                _min_chars=col([lim.min_chars or None for lim in limits], mask),
                _min_tokens=col([lim.min_tokens or None for lim in limits], mask),
                _last=last,
            )
        return out

    @cached_property
    def parents(self) -> pd.DataFrame:
        df = self._spans(to_frame(self._parents))
        df = self._limits(df, self.th.parent, minimum=False)
        return df.assign(**{ROW: range(len(df))})

    @cached_property
    def children(self) -> pd.DataFrame:
        df = self._spans(to_frame(self._children))
        df = self._limits(df, self.th.child, minimum=True)
        p = to_frame(self._parents, ["parent_id", "doc_id", "start_offset", "end_offset", "overlap_chars", "derived"])
        p = p.drop_duplicates("parent_id").set_index("parent_id")
        own = p["start_offset"] + np.where(p["derived"].fillna(False).astype(bool), 0, p["overlap_chars"].fillna(0))
        at = p.index.get_indexer(pd.Index(df["parent_id"]))  # (each child's parent row, -1 for none: looked up once)
        df = df.assign(
            _parent_doc=_take(p["doc_id"], at, None),
            _parent_start=_take(p["start_offset"], at, np.nan),
            _parent_own_start=_take(own, at, np.nan),
            _parent_end=_take(p["end_offset"], at, np.nan),
        )
        return df.assign(**{ROW: range(len(df))})

    @cached_property
    def embeddings(self) -> pd.DataFrame:
        emb = self._embeddings
        if emb is None:
            return pd.DataFrame(columns=["chunk_id", "text_hash", "_dim", "_nonfinite", "_norm", "_child_text_hash"])
        df = emb.select(["chunk_id", "text_hash"]).to_pandas().reset_index(drop=True)
        df = pd.concat([df, vector_columns(emb.column("vector"))], axis=1)
        kids = to_frame(self._children, ["chunk_id", "text_hash"]).drop_duplicates("chunk_id").set_index("chunk_id")
        df = df.assign(_child_text_hash=df["chunk_id"].map(kids["text_hash"]).astype(object))
        return df.assign(**{ROW: range(len(df))})

    @cached_property
    def child_count(self) -> int:
        return 0 if self._children is None else len(self._children)


#: Vectors checked at a time (in float64): bounds the check's memory, not the table's size.
VECTOR_BLOCK_ROWS = 4096


def vector_columns(vectors: Any) -> pd.DataFrame:
    """Per row: ``_dim`` (NaN for a null vector), ``_nonfinite`` (NaN/inf values) and
    ``_norm`` (L2 norm over the finite values). A chunked column is checked chunk by chunk:
    ``combine_chunks`` would copy every vector (394 MB at 256k chunks of 384 floats)."""
    if isinstance(vectors, pa.ChunkedArray):
        if vectors.num_chunks == 0:
            return _vector_columns(pa.array([], vectors.type))
        frames = [_vector_columns(chunk) for chunk in vectors.chunks]
        return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    return _vector_columns(vectors)


def _vector_columns(arr: Any) -> pd.DataFrame:
    n = len(arr)
    valid = ~np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_fixed_size_list(arr.type):
        lengths = np.full(n, arr.type.list_size, dtype=float)
    else:
        lengths = np.asarray(pc.list_value_length(arr).to_numpy(zero_copy_only=False), dtype=float)
    dims = np.where(valid, lengths, np.nan)
    nonfinite = np.zeros(n, dtype=float)
    norms = np.full(n, np.nan)
    if pa.types.is_fixed_size_list(arr.type) and n:
        d = arr.type.list_size  # (``values`` ignores a slice's offset: a null's slots are still there)
        flat = np.asarray(cast(Any, arr).values.slice(arr.offset * d, n * d).to_numpy(zero_copy_only=False)).reshape(
            n, d
        )
        for start in range(0, n, VECTOR_BLOCK_ROWS):  # (in float64 a block at a time: not a copy of them all)
            m = flat[start : start + VECTOR_BLOCK_ROWS].astype(np.float64)
            finite = np.isfinite(m)
            nonfinite[start : start + len(m)] = (~finite).sum(axis=1)
            norms[start : start + len(m)] = np.linalg.norm(np.where(finite, m, 0.0), axis=1)
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
