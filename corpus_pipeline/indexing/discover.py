"""Stage 1, discover: the documents of a KB (the ``documents`` asset)."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa

from corpus_pipeline.indexing.stats import DiscoverStats, StageResult
from corpus_pipeline.kbconfig import KnowledgeBase
from corpus_pipeline.models import Document
from corpus_pipeline.parsing.discovery import MAX_SKIPPED_LISTED, discover_all
from corpus_pipeline.store import schemas


def discover_documents(kb: KnowledgeBase) -> StageResult:
    """One row per supported file of the KB: id, path, format, size, content hash, plan;
    files refused before parsing carry their error; what was skipped, and why, is in the stats."""
    docs, skipped = discover_all(kb)
    stats = DiscoverStats(
        documents=len(docs),
        refused=sum(1 for d in docs if d.error),
        formats=dict(sorted(Counter(d.format for d in docs).items())),
        skipped=skipped[:MAX_SKIPPED_LISTED],
        skipped_count=len(skipped),
    )
    return StageResult(schemas.to_table(docs, Document), stats)


def documents_of(table: pa.Table) -> list[Document]:
    return schemas.from_table(table, Document)
