"""Per KB × strategy version: parent blocks, child chunks, embeddings, the search table.

Each asset is one library call (``corpus_pipeline.indexing``) on the KB as its version was
registered, then its quality checks (``assets.checks``), whose outcomes travel with the
output into the partition's manifest and into Dagster as asset check results.
"""

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads
from dagster import (
    AssetCheckResult,
    AssetExecutionContext,
    AssetIn,
    DataVersion,
    DynamicOut,
    DynamicOutput,
    In,
    MaterializeResult,
    MetadataValue,
    OpExecutionContext,
    Out,
    Output,
    asset,
    graph_asset,
    op,
)

from assets.checks import CHECK_SPECS, check_results, distribution_metadata, grouped_outcomes
from assets.conventions import BATCH_IO, BATCH_RETRY, LANCEDB, OWNERS, PARQUET
from assets.documents import progress_log
from assets.partitions import by_kb, kb_version_partitions, split_key
from corpus_pipeline import indexing
from corpus_pipeline.indexing import batches
from corpus_pipeline.indexing.rows import by_document_groups
from corpus_pipeline.indexing.stats import StageResult
from corpus_pipeline.store import schemas, versions
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.parquet import PartitionWriter
from resources import CorpusResource, LLMResource
from resources.batch_io import STAGED_LAZILY, StagedBatch, remove_staging
from resources.io_manager import LAZY, READ, partition_folder
from resources.metadata import table_metadata

# What each step reads of its inputs (``resources.io_manager.READ``): a plan and a merge
# the key columns (and the texts the checks compare spans with), a batch its documents' rows
# only (``LAZY``: a dataset it filters); no step reads every document's blocks.
_TEXT_KEYS = ["doc_id", "status", "content_hash", "path"]
_PARENT_KEYS = ["doc_id", "parent_index", "parent_id"]
_PARENT_SPANS = [*_PARENT_KEYS, "start_offset", "end_offset", "overlap_chars", "derived"]  # the child checks'


def _reads(**tables: object) -> In:
    return In(metadata={READ: tables})


def _check_outputs(asset: str) -> list[str]:
    """The output names Dagster gives a graph-backed asset's checks (``<asset>_<check>``)."""
    return [f"{asset}_{spec.name}" for spec in CHECK_SPECS[asset]]


def _metadata(result: StageResult, rows: int) -> dict[str, Any]:
    meta: dict[str, Any] = {"dagster/row_count": MetadataValue.int(rows)}
    for k, v in result.stats.metadata().items():
        meta[k] = MetadataValue.json(v) if isinstance(v, (list, dict)) else v
    return meta


#: What a chunk stage's plan reads of its previous output: the columns that decide reuse.
_PREVIOUS_KEYS = {
    "parent_blocks": ["doc_id", "content_hash", "doc_path", "metadata"],
    "child_chunks": ["doc_id", "doc_fingerprint", "metadata"],
}


def _chunk_work(
    asset: str, corpus: CorpusResource, llm: LLMResource, partition_key: str, **inputs: Any
) -> tuple[Any, indexing.ChunkWork]:
    """(kb, work) of a chunk stage's partition: which documents keep their rows and which
    its batches chunk. The plan and the merge compute the same, from the previous output's
    key columns only (the merge then reads the kept documents' rows, a group at a time)."""
    kb_name, version = split_key(partition_key)
    kb = corpus.kb_at_version(kb_name, version)
    previous = corpus.previous(asset, kb_name, version, columns=_PREVIOUS_KEYS[asset])
    with corpus.tools(kb, llm.defaults()) as tools:
        has_llm = tools.llm is not None
    if asset == "parent_blocks":
        work = indexing.parents_to_build(inputs["parsed_blocks"], previous, llm=has_llm)
    else:
        images = indexing.image_pieces_by_doc(inputs["image_descriptions"], inputs["parsed_blocks"])
        work = indexing.children_to_build(
            inputs["parent_blocks"], inputs["parsed_blocks"], images, previous, llm=has_llm
        )
    return kb, work


def _chunk_batches(
    context: OpExecutionContext, corpus: CorpusResource, work: indexing.ChunkWork, total: int
) -> Iterator[DynamicOutput[list[str]]]:
    parts = batches.split(work.todo, corpus.batch_workers, corpus.batch_rule("chunk")) or [[]]
    context.log.info(f"{len(work.todo)} of {total} document(s) to chunk, in {len(parts)} batch(es)")
    for i, part in enumerate(parts):
        yield DynamicOutput(part, mapping_key=f"b{i}")


