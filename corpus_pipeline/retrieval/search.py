"""Hybrid search over one (kb, strategy_version) LanceDB table.

Two channels over child chunks: vector (cosine over the embedding model's vectors) and
keyword (the table's ICU full-text index, which segments Chinese and English), each
taking its top ``channel_k``; fused by reciprocal rank fusion (k = 60, seed 003).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corpus_pipeline.embedding import load_embedder
from corpus_pipeline.store.lance import open_search_table

RRF_K = 60


@dataclass
class SearchHit:
    chunk_id: str
    parent_id: str
    score: float
    text: str
    doc_path: str
    section_path: str
    start_offset: int
    end_offset: int
    channels: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "chunk_id": self.chunk_id, "parent_id": self.parent_id, "score": round(self.score, 6),
            "text": self.text, "doc_path": self.doc_path, "section_path": self.section_path,
            "start_offset": self.start_offset, "end_offset": self.end_offset, "channels": self.channels,
        }


_COLS = ["chunk_id", "parent_id", "text", "doc_path", "section_path", "start_offset", "end_offset"]


def search(db_path: Path, kb: str, version: str, query: str, *, model: str, top_k: int = 5, channel_k: int = 8) -> list[SearchHit]:
    tbl = open_search_table(db_path, kb, version)
    vec = load_embedder(model).embed([query])[0]
    vector_rows = tbl.search(vec.tolist(), vector_column_name="vector").distance_type("cosine").select([*_COLS, "_distance"]).limit(channel_k).to_list()
    try:
        keyword_rows = tbl.search(query, query_type="fts", fts_columns="text").select([*_COLS, "_score"]).limit(channel_k).to_list()
    except Exception:  # no FTS index (empty table) or a query the tokenizer rejects
        keyword_rows = []
    hits: dict[str, SearchHit] = {}
    for channel, rows in (("vector", vector_rows), ("keyword", keyword_rows)):
        for rank, r in enumerate(rows, start=1):
            h = hits.get(r["chunk_id"])
            if h is None:
                h = hits[r["chunk_id"]] = SearchHit(
                    r["chunk_id"], r["parent_id"], 0.0, r["text"], r["doc_path"], r["section_path"] or "",
                    r["start_offset"], r["end_offset"],
                )
            raw = 1.0 - float(r["_distance"]) if channel == "vector" else float(r.get("_score", 0.0))
            h.channels[channel] = {"rank": rank, "score": round(raw, 6)}
            h.score += 1.0 / (RRF_K + rank)
    return sorted(hits.values(), key=lambda h: -h.score)[:top_k]
