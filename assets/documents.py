"""Per-KB assets: the documents of a KB, their parsed blocks, their image descriptions."""


import pyarrow as pa
from dagster import AssetExecutionContext, MetadataValue, asset

from assets.partitions import kb_partitions
from corpus_pipeline import indexing
from resources import CorpusResource


@asset(partitions_def=kb_partitions, group_name="parsing", code_version="1")
def documents(context: AssetExecutionContext, corpus: CorpusResource) -> pa.Table:
    """One row per file of the KB: doc_id, path, format, size, content hash, resolved plan."""
    table = indexing.discover_documents(corpus.kb(context.partition_key))
    refused = [r for r in table.to_pylist() if r["error"]]
    context.add_output_metadata(
        {"documents": len(table), "refused": len(refused), "formats": MetadataValue.json(_counts(table, "format"))}
    )
    return table


@asset(partitions_def=kb_partitions, group_name="parsing", code_version="1")
def parsed_blocks(context: AssetExecutionContext, corpus: CorpusResource, documents: pa.Table) -> dict[str, pa.Table]:
    """Each document parsed into ordered blocks, with its canonical text; failures recorded."""
    parsed, stats = indexing.parse_documents(corpus.kb(context.partition_key), documents)
    context.add_output_metadata(
        {
            "parsed": stats.parsed,
            "failed": len(stats.failed),
            "failed_documents": MetadataValue.json(stats.failed),
            "blocks": len(parsed["blocks"]),
            "block_types": MetadataValue.json(_counts(parsed["blocks"], "block_type")),
            "images": len(parsed["images"]),
        }
    )
    return parsed


@asset(partitions_def=kb_partitions, group_name="parsing", code_version="1")
def image_descriptions(context: AssetExecutionContext, parsed_blocks: dict[str, pa.Table]) -> pa.Table:
    """A description per image block (vision model, OCR fallback); skipped ones say why."""
    from corpus_pipeline.store import schemas

    table = pa.Table.from_pylist([], schema=schemas.IMAGE_DESCRIPTIONS)
    context.add_output_metadata({"images": len(parsed_blocks["images"]), "described": 0})
    return table


def _counts(table: pa.Table, column: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in table.column(column).to_pylist():
        out[str(v)] = out.get(str(v), 0) + 1
    return out
