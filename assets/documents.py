"""Per-KB assets: the documents of a KB, their parsed blocks, their image descriptions."""

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from dagster import (
    AssetExecutionContext,
    DataVersion,
    DynamicOut,
    DynamicOutput,
    In,
    MetadataValue,
    OpExecutionContext,
    Out,
    Output,
    asset,
    graph_asset,
    op,
)

from assets.conventions import BATCH_IO, BATCH_RETRY, OWNERS, PARQUET
from assets.partitions import kb_partitions
from corpus_pipeline import freshness, indexing
from corpus_pipeline.indexing import batches
from corpus_pipeline.indexing.parse import PARSED_TABLES
from corpus_pipeline.indexing.stats import StageResult
from corpus_pipeline.models import Document, ExtractedImage, ImageDescription
from corpus_pipeline.progress import Throttled, logging_progress
from corpus_pipeline.store.parquet import PartitionWriter
from resources import CorpusResource
from resources.batch_io import STAGED_LAZILY, StagedBatch, remove_staging
from resources.io_manager import READ, partition_folder


def progress_log(context: AssetExecutionContext | OpExecutionContext) -> Throttled:
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


@op(out=DynamicOut(io_manager_key=BATCH_IO))
def parse_plan(
    context: OpExecutionContext, corpus: CorpusResource, documents: pa.Table
) -> Iterator[DynamicOutput[list[Document]]]:
    """The documents to parse (new or changed since this partition's last run), cut into
    batches (``indexing.batches``): one step each."""
    kb = corpus.kb(context.partition_key)
    previous = indexing.previous_parse_state(corpus.layout.partition_dir("parsed_blocks", kb.name))
    todo = indexing.documents_to_parse(kb, documents, previous)
    parts = batches.split(todo, corpus.batch_workers, corpus.batch_rule("parse")) or [[]]
    context.log.info(f"{len(todo)} of {documents.num_rows} document(s) to parse, in {len(parts)} batch(es)")
    for i, part in enumerate(parts):
        yield DynamicOutput(part, mapping_key=f"b{i}")


@op(out=Out(io_manager_key=BATCH_IO), retry_policy=BATCH_RETRY)
def parse_batch(context: OpExecutionContext, corpus: CorpusResource, batch: list[Document]) -> dict[str, pa.Table]:
    """One batch of documents parsed (each in a worker process under the KB's limits), as
    the partition's rows; a failure of the step is retried for this batch alone."""
    kb = corpus.kb(context.partition_key)
    parsed = indexing.parse_batch(kb, batch, images_dir=corpus.layout.images, progress=progress_log(context))
    return indexing.parsed_rows(batch, parsed)


_PARSE_KEYS = ["doc_id", "content_hash", "status", "parser_version"]


@op(ins={"parts": In(metadata={STAGED_LAZILY: True})})
def parse_merge(
    context: OpExecutionContext, corpus: CorpusResource, documents: pa.Table, parts: list[StagedBatch]
) -> Output[StageResult]:
    """Every document in table order: parsed by a batch, or carried over unchanged. Streamed
    (``indexing.ParseMerge``): a group of documents' rows at a time, from the previous
    partition's files (the kept documents' only) and the staged batches (each read when its
    documents are due), into the partition's files (``PartitionWriter``, which the IO
    manager switches to) and the data version: no copy of the partition is held."""
    kb = corpus.kb(context.partition_key)
    previous = corpus.previous_datasets("parsed_blocks", kb.name, names=list(PARSED_TABLES))
    merge = indexing.ParseMerge(kb, documents, previous, [part.load for part in parts])
    writer = PartitionWriter(partition_folder(corpus.layout, "parsed_blocks", context.partition_key))
    keys: list[pa.Table] = []  # (the texts' key columns, one short row per document: the data version's)
    for group in merge.groups():
        for name, table in group.items():
            writer.add(table, name)
        keys.append(group["texts"].select(_PARSE_KEYS))
    remove_staging(corpus.home, context.run_id, "parsed_blocks")
    result = StageResult(writer, merge.stats)
    return Output(
        result,
        data_version=DataVersion(indexing.table_fingerprint(pa.concat_tables(keys), _PARSE_KEYS)),
        metadata=_metadata(result, merge.stats.documents),
    )


