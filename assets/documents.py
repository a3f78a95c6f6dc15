"""Per-KB assets: the documents of a KB, their parsed blocks, their image descriptions."""

from typing import Any

import pyarrow as pa
from dagster import AssetExecutionContext, DataVersion, MetadataValue, Output, asset

from assets.conventions import OWNERS, PARQUET
from assets.partitions import kb_partitions
from corpus_pipeline import freshness, indexing
from corpus_pipeline.indexing.stats import StageResult
from corpus_pipeline.progress import Throttled, logging_progress
from resources import CorpusResource


def progress_log(context: AssetExecutionContext) -> Throttled:
    """A stage's progress as log lines of the run (one a second, and the last): they show
    in the Dagster UI, and ``corpus index`` reads them back to draw its bars."""
    return logging_progress(context.log.info)


def _metadata(result: StageResult, rows: int) -> dict[str, Any]:
    meta: dict[str, Any] = {"dagster/row_count": MetadataValue.int(rows)}
    for k, v in result.stats.metadata().items():
        meta[k] = MetadataValue.json(v) if isinstance(v, (list, dict)) else v
    return meta


@asset(partitions_def=kb_partitions, group_name="parsing", code_version="1", kinds=PARQUET, owners=OWNERS)
def documents(context: AssetExecutionContext, corpus: CorpusResource) -> Output[StageResult]:
    """One row per file of the KB: doc_id, path, format, size, content hash, resolved plan."""
    result = indexing.discover_documents(corpus.kb(context.partition_key))
    table = result.table
    return Output(
        result,
        data_version=DataVersion(indexing.table_fingerprint(table, ["path", "content_hash", "plan", "error"])),
        metadata=_metadata(result, table.num_rows),
    )


@asset(partitions_def=kb_partitions, group_name="parsing", code_version="1", kinds=PARQUET, owners=OWNERS)
def parsed_blocks(context: AssetExecutionContext, corpus: CorpusResource, documents: pa.Table) -> Output[StageResult]:
    """Each document parsed into ordered blocks, with its canonical text; failures recorded.
    Documents unchanged since the last run (same content hash) are not parsed again."""
    kb = context.partition_key
    result = indexing.parse_documents(
        corpus.kb(kb), documents, corpus.previous("parsed_blocks", kb), images_dir=corpus.layout.images,
        progress=progress_log(context),
    )  # fmt: skip
    texts = result.named("texts")
    fingerprint = indexing.table_fingerprint(texts, ["doc_id", "content_hash", "status", "parser_version"])
    return Output(result, data_version=DataVersion(fingerprint), metadata=_metadata(result, texts.num_rows))


@asset(
    partitions_def=kb_partitions, group_name="parsing", code_version="1", kinds=PARQUET, owners=OWNERS, pool="vision"
)
def image_descriptions(
    context: AssetExecutionContext, corpus: CorpusResource, parsed_blocks: dict[str, pa.Table]
) -> Output[StageResult]:
    """A description per image (vision model; OCR fallback marked degraded; skipped ones
    say why), cached by image hash. Vision calls share the ``vision`` concurrency pool.
    The last step of parsing: it records the KB's parse fingerprint (what is now parsed)."""
    kb = corpus.kb(context.partition_key)
    result = indexing.describe_kb_images(kb, parsed_blocks, corpus.layout.cache, progress=progress_log(context))
    freshness.record_parsed(corpus.layout, kb.name, freshness.parse_fingerprint(kb, parsed_blocks["texts"]))
    return Output(result, metadata=_metadata(result, result.table.num_rows))
