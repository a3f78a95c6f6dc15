"""Per-KB assets: the documents of a KB, their parsed blocks, their image descriptions."""

import pyarrow as pa
from dagster import AssetExecutionContext, DataVersion, MetadataValue, Output, asset

from assets.partitions import kb_partitions
from corpus_pipeline import freshness, indexing
from resources import CorpusResource


@asset(partitions_def=kb_partitions, group_name="parsing", code_version="1")
def documents(context: AssetExecutionContext, corpus: CorpusResource) -> Output[pa.Table]:
    """One row per file of the KB: doc_id, path, format, size, content hash, resolved plan."""
    table = indexing.discover_documents(corpus.kb(context.partition_key))
    refused = [r for r in table.to_pylist() if r["error"]]
    return Output(
        table,
        data_version=DataVersion(indexing.table_fingerprint(table, ["path", "content_hash", "plan", "error"])),
        metadata={
            "documents": len(table),
            "refused": len(refused),
            "formats": MetadataValue.json(_counts(table, "format")),
        },
    )


@asset(partitions_def=kb_partitions, group_name="parsing", code_version="1")
def parsed_blocks(context: AssetExecutionContext, corpus: CorpusResource, documents: pa.Table) -> Output[dict]:
    """Each document parsed into ordered blocks, with its canonical text; failures recorded.
    Documents unchanged since the last run (same content hash) are not parsed again."""
    kb = context.partition_key
    parsed, stats = indexing.parse_documents(
        corpus.kb(kb), documents, corpus.previous("parsed_blocks", kb), images_dir=corpus.layout.images
    )
    return Output(
        parsed,
        data_version=DataVersion(
            indexing.table_fingerprint(parsed["texts"], ["doc_id", "content_hash", "status", "parser_version"])
        ),
        metadata={
            "parsed": stats.parsed,
            "reused": stats.reused,
            "failed": len(stats.failed),
            "failed_documents": MetadataValue.json(stats.failed),
            "blocks": len(parsed["blocks"]),
            "block_types": MetadataValue.json(_counts(parsed["blocks"], "block_type")),
            "images": len(parsed["images"]),
        },
    )


@asset(partitions_def=kb_partitions, group_name="parsing", code_version="1", pool="vision")
def image_descriptions(context: AssetExecutionContext, corpus: CorpusResource, parsed_blocks: dict) -> pa.Table:
    """A description per image (vision model; OCR fallback marked degraded; skipped ones
    say why), cached by image hash. Vision calls share the ``vision`` concurrency pool.
    The last step of parsing: it records the KB's parse fingerprint (what is now parsed)."""
    kb = corpus.kb(context.partition_key)
    table, stats = indexing.describe_kb_images(kb, parsed_blocks, corpus.layout.cache)
    context.add_output_metadata({"images": stats.images, "by_status": MetadataValue.json(stats.by_status)})
    freshness.record_parsed(corpus.layout, kb.name, freshness.parse_fingerprint(kb, parsed_blocks["texts"]))
    return table


def _counts(table: pa.Table, column: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in table.column(column).to_pylist():
        out[str(v)] = out.get(str(v), 0) + 1
    return out
