"""Stage 5, embed: one vector per child chunk (the ``chunk_embeddings`` asset); text this
model embedded before (any KB, any version, any run) comes from the vector cache."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from corpus_pipeline.embedding import EmbeddingCache, EmbeddingConfig, embed_with_cache, open_embedder
from corpus_pipeline.indexing.stats import EmbedStats, StageResult
from corpus_pipeline.store import schemas


def embed_chunks(children: pa.Table, config: EmbeddingConfig, *, cache: EmbeddingCache | None) -> StageResult:
    """One passage vector per child; ``model`` is the name the vectors are cached under."""
    texts = [str(t) for t in children.column("text").to_pylist()]
    model = config.vector_key
    vecs, embedded, reused = embed_with_cache(texts, lambda: open_embedder(config), cache, model_name=model)
    dim = int(vecs.shape[1])
    flat = pa.array(vecs.reshape(-1), type=pa.float32())
    table = pa.table(
        {
            "chunk_id": children.column("chunk_id").combine_chunks(),
            "model": pa.array([model] * len(texts), pa.string()),
            "text_hash": children.column("text_hash").combine_chunks(),
            "vector": pa.FixedSizeListArray.from_arrays(flat, dim),
        },
        schema=schemas.embeddings_schema(dim),
    )
    return StageResult(table, EmbedStats(model=model, embedded=embedded, reused=reused, dimension=dim))


def vectors_of(embeddings: pa.Table) -> np.ndarray:
    """The vectors of an embeddings table as a float32 matrix, in row order."""
    col: Any = embeddings.column("vector").combine_chunks()
    dim = col.type.list_size
    return np.asarray(col.flatten().to_numpy(zero_copy_only=False), dtype=np.float32).reshape(-1, dim)
