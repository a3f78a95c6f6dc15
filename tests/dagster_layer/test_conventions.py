"""Dagster conventions (issue 15): standard metadata on materializations, kinds and owners
on every asset, resources from ``EnvVar``, check results that name their partition."""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster import AssetKey, EnvVar, TableSchema, instance_for_test

from assets.checks import CHECK_SPECS, check_results
from assets.definitions import build_definitions, defs
from assets.partitions import kb_version_partitions
from assets.runner import index_kb
from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.quality.outcome import CheckOutcome
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.parquet import has_partition
from corpus_pipeline.store.versions import register_version
from resources import CorpusResource, LLMResource

ASSETS = {
    "documents": {"parquet", "python"},
    "parsed_blocks": {"parquet", "python"},
    "image_descriptions": {"parquet", "python"},
    "parent_blocks": {"parquet", "python"},
    "child_chunks": {"parquet", "python"},
    "chunk_embeddings": {"parquet", "python"},
    "search_index": {"lancedb", "python"},
    "retrieval_eval": {"python"},
}


def test_every_asset_has_kinds_and_an_owner():
    for name, kinds in ASSETS.items():
        spec = next(iter(defs.get_assets_def(name).specs))
        assert set(spec.kinds) == kinds, name
        assert spec.owners == ["team:corpus"], name


def test_check_specs_are_partitioned_and_results_name_their_partition():
    for specs in CHECK_SPECS.values():
        assert specs and all(s.partitions_def == kb_version_partitions for s in specs)
    outcomes = [
        CheckOutcome("a", "child_chunks", False, "ERROR", 10, 2, "2 chunks too long", partition="alpha|v1"),
        CheckOutcome("a", "child_chunks", True, "ERROR", 10, 0, "", partition="beta|v1"),
    ]
    failed, passed = check_results("child_chunks", outcomes)
    assert failed.description == "[alpha|v1] FAILED (ERROR): 2 chunks too long"
    assert passed.description == "[beta|v1] passed"
    assert failed.metadata["partition"].value == "alpha|v1"


