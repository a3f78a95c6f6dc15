"""A hand-made search table (four chunks, three parents, Chinese and English) and a fake
embedder for it: the search tests' fixture ``index`` (conftest.py) and ``_searcher``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from corpus_pipeline.retrieval import Searcher, SearchSettings
from corpus_pipeline.store.lance import write_search_table
from corpus_pipeline.store.layout import Layout

DOC = "运维手册.md"
# (chunk_id, parent_id, text, start, vector)
CHUNKS = [
    ("c1", "P1", "CPU 使用率持续 5 分钟超过 85% 时触发告警。", 0, [1.0, 0.0, 0.0, 0.0]),
    ("c2", "P1", "先用 top 命令定位进程，再用 jstack 导出线程栈。", 30, [0.9, 0.436, 0.0, 0.0]),
    ("c3", "P2", "磁盘使用率超过 90% 为严重告警，30 分钟内响应。", 100, [0.0, 1.0, 0.0, 0.0]),
    ("c4", "P3", "The web console listens on port 8443.", 200, [0.0, 0.0, 1.0, 0.0]),
]
PARENTS = [("P1", 0, 90), ("P2", 90, 190), ("P3", 190, 260)]


class FakeEmbedder:
    model_name = "fake"
    dimension = 4

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def embed(self, texts):
        return np.asarray([self.vectors.get(t, [0.0, 0.0, 0.0, 1.0]) for t in texts], dtype=np.float32)

    embed_queries = embed


def build_index(tmp_path: Path) -> tuple[Path, Path]:
    rows = []
    for i, (cid, pid, text, start, _) in enumerate(CHUNKS):
        rows.append(
            {
                "chunk_id": cid,
                "parent_id": pid,
                "chunk_index": i,
                "chunk_type": "TEXT",
                "kb": "ops",
                "strategy_version": "v1",
                "doc_id": "d1",
                "doc_path": DOC,
                "text": text,
                "start_offset": start,
                "end_offset": start + len(text),
                "char_count": len(text),
                "token_count": 10,
                "section_path": "排查",
                "page_num": None,
                "block_index": i,
                "strategy": "RECURSIVE",
                "metadata": "{}",
            }
        )
    vectors = np.asarray([c[4] for c in CHUNKS], dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    db = Layout(tmp_path)
    write_search_table(db, "ops", "v1", pa.Table.from_pylist(rows), vectors)
    parents = tmp_path / "parents.parquet"
    pq.write_table(
        pa.Table.from_pylist(
            [
                {
                    "parent_id": pid,
                    "text": f"<{pid} " + "·" * (e - s - len(pid) - 3) + ">",
                    "doc_path": DOC,
                    "section_path": "排查",
                    "start_offset": s,
                    "end_offset": e,
                    "overlap_chars": 0,
                }
                for pid, s, e in PARENTS
            ]
        ),
        parents,
    )
    return db, parents


def _searcher(index, queries, **settings) -> Searcher:
    db, parents = index
    return Searcher(
        db,
        "ops",
        "v1",
        embedding="fake",
        settings=SearchSettings(**settings),
        parents_file=parents,
        embedder=FakeEmbedder(queries),
    )