@op(out=DynamicOut(io_manager_key=BATCH_IO), ins={"parsed_blocks": _reads(texts=_TEXT_KEYS)})
def parents_plan(
    context: OpExecutionContext, corpus: CorpusResource, llm: LLMResource, parsed_blocks: dict[str, pa.Table]
) -> Iterator[DynamicOutput[list[str]]]:
    """The documents whose parents must be built (new, changed, or waiting for an LLM),
    cut into batches (``indexing.batches``): one step each."""
    _kb, work = _chunk_work("parent_blocks", corpus, llm, context.partition_key, parsed_blocks=parsed_blocks)
    yield from _chunk_batches(context, corpus, work, len(work.order))


@op(
    out=Out(io_manager_key=BATCH_IO),
    retry_policy=BATCH_RETRY,
    pool="llm",
    ins={"parsed_blocks": _reads(texts=LAZY, blocks=LAZY)},
)
def parents_batch(
    context: OpExecutionContext,
    corpus: CorpusResource,
    llm: LLMResource,
    parsed_blocks: dict[str, pads.Dataset],
    doc_ids: list[str],
) -> StageResult:
    """The parents of one batch of documents, each by its plan; a failure of the step is
    retried for this batch alone. LLM strategies share the ``llm`` concurrency pool."""
    kb_name, version = split_key(context.partition_key)
    kb = corpus.kb_at_version(kb_name, version)
    with corpus.tools(kb, llm.defaults()) as tools:
        return indexing.parent_batch(kb, version, parsed_blocks, doc_ids, tools, progress=progress_log(context))


@op(
    out={"result": Out(), **{n: Out() for n in _check_outputs("parent_blocks")}},
    ins={"parsed_blocks": _reads(texts=LAZY), "parts": In(metadata={STAGED_LAZILY: True})},
)
def parents_merge(
    context: OpExecutionContext,
    corpus: CorpusResource,
    llm: LLMResource,
    parsed_blocks: dict[str, pads.Dataset],
    parts: list[StagedBatch],
) -> Iterator[Output[StageResult] | AssetCheckResult]:
    """Every document's parents in document order: built by a batch, or kept. The
    documents' texts (what the checks compare spans with) are read a group at a time."""
    texts = parsed_blocks["texts"]
    keys = {"texts": texts.to_table(columns=_TEXT_KEYS)}
    kb, work = _chunk_work("parent_blocks", corpus, llm, context.partition_key, parsed_blocks=keys)
    extra = {"plan": "auto" if kb.auto else kb.plan.snapshot()}
    yield from _merged(context, corpus, kb, "parent_blocks", work, parts, {"texts": texts}, extra)


@graph_asset(
    partitions_def=kb_version_partitions,
    group_name="chunking",
    code_version="3",
    kinds=PARQUET,
    owners=OWNERS,
    ins={"parsed_blocks": AssetIn(partition_mapping=by_kb)},
    check_specs=CHECK_SPECS["parent_blocks"],
)
def parent_blocks(parsed_blocks: dict[str, pa.Table]) -> Any:
    """The parent pipeline of each document's plan: the context units search returns.
    Documents unchanged since this partition's last run keep their parents; the others
    are chunked in batches, one step each, that an executor runs in parallel."""
    todo = parents_plan(parsed_blocks)
    return parents_merge(parsed_blocks, todo.map(lambda ids: parents_batch(parsed_blocks, ids)).collect())


@op(
    out=DynamicOut(io_manager_key=BATCH_IO),
    ins={"parent_blocks": _reads(data=_PARENT_KEYS), "parsed_blocks": _reads(texts=_TEXT_KEYS, blocks=LAZY)},
)
def children_plan(
    context: OpExecutionContext,
    corpus: CorpusResource,
    llm: LLMResource,
    parent_blocks: pa.Table,
    parsed_blocks: dict[str, Any],
    image_descriptions: pa.Table,
) -> Iterator[DynamicOutput[list[str]]]:
    """The documents whose children must be built (parents or images changed, or waiting
    for an LLM), cut into batches: one step each."""
    _kb, work = _chunk_work(
        "child_chunks", corpus, llm, context.partition_key,
        parent_blocks=parent_blocks, parsed_blocks=parsed_blocks, image_descriptions=image_descriptions,
    )  # fmt: skip
    yield from _chunk_batches(context, corpus, work, len(work.order))


