"""Per KB × strategy version: parent blocks, child chunks, embeddings, the search table."""


import pyarrow as pa
from dagster import AssetExecutionContext, AssetIn, MaterializeResult, MetadataValue, asset

from assets.partitions import by_kb, kb_version_partitions, split_key
from corpus_pipeline import indexing
from resources import CorpusResource


@asset(
    partitions_def=kb_version_partitions,
    group_name="chunking",
    code_version="1",
    ins={"parsed_blocks": AssetIn(partition_mapping=by_kb)},
)
def parent_blocks(context: AssetExecutionContext, corpus: CorpusResource, parsed_blocks: dict[str, pa.Table]) -> pa.Table:
    """The parent pipeline of each document's plan: the context units search returns."""
    kb_name, version = split_key(context.partition_key)
    kb = corpus.kb_at_version(kb_name, version)
    table, stats = indexing.build_parent_blocks(kb, version, parsed_blocks)
    context.add_output_metadata({"parent_blocks": stats.rows, "documents": stats.documents, "plan": kb.plan.snapshot()})
    return table


@asset(
    partitions_def=kb_version_partitions,
    group_name="chunking",
    code_version="1",
    ins={"parsed_blocks": AssetIn(partition_mapping=by_kb), "image_descriptions": AssetIn(partition_mapping=by_kb)},
)
def child_chunks(
    context: AssetExecutionContext,
    corpus: CorpusResource,
    parent_blocks: pa.Table,
    parsed_blocks: dict[str, pa.Table],
    image_descriptions: pa.Table,
) -> pa.Table:
    """The child pipeline over each parent, plus image chunks, in reading order."""
    kb_name, version = split_key(context.partition_key)
    kb = corpus.kb_at_version(kb_name, version)
    table, stats = indexing.build_child_chunks(kb, version, parent_blocks, parsed_blocks)
    chars = table.column("char_count").to_pylist()
    context.add_output_metadata(
        {
            "child_chunks": stats.rows,
            "documents": stats.documents,
            "max_chars": max(chars) if chars else 0,
            "max_tokens": max(table.column("token_count").to_pylist() or [0]),
        }
    )
    return table


@asset(partitions_def=kb_version_partitions, group_name="embedding", code_version="1")
def chunk_embeddings(context: AssetExecutionContext, corpus: CorpusResource, child_chunks: pa.Table) -> pa.Table:
    """One vector per child chunk; text already embedded by this model is reused."""
    kb_name, version = split_key(context.partition_key)
    emb = corpus.kb_at_version(kb_name, version).config.embedding
    table, stats = indexing.embed_chunks(child_chunks, emb.model, batch_size=emb.batch_size, cache=corpus.embedding_cache())
    context.add_output_metadata(
        {"model": emb.model, "dimension": stats.dimension, "embedded": stats.embedded, "reused": stats.reused}
    )
    return table


@asset(
    partitions_def=kb_version_partitions,
    group_name="embedding",
    code_version="1",
    ins={"child_chunks": AssetIn(), "chunk_embeddings": AssetIn()},
)
def search_index(
    context: AssetExecutionContext, corpus: CorpusResource, child_chunks: pa.Table, chunk_embeddings: pa.Table
) -> MaterializeResult:
    """The LanceDB table of this partition: chunks, vectors and a full-text index."""
    kb_name, version = split_key(context.partition_key)
    rows = indexing.write_search_index(corpus.layout.lancedb, kb_name, version, child_chunks, chunk_embeddings)
    return MaterializeResult(
        metadata={"rows": rows, "table": f"chunks__{kb_name}__{version}", "lancedb": MetadataValue.path(str(corpus.layout.lancedb))}
    )
