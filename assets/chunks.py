"""Per KB × strategy version: parent blocks, child chunks, embeddings, the search table."""

import pyarrow as pa
from dagster import AssetExecutionContext, AssetIn, DataVersion, MaterializeResult, MetadataValue, Output, asset

from assets.checks import CHECK_SPECS, distribution_metadata, run_checks
from assets.partitions import by_kb, kb_version_partitions, split_key
from corpus_pipeline import freshness, indexing, versioning
from corpus_pipeline.tokens import token_counter_for
from resources import CorpusResource, LLMResource


def _llm_metadata(stats: indexing.ChunkStats) -> dict:
    """What LLM steps cost in this run (cached answers cost nothing)."""
    return {
        "fallbacks": stats.fallbacks,
        "llm_calls": stats.llm_calls,
        "llm_errors": stats.llm_errors,
        "llm_cache_hits": stats.llm_cache_hits,
        "llm_prompt_tokens": stats.llm_prompt_tokens,
        "llm_completion_tokens": stats.llm_completion_tokens,
    }


@asset(
    partitions_def=kb_version_partitions,
    group_name="chunking",
    code_version="1",
    ins={"parsed_blocks": AssetIn(partition_mapping=by_kb)},
    check_specs=CHECK_SPECS["parent_blocks"],
    pool="llm",
)
def parent_blocks(
    context: AssetExecutionContext, corpus: CorpusResource, llm: LLMResource, parsed_blocks: dict
) -> Output[pa.Table]:
    """The parent pipeline of each document's plan: the context units search returns.
    Documents unchanged since this partition's last run keep their parents."""
    kb_name, version = split_key(context.partition_key)
    kb = corpus.kb_at_version(kb_name, version)
    previous = corpus.previous("parent_blocks", kb_name, version)
    table, stats = indexing.build_parent_blocks(
        kb, version, parsed_blocks, previous, llm_defaults=llm.defaults(), cache_dir=corpus.layout.cache
    )
    yield Output(
        table,
        data_version=DataVersion(indexing.table_fingerprint(table, ["parent_id"])),
        metadata={
            "parent_blocks": stats.rows,
            "documents_chunked": stats.documents,
            "documents_reused": stats.reused,
            "plan": "auto" if kb.auto else kb.plan.snapshot(),
            **_llm_metadata(stats),
            **distribution_metadata(table, kb),
        },
    )
    yield from run_checks("parent_blocks", kb, parents=table, texts=parsed_blocks["texts"])


@asset(
    partitions_def=kb_version_partitions,
    group_name="chunking",
    code_version="1",
    ins={"parsed_blocks": AssetIn(partition_mapping=by_kb), "image_descriptions": AssetIn(partition_mapping=by_kb)},
    check_specs=CHECK_SPECS["child_chunks"],
    pool="llm",
)
def child_chunks(
    context: AssetExecutionContext,
    corpus: CorpusResource,
    llm: LLMResource,
    parent_blocks: pa.Table,
    parsed_blocks: dict,
    image_descriptions: pa.Table,
) -> Output[pa.Table]:
    """The child pipeline over each parent, plus image chunks, in reading order.
    Documents whose parents and images are unchanged keep their children."""
    kb_name, version = split_key(context.partition_key)
    kb = corpus.kb_at_version(kb_name, version)
    previous = corpus.previous("child_chunks", kb_name, version)
    images = indexing.image_pieces_by_doc(
        image_descriptions, parsed_blocks, token_counter_for(kb.config.embedding.model)
    )
    table, stats = indexing.build_child_chunks(
        kb,
        version,
        parent_blocks,
        parsed_blocks,
        images,
        previous=previous,
        llm_defaults=llm.defaults(),
        cache_dir=corpus.layout.cache,
    )
    chars = table.column("char_count").to_pylist()
    yield Output(
        table,
        data_version=DataVersion(indexing.table_fingerprint(table, ["chunk_id"])),
        metadata={
            "child_chunks": stats.rows,
            "documents_chunked": stats.documents,
            "documents_reused": stats.reused,
            "image_chunks": sum(1 for t in table.column("chunk_type").to_pylist() if t in ("IMAGE", "TABLE_IMAGE")),
            "max_chars": max(chars) if chars else 0,
            "max_tokens": max(table.column("token_count").to_pylist() or [0]),
            **_llm_metadata(stats),
            **distribution_metadata(table, kb),
        },
    )
    yield from run_checks("child_chunks", kb, children=table, parents=parent_blocks, texts=parsed_blocks["texts"])


@asset(
    partitions_def=kb_version_partitions,
    group_name="embedding",
    code_version="1",
    check_specs=CHECK_SPECS["chunk_embeddings"],
)
def chunk_embeddings(
    context: AssetExecutionContext, corpus: CorpusResource, child_chunks: pa.Table
) -> Output[pa.Table]:
    """One vector per child chunk; text already embedded by this model is reused."""
    kb_name, version = split_key(context.partition_key)
    kb = corpus.kb_at_version(kb_name, version)
    emb = kb.config.embedding
    table, stats = indexing.embed_chunks(
        child_chunks, emb.model, batch_size=emb.batch_size, cache=corpus.embedding_cache()
    )
    yield Output(
        table,
        data_version=DataVersion(indexing.table_fingerprint(table, ["chunk_id", "text_hash", "model"])),
        metadata={"model": emb.model, "dimension": stats.dimension, "embedded": stats.embedded, "reused": stats.reused},
    )
    yield from run_checks("chunk_embeddings", kb, embeddings=table, children=child_chunks)


@asset(
    partitions_def=kb_version_partitions,
    group_name="embedding",
    code_version="1",
    ins={"child_chunks": AssetIn(), "chunk_embeddings": AssetIn()},
)
def search_index(
    context: AssetExecutionContext, corpus: CorpusResource, child_chunks: pa.Table, chunk_embeddings: pa.Table
) -> MaterializeResult:
    """The LanceDB table of this partition: chunks, vectors and a full-text index.

    Runs only when the blocking checks upstream passed; then, if this is the KB's current
    version, it becomes the active one (what search reads) and versions beyond the
    retention count are retired, Parquet and LanceDB alike."""
    kb_name, version = split_key(context.partition_key)
    layout = corpus.layout
    rows = indexing.write_search_index(layout.lancedb, kb_name, version, child_chunks, chunk_embeddings)
    freshness.record_indexed(layout, kb_name, version)
    current = corpus.kb(kb_name)
    activated = versioning.strategy_version(current) == version
    retired: list[str] = []
    if activated:
        versioning.set_active(layout.versions, kb_name, version)
        for old in versioning.versions_to_retire(layout.versions, kb_name, current.config.retention.keep_versions):
            versioning.retire_version(layout.warehouse, layout.versions, kb_name, old)
            retired.append(old)
        _forget_unused_versions(context, layout, retired)
    return MaterializeResult(
        metadata={
            "rows": rows,
            "table": f"chunks__{kb_name}__{version}",
            "lancedb": MetadataValue.path(str(layout.lancedb)),
            "activated": activated,
            "retired_versions": MetadataValue.json(retired),
        }
    )


def _forget_unused_versions(context: AssetExecutionContext, layout, retired: list[str]) -> None:
    """Drop retired strategy_version partition keys that no KB uses any more."""
    in_use = {v for kb in layout.list_kbs() for v in versioning.known_versions(layout.versions, kb)}
    for v in retired:
        if v not in in_use and context.instance.has_dynamic_partition("strategy_version", v):
            context.instance.delete_dynamic_partition("strategy_version", v)