@op(
    out=Out(io_manager_key=BATCH_IO),
    retry_policy=BATCH_RETRY,
    pool="llm",
    ins={"parent_blocks": _reads(data=LAZY), "parsed_blocks": _reads(texts=LAZY, blocks=LAZY)},
)
def children_batch(
    context: OpExecutionContext,
    corpus: CorpusResource,
    llm: LLMResource,
    parent_blocks: pads.Dataset,
    parsed_blocks: dict[str, pads.Dataset],
    image_descriptions: pa.Table,
    doc_ids: list[str],
) -> StageResult:
    """The children of one batch of documents (every chunk fits the embedding model's
    window), with their image chunks; a failure of the step is retried for this batch alone."""
    kb_name, version = split_key(context.partition_key)
    kb = corpus.kb_at_version(kb_name, version)
    images = indexing.image_pieces_by_doc(image_descriptions, parsed_blocks, doc_ids)
    with corpus.tools(kb, llm.defaults()) as tools:
        return indexing.child_batch(
            kb, version, parent_blocks, parsed_blocks, images, doc_ids, tools, progress=progress_log(context)
        )


@op(
    out={"result": Out(), **{n: Out() for n in _check_outputs("child_chunks")}},
    ins={
        "parent_blocks": _reads(data=_PARENT_SPANS),
        "parsed_blocks": _reads(texts=LAZY, blocks=LAZY),
        "parts": In(metadata={STAGED_LAZILY: True}),
    },
)
def children_merge(
    context: OpExecutionContext,
    corpus: CorpusResource,
    llm: LLMResource,
    parent_blocks: pa.Table,
    parsed_blocks: dict[str, Any],
    image_descriptions: pa.Table,
    parts: list[StagedBatch],
) -> Iterator[Output[StageResult] | AssetCheckResult]:
    """Every document's children in reading order: built by a batch, or kept. The
    documents' texts (what the checks compare spans with) are read a group at a time."""
    texts = parsed_blocks["texts"]
    keys = {**parsed_blocks, "texts": texts.to_table(columns=_TEXT_KEYS)}
    kb, work = _chunk_work(
        "child_chunks", corpus, llm, context.partition_key,
        parent_blocks=parent_blocks, parsed_blocks=keys, image_descriptions=image_descriptions,
    )  # fmt: skip
    alongside = {"parents": parent_blocks, "texts": texts}
    yield from _merged(context, corpus, kb, "child_chunks", work, parts, alongside, {})


#: Of a chunk stage's rows, what its distribution metadata reads (``distribution_metadata``).
_SIZE_COLUMNS = ("doc_id", "chunk_type", "derived", "char_count", "token_count")
#: A chunk stage's table: its schema, its id column (the data version) and its name in the checks.
_CHUNK_TABLES = {
    "parent_blocks": (schemas.PARENT_BLOCKS, "parent_id", "parents"),
    "child_chunks": (schemas.CHILD_CHUNKS, "chunk_id", "children"),
}


def _merged(
    context: OpExecutionContext,
    corpus: CorpusResource,
    kb: Any,
    asset: str,
    work: indexing.ChunkWork,
    parts: list[StagedBatch],
    alongside: dict[str, pa.Table | pads.Dataset],
    extra: dict[str, Any],
) -> Iterator[Output[StageResult] | AssetCheckResult]:
    """A chunk stage's merge, streamed (``indexing.ChunkMerge``): a group of documents'
    rows at a time, from the previous partition's files and the staged batches (each read
    when its documents are due), into the partition's files (``PartitionWriter``, which the
    IO manager switches to), the blocking checks (beside the same documents' rows of
    ``alongside``), the data version (the id column) and the size columns the distribution
    metadata is computed from: no copy of the partition is held."""
    kb_name, version = split_key(context.partition_key)
    schema, id_column, name = _CHUNK_TABLES[asset]
    previous = corpus.previous_dataset(asset, kb_name, version)
    merge = indexing.ChunkMerge(work, previous, [part.load for part in parts], schema)
    writer = PartitionWriter(partition_folder(corpus.layout, asset, context.partition_key))
    fingerprint = indexing.ColumnFingerprint(id_column)
    sizes: list[pa.Table] = []

    def groups() -> Iterator[dict[str, Any]]:
        for (_docs, table), other in zip(merge.groups(), by_document_groups(alongside, work.order), strict=True):
            writer.add(table)
            fingerprint.add(table)
            sizes.append(table.select([c for c in _SIZE_COLUMNS if c in table.column_names]))
            yield {name: table, **other}

    outcomes = grouped_outcomes(asset, kb, context.partition_key, groups())
    remove_staging(corpus.home, context.run_id, asset)
    result = StageResult(writer, merge.stats, checks=[o.to_dict() for o in outcomes])
    narrow = pa.concat_tables(sizes) if sizes else schema.empty_table()
    yield Output(
        result,
        output_name="result",
        data_version=DataVersion(fingerprint.hexdigest()),
        metadata={**_metadata(result, merge.stats.rows), **extra, **distribution_metadata(narrow, kb)},
    )
    yield from check_results(asset, outcomes)