def test_resources_read_the_environment_as_env_vars(monkeypatch):
    for var in ("CORPUS_HOME", "CORPUS_LLM_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    plain = build_definitions()  # nothing set: the defaults (./data, no LLM)
    assert plain.resources["corpus"].home == "" and plain.resources["llm"].defaults() == {}

    monkeypatch.setenv("CORPUS_HOME", "/tmp/somewhere")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("CORPUS_LLM_MODEL", "gpt-test")
    d = build_definitions()
    assert d.resources["corpus"].home == EnvVar("CORPUS_HOME")
    assert isinstance(d.resources["corpus"].home, EnvVar)
    llm = d.resources["llm"]
    assert isinstance(llm.api_key, EnvVar) and isinstance(llm.model, EnvVar) and llm.base_url is None
    # Given explicitly, a home is a plain value; tests build resources directly.
    assert build_definitions("/x").resources["corpus"].home == "/x"
    assert CorpusResource(home="/y").home == "/y" and LLMResource().defaults() == {}


@pytest.mark.slow
def test_materializations_carry_row_count_column_schema_and_path(tiny_kb, corpus_home):
    layout = Layout(corpus_home)
    kb = resolve_kb(layout.kb_dir("tiny"))
    version = register_version(layout, kb)
    with instance_for_test() as instance:
        summary = index_kb(build_definitions(str(layout.home)), instance, layout, kb, version, say=lambda s: None)
        assert summary.status == "ok", summary.error
        meta = {}
        for name in ASSETS:
            event = instance.get_latest_materialization_event(AssetKey(name))
            assert event is not None and event.asset_materialization is not None, name
            meta[name] = event.asset_materialization.metadata
            assert "dagster/row_count" in meta[name], name

    children = meta["child_chunks"]
    assert children["dagster/row_count"].value == summary.child_chunks
    schema = children["dagster/column_schema"].value
    assert isinstance(schema, TableSchema)
    assert {"chunk_id", "parent_id", "text", "start_offset"} <= {c.name for c in schema.columns}
    folder = Path(children["path"].value)
    assert folder == layout.partition_dir("child_chunks", "tiny", version) and has_partition(folder)
    assert type(children["path"]).__name__ == "PathMetadataValue"

    parsed = meta["parsed_blocks"]  # several tables: the first one's schema, the others' by name
    assert {"doc_id", "text"} <= {c.name for c in parsed["dagster/column_schema"].value.columns}
    assert "column_schema/blocks" in parsed and set(parsed["rows"].value) == {"texts", "blocks", "images"}

    index = meta["search_index"]
    assert index["dagster/row_count"].value == summary.child_chunks
    assert "vector" in {c.name for c in index["dagster/column_schema"].value.columns}
    assert type(index["lancedb"]).__name__ == "PathMetadataValue"


def test_an_input_reads_only_the_tables_and_columns_it_declares(tmp_path):
    """The IO manager hands an input what its definition's ``corpus/read`` metadata names:
    the description steps get a partition's images and the documents' ids and hashes, not
    every document's text and blocks."""
    import pyarrow as pa
    from dagster import build_input_context

    from assets.documents import describe_merge, describe_plan
    from corpus_pipeline.store.parquet import write_partition
    from resources import PartitionedParquetIOManager
    from resources.io_manager import READ

    layout = Layout(tmp_path)
    texts = pa.table({"doc_id": ["d1"], "path": ["a.md"], "content_hash": ["h"], "text": ["the whole text"]})
    images = pa.table({"doc_id": ["d1"], "image_hash": ["i"]})
    blocks = pa.table({"doc_id": ["d1"], "text": ["a block"]})
    write_partition(layout.partition_dir("parsed_blocks", "kb1"), {"texts": texts, "images": images, "blocks": blocks})
    manager = PartitionedParquetIOManager(home=str(tmp_path))

    def load(metadata: dict | None) -> dict:
        return manager.load_input(
            build_input_context(asset_key="parsed_blocks", partition_key="kb1", definition_metadata=metadata)
        )

    assert set(load(None)) == {"texts", "images", "blocks"}
    for op_def in (describe_plan, describe_merge):
        wanted = op_def.ins["parsed_blocks"].metadata[READ]
        got = load({READ: wanted})
        assert set(got) == {"images", "texts"}
        assert got["images"].equals(images) and got["texts"].column_names == ["doc_id", "path", "content_hash"]


def test_no_chunk_step_reads_every_documents_blocks(tmp_path):
    """The chunk stages' plans read key columns; their merges and batches get datasets and
    read their documents' rows only (``indexing.rows.of_docs``: a batch its documents', a
    merge's checks the texts of a group of documents at a time); none reads the blocks, or
    the texts, of every document."""
    import pyarrow as pa
    import pyarrow.dataset as pads
    from dagster import build_input_context

    from assets.chunks import (
        children_batch,
        children_merge,
        children_plan,
        parents_batch,
        parents_merge,
        parents_plan,
    )
    from corpus_pipeline.store.parquet import write_partition
    from resources import PartitionedParquetIOManager
    from resources.io_manager import READ

    layout = Layout(tmp_path)
    texts = pa.table(
        {"doc_id": ["d1"], "status": ["OK"], "content_hash": ["h"], "path": ["a.md"], "text": ["the whole text"]}
    )
    blocks = pa.table({"doc_id": ["d1"], "text": ["a block"]})
    write_partition(layout.partition_dir("parsed_blocks", "kb1"), {"texts": texts, "blocks": blocks})
    parents = pa.table(
        {
            "doc_id": ["d1"], "parent_index": [0], "parent_id": ["p1"], "start_offset": [0], "end_offset": [5],
            "overlap_chars": [0], "derived": [False], "text": ["whole"],
        }
    )  # fmt: skip
    write_partition(layout.partition_dir("parent_blocks", "kb1", "v1"), parents)
    manager = PartitionedParquetIOManager(home=str(tmp_path))

    def load(asset: str, key: str, op_def) -> object:
        meta = op_def.ins[asset].metadata
        assert READ in meta, (op_def.name, asset)
        return manager.load_input(build_input_context(asset_key=asset, partition_key=key, definition_metadata=meta))

    for op_def in (parents_plan, children_plan):
        got = load("parsed_blocks", "kb1", op_def)
        assert isinstance(got["texts"], pa.Table) and "content_hash" in got["texts"].column_names
        assert "text" not in got["texts"].column_names
        assert "blocks" not in got or isinstance(got["blocks"], pads.Dataset)
    for op_def in (parents_merge, children_merge):
        got = load("parsed_blocks", "kb1", op_def)
        assert all(isinstance(t, pads.Dataset) for t in got.values()) and "texts" in got
    for op_def in (parents_batch, children_batch):
        got = load("parsed_blocks", "kb1", op_def)
        assert all(isinstance(t, pads.Dataset) for t in got.values()) and set(got) == {"texts", "blocks"}
    for op_def in (children_plan, children_merge):
        got = load("parent_blocks", "kb1|v1", op_def)
        assert isinstance(got, pa.Table) and "text" not in got.column_names and "parent_id" in got.column_names
    assert isinstance(load("parent_blocks", "kb1|v1", children_batch), pads.Dataset)


def test_a_chunk_plan_reads_only_the_reuse_keys_of_the_previous_output(tmp_path):
    """The plans decide reuse from a few columns of the previous output (``_PREVIOUS_KEYS``),
    not every chunk's text; a column an older partition lacks is left out, not an error."""
    import pyarrow as pa

    from assets.chunks import _PREVIOUS_KEYS
    from corpus_pipeline.store.parquet import write_partition
    from resources import CorpusResource

    corpus = CorpusResource(home=str(tmp_path))
    assert corpus.previous("child_chunks", "kb1", "v1", columns=["doc_id"]) is None  # never written
    old = pa.table({"doc_id": ["d1"], "metadata": ["{}"], "text": ["a long chunk text"]})  # no doc_fingerprint
    write_partition(Layout(tmp_path).partition_dir("child_chunks", "kb1", "v1"), old)
    keys = corpus.previous("child_chunks", "kb1", "v1", columns=_PREVIOUS_KEYS["child_chunks"])
    assert keys.column_names == ["doc_id", "metadata"]
    assert corpus.previous("child_chunks", "kb1", "v1").equals(old)


def test_the_search_index_step_gets_its_inputs_as_datasets_not_tables(tmp_path):
    """``search_index`` streams its inputs (``indexing.publish.PartitionInput``): the IO
    manager hands an input annotated ``pyarrow.dataset.Dataset`` the partition's files,
    nothing read, and a table to an input that is not."""
    import pyarrow as pa
    import pyarrow.dataset as pads
    from dagster import build_input_context

    from assets.definitions import defs
    from corpus_pipeline.store.parquet import write_partition
    from resources import PartitionedParquetIOManager

    chunks = pa.table({"doc_id": ["d1", "d2"], "chunk_id": ["c1", "c2"]})
    write_partition(Layout(tmp_path).partition_dir("child_chunks", "kb1", "v1"), chunks)
    manager = PartitionedParquetIOManager(home=str(tmp_path))
    ins = defs.resolve_assets_def("search_index").op.ins
    loaded = {}
    for name in ("child_chunks", "chunk_embeddings"):
        kind = ins[name].dagster_type
        assert kind.typing_type is pads.Dataset
        context = build_input_context(asset_key="child_chunks", partition_key="kb1|v1", dagster_type=kind)
        loaded[name] = manager.load_input(context)
    assert all(isinstance(v, pads.Dataset) for v in loaded.values())
    assert loaded["child_chunks"].to_table().equals(chunks)
    plain = manager.load_input(build_input_context(asset_key="child_chunks", partition_key="kb1|v1"))
    assert isinstance(plain, pa.Table) and plain.equals(chunks)


def test_the_embed_plan_and_merge_get_the_children_as_a_dataset():
    """``embed_merge`` reads only ``chunk_id`` and ``text_hash`` of ``child_chunks``
    (``indexing.chunk_keys``), ``embed_plan`` the text hashes and then the texts a slice at a
    time (``indexing.EmbedPlan``): their input is annotated ``pyarrow.dataset.Dataset``, which
    the IO manager hands over unread (tested above for ``search_index``)."""
    import pyarrow.dataset as pads

    from assets.definitions import defs

    graph = defs.resolve_assets_def("chunk_embeddings").node_def
    ops = {node.name: node.definition for node in graph.nodes}
    assert ops["embed_merge"].ins["child_chunks"].dagster_type.typing_type is pads.Dataset
    assert ops["embed_plan"].ins["child_chunks"].dagster_type.typing_type is pads.Dataset


def test_the_io_manager_commits_a_partition_a_step_streamed_and_refuses_one_streamed_elsewhere(tmp_path):
    """A step that streams its rows (``embed_merge``: a ``PartitionWriter`` in its
    ``StageResult``) leaves the IO manager only the switch: the rows become the partition's,
    with the stage's manifest; a writer into another folder is refused, and the partition
    keeps its previous version."""
    import pyarrow as pa
    import pytest
    from dagster import DagsterInvariantViolationError, build_output_context

    from corpus_pipeline.indexing.stats import EmbedStats, StageResult
    from corpus_pipeline.store.parquet import PartitionWriter, read_manifest, read_table, write_partition
    from resources import PartitionedParquetIOManager

    layout = Layout(tmp_path)
    folder = layout.partition_dir("chunk_embeddings", "kb1")
    write_partition(folder, pa.table({"chunk_id": ["old"]}))
    manager = PartitionedParquetIOManager(home=str(tmp_path))
    stats = EmbedStats(model="m", embedded=2, reused=0, dimension=1)

    elsewhere = PartitionWriter(layout.partition_dir("chunk_embeddings", "kb2"))
    elsewhere.add(pa.table({"chunk_id": ["x"]}))
    with pytest.raises(DagsterInvariantViolationError, match="different warehouses"):
        manager.handle_output(
            build_output_context(asset_key="chunk_embeddings", partition_key="kb1"), StageResult(elsewhere, stats)
        )
    assert read_table(folder).column("chunk_id").to_pylist() == ["old"]

    writer = PartitionWriter(folder)
    for piece in (["a"], ["b", "c"]):
        writer.add(pa.table({"chunk_id": piece}))
    assert read_table(folder).column("chunk_id").to_pylist() == ["old"]  # (nothing visible before the switch)
    context = build_output_context(asset_key="chunk_embeddings", partition_key="kb1")
    manager.handle_output(context, StageResult(writer, stats))
    assert read_table(folder).column("chunk_id").to_pylist() == ["a", "b", "c"]
    assert read_manifest(folder)["stats"]["embedded"] == 2 and read_manifest(folder)["rows"] == {"data": 3}