@graph_asset(partitions_def=kb_partitions, group_name="parsing", code_version="2", kinds=PARQUET, owners=OWNERS)
def parsed_blocks(documents: pa.Table) -> Any:
    """Each document parsed into ordered blocks, with its canonical text; failures recorded.
    Documents unchanged since the last run (same content hash) are not parsed again; the
    others are parsed in batches, one step each, that an executor runs in parallel."""
    return parse_merge(documents, parse_plan(documents).map(parse_batch).collect())


# What the description steps read of parsed_blocks: the images, and the documents' ids and
# hashes (the parse fingerprint), not every document's text and blocks.
_IMAGES_ONLY = In(metadata={READ: {"images": None, "texts": ["doc_id", "path", "content_hash"]}})


@op(out=DynamicOut(io_manager_key=BATCH_IO), ins={"parsed_blocks": _IMAGES_ONLY})
def describe_plan(
    context: OpExecutionContext, corpus: CorpusResource, parsed_blocks: dict[str, pa.Table]
) -> Iterator[DynamicOutput[list[ExtractedImage]]]:
    """The images that need the vision model or OCR (not cached, not skipped), one per
    image hash, cut into batches (``indexing.batches``): one step each."""
    kb = corpus.kb(context.partition_key)
    todo = indexing.images_to_describe(kb, parsed_blocks, corpus.layout.cache)
    parts = batches.split(todo, corpus.batch_workers, corpus.batch_rule("describe")) or [[]]
    total = parsed_blocks["images"].num_rows
    context.log.info(f"{len(todo)} of {total} image(s) to describe, in {len(parts)} batch(es)")
    for i, part in enumerate(parts):
        yield DynamicOutput(part, mapping_key=f"b{i}")


@op(out=Out(io_manager_key=BATCH_IO), retry_policy=BATCH_RETRY, pool="vision")
def describe_batch(
    context: OpExecutionContext, corpus: CorpusResource, images: list[ExtractedImage]
) -> list[ImageDescription]:
    """One batch of images described (vision calls share the ``vision`` pool; answers are
    cached as they come); a failure of the step is retried for this batch alone."""
    kb = corpus.kb(context.partition_key)
    return indexing.describe_batch(kb, images, corpus.layout.cache, progress=progress_log(context))


@op(ins={"parsed_blocks": _IMAGES_ONLY})
def describe_merge(
    context: OpExecutionContext,
    corpus: CorpusResource,
    parsed_blocks: dict[str, pa.Table],
    parts: list[list[ImageDescription]],
) -> Output[StageResult]:
    """A description per image row, in table order: from a batch, else the cache (or the
    reason it is skipped). Records the KB's parse fingerprint (what is now parsed)."""
    kb = corpus.kb(context.partition_key)
    result = indexing.merge_descriptions(kb, parsed_blocks, corpus.layout.cache, parts)
    remove_staging(corpus.home, context.run_id, "image_descriptions")
    freshness.record_parsed(corpus.layout, kb.name, freshness.parse_fingerprint(kb, parsed_blocks["texts"]))
    return Output(result, metadata=_metadata(result, result.table.num_rows))


@graph_asset(partitions_def=kb_partitions, group_name="parsing", code_version="2", kinds=PARQUET, owners=OWNERS)
def image_descriptions(parsed_blocks: dict[str, pa.Table]) -> Any:
    """A description per image (vision model; OCR fallback marked degraded; skipped ones
    say why), cached by image hash; the images not cached are described in batches, one
    step each. The last step of parsing: it records the KB's parse fingerprint."""
    return describe_merge(parsed_blocks, describe_plan(parsed_blocks).map(describe_batch).collect())