@graph_asset(
    partitions_def=kb_version_partitions,
    group_name="chunking",
    code_version="3",
    kinds=PARQUET,
    owners=OWNERS,
    ins={
        "parent_blocks": AssetIn(),
        "parsed_blocks": AssetIn(partition_mapping=by_kb),
        "image_descriptions": AssetIn(partition_mapping=by_kb),
    },
    check_specs=CHECK_SPECS["child_chunks"],
)
def child_chunks(parent_blocks: pa.Table, parsed_blocks: dict[str, pa.Table], image_descriptions: pa.Table) -> Any:
    """The child pipeline over each parent, plus image chunks, in reading order; every
    chunk fits the embedding model's window. Documents whose parents and images are
    unchanged keep their children; the others are chunked in batches, one step each."""
    inputs = (parent_blocks, parsed_blocks, image_descriptions)
    todo = children_plan(*inputs)
    return children_merge(*inputs, todo.map(lambda ids: children_batch(*inputs, ids)).collect())


@op(out=DynamicOut(io_manager_key=BATCH_IO))
def embed_plan(
    context: OpExecutionContext, corpus: CorpusResource, child_chunks: pads.Dataset
) -> Iterator[DynamicOutput[list[str]]]:
    """The distinct texts this model has no cached vector for, cut into batches
    (``indexing.batches``): one step each. Of ``child_chunks`` (the partition's dataset) it
    reads the text hashes, then the texts a slice at a time (``indexing.EmbedPlan``): a
    batch is staged before the next is read."""
    kb_name, version = split_key(context.partition_key)
    emb = corpus.kb_at_version(kb_name, version).config.embedding
    previous = corpus.previous_dataset("chunk_embeddings", kb_name, version)
    plan = indexing.EmbedPlan.of(child_chunks, emb, corpus.embedding_cache(), previous)
    sizes = batches.sizes(plan.count, corpus.batch_workers, corpus.batch_rule("embed"))
    context.log.info(f"{plan.count} of {plan.rows} chunk text(s) to embed, in {max(1, len(sizes))} batch(es)")
    if not sizes:
        yield DynamicOutput([], mapping_key="b0")
    for i, part in enumerate(plan.batches(sizes)):
        yield DynamicOutput(part, mapping_key=f"b{i}")


@op(out=Out(io_manager_key=BATCH_IO), retry_policy=BATCH_RETRY)
def embed_batch(context: OpExecutionContext, corpus: CorpusResource, texts: list[str]) -> pa.Table:
    """One batch of texts embedded (a table of text hash and vector); a failure of the step
    (the endpoint down, the worker lost) is retried for this batch alone, and what it had
    embedded is in the vector cache already (``CHECKPOINT_TEXTS``)."""
    kb_name, version = split_key(context.partition_key)
    emb = corpus.kb_at_version(kb_name, version).config.embedding
    return indexing.embed_batch(texts, emb, progress=progress_log(context), cache=corpus.embedding_cache())


