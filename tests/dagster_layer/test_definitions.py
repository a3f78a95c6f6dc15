"""The code location loads: assets, partitions, jobs, resources."""

from __future__ import annotations

from dagster import AssetKey, DynamicPartitionsDefinition, MultiPartitionsDefinition

from assets.definitions import defs


def test_definitions_hold_the_asset_graph_of_the_design():
    graph = defs.resolve_asset_graph()
    keys = {k.path[-1] for k in graph.get_all_asset_keys()}
    assert keys == {
        "documents",
        "parsed_blocks",
        "image_descriptions",
        "parent_blocks",
        "child_chunks",
        "chunk_embeddings",
        "search_index",
        "retrieval_eval",
    }
    parents = {
        k: {p.path[-1] for p in graph.get(AssetKey(k)).parent_keys}
        for k in ("parent_blocks", "child_chunks", "search_index")
    }
    assert parents == {
        "parent_blocks": {"parsed_blocks"},
        "child_chunks": {"parent_blocks", "parsed_blocks", "image_descriptions"},
        "search_index": {"child_chunks", "chunk_embeddings"},
    }


def test_parsing_is_partitioned_by_kb_and_chunking_by_kb_times_version():
    graph = defs.resolve_asset_graph()
    by_kb = graph.get(AssetKey("parsed_blocks")).partitions_def
    assert isinstance(by_kb, DynamicPartitionsDefinition) and by_kb.name == "kb"
    for name in ("parent_blocks", "child_chunks", "chunk_embeddings", "search_index"):
        pd = graph.get(AssetKey(name)).partitions_def
        assert isinstance(pd, MultiPartitionsDefinition)
        assert [d.name for d in pd.partitions_defs] == ["kb", "strategy_version"]


def test_jobs_exist_per_partitioning():
    assert {j.name for j in defs.resolve_all_job_defs()} >= {"parse_kb", "index_version"}
