"""Jobs: one per partitioning (Dagster runs one partitions definition per run; each job's
partitioning is inferred from its assets)."""

from dagster import AssetSelection, HookContext, define_asset_job, failure_hook, success_hook

from corpus_pipeline.indexing.memory import release_unused


@success_hook
def release_memory(context: HookContext) -> None:
    """After each step, the memory its tables used goes back to the system: steps that run
    in one process (a serial ``corpus index``) otherwise stack each stage's peak on the
    last one's (``corpus_pipeline.indexing.memory``)."""
    release_unused()


@failure_hook
def release_memory_on_failure(context: HookContext) -> None:
    release_unused()


HOOKS = {release_memory, release_memory_on_failure}

parse_kb_job = define_asset_job(
    "parse_kb",
    selection=AssetSelection.assets("documents", "parsed_blocks", "image_descriptions"),
    description="Discover, parse and describe the images of one knowledge base.",
    hooks=HOOKS,
)
index_version_job = define_asset_job(
    "index_version",
    selection=AssetSelection.assets(
        "parent_blocks", "child_chunks", "chunk_embeddings", "search_index", "retrieval_eval"
    ),
    description="Chunk, embed and index one knowledge base at one strategy version; score it on the KB's questions.",
    hooks=HOOKS,
)