@op(
    ins={"parts": In(metadata={STAGED_LAZILY: True})},
    out={"result": Out(), **{n: Out() for n in _check_outputs("chunk_embeddings")}},
)
def embed_merge(
    context: OpExecutionContext, corpus: CorpusResource, child_chunks: pads.Dataset, parts: list[StagedBatch]
) -> Iterator[Output[StageResult] | AssetCheckResult]:
    """One vector per child chunk, in table order: from the previous output, the batches,
    else the cache. Of ``child_chunks`` (the partition's dataset) it reads the chunk ids and
    text hashes; the batches and the previous vectors are read one at a time into a spill
    file, whose rows then stream, a slice at a time, through the checks into the
    partition's files (which the IO manager switches to): nothing holds every vector."""
    kb_name, version = split_key(context.partition_key)
    kb = corpus.kb_at_version(kb_name, version)
    previous = corpus.previous_dataset("chunk_embeddings", kb_name, version)
    spill = corpus.layout.staging_dir(context.run_id)
    with indexing.embed_vectors(
        child_chunks,
        kb.config.embedding,
        cache=corpus.embedding_cache(),
        fresh=[part.load for part in parts],
        previous=previous,
        spill=spill,
    ) as vectors:
        writer = PartitionWriter(partition_folder(corpus.layout, "chunk_embeddings", context.partition_key))

        def groups() -> Iterator[dict[str, pa.Table]]:
            for table, keys in vectors.slices():
                writer.add(table)
                yield {"embeddings": table, "children": keys}

        outcomes = grouped_outcomes("chunk_embeddings", kb, context.partition_key, groups())
        version_of = vectors.fingerprint()
    remove_staging(corpus.home, context.run_id, "chunk_embeddings")
    result = StageResult(writer, vectors.stats, checks=[o.to_dict() for o in outcomes])
    yield Output(
        result,
        output_name="result",
        data_version=DataVersion(version_of),
        metadata=_metadata(result, vectors.rows),
    )
    yield from check_results("chunk_embeddings", outcomes)


@graph_asset(
    partitions_def=kb_version_partitions,
    group_name="embedding",
    code_version="3",
    kinds=PARQUET,
    owners=OWNERS,
    check_specs=CHECK_SPECS["chunk_embeddings"],
)
def chunk_embeddings(child_chunks: pa.Table) -> Any:
    """One vector per child chunk; text already embedded by this model is reused, the rest
    is embedded in batches, one step each, that an executor runs in parallel."""
    return embed_merge(child_chunks, embed_plan(child_chunks).map(embed_batch).collect())


@asset(
    partitions_def=kb_version_partitions,
    group_name="embedding",
    code_version="2",
    kinds=LANCEDB,
    owners=OWNERS,
    ins={"child_chunks": AssetIn(), "chunk_embeddings": AssetIn()},
)
def search_index(
    context: AssetExecutionContext,
    corpus: CorpusResource,
    child_chunks: pads.Dataset,
    chunk_embeddings: pads.Dataset,
) -> MaterializeResult[Any]:
    """The LanceDB table of this partition: chunks, vectors and a full-text index. Its
    inputs are the partitions' Parquet datasets, read and written a slice at a time.

    Runs only when the blocking checks upstream passed; then, if this is the KB's current
    version, it becomes the active one (what search reads) and versions beyond the
    retention count are retired, Parquet and LanceDB alike."""
    kb_name, version = split_key(context.partition_key)
    layout = corpus.layout
    stats = indexing.publish_version(layout, kb_name, version, child_chunks, chunk_embeddings)
    _forget_unused_versions(context, layout, stats.retired_versions)
    return MaterializeResult(
        metadata={
            **stats.metadata(),
            **_search_table_metadata(layout, kb_name, version, stats.rows),
            "retired_versions": MetadataValue.json(stats.retired_versions),
            "lancedb": MetadataValue.path(str(layout.search_table_dir(kb_name, version))),
        }
    )


def _search_table_metadata(layout: Layout, kb: str, version: str, rows: int) -> dict[str, Any]:
    """Row count and column schema of the LanceDB table just written (its Arrow schema)."""
    from corpus_pipeline.store.lance import open_search_table

    return table_metadata(open_search_table(layout, kb, version).schema, rows)


def _forget_unused_versions(context: AssetExecutionContext, layout: Layout, retired: list[str]) -> None:
    """Drop retired strategy_version partition keys that no KB uses any more."""
    in_use = {v for kb in layout.list_kbs() for v in versions.known_versions(layout, kb)}
    for v in retired:
        if v not in in_use and context.instance.has_dynamic_partition("strategy_version", v):
            context.instance.delete_dynamic_partition("strategy_version", v)
