"""Jobs: one per partitioning (Dagster runs one partitions definition per run; each job's
partitioning is inferred from its assets)."""

from dagster import AssetSelection, define_asset_job

parse_kb_job = define_asset_job(
    "parse_kb",
    selection=AssetSelection.assets("documents", "parsed_blocks", "image_descriptions"),
    description="Discover, parse and describe the images of one knowledge base.",
)
index_version_job = define_asset_job(
    "index_version",
    selection=AssetSelection.assets(
        "parent_blocks", "child_chunks", "chunk_embeddings", "search_index", "retrieval_eval"
    ),
    description="Chunk, embed and index one knowledge base at one strategy version; score it on the KB's questions.",
)
