"""Parquet partitions: files per document batch, switched by one pointer, on a local folder
and on an object store (a local S3 server); a crash leaves the previous version readable."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest
from upath import UPath

from corpus_pipeline.errors import StoreError
from corpus_pipeline.store import parquet
from corpus_pipeline.store.parquet import (
    MANIFEST,
    batches,
    dataset,
    partition_files,
    read_columns,
    read_manifest,
    read_partition,
    write_partition,
)


@pytest.fixture(params=["local", "s3"])
def root(request: pytest.FixtureRequest, tmp_path) -> UPath:
    """Where partitions are written: a local folder, or a bucket of the local S3 server."""
    if request.param == "local":
        return UPath(tmp_path)
    return UPath(request.getfixturevalue("s3_warehouse"))


def _docs(n: int, rows_per_doc: int = 3, text: str = "t") -> pa.Table:
    ids = [f"doc-{i:04d}" for i in range(n) for _ in range(rows_per_doc)]
    return pa.table({"doc_id": ids, "text": [f"{text} {d} {j}" for j, d in enumerate(ids)]})


def _names(folder: UPath) -> set[str]:
    return {p.name for p in folder.iterdir()}


def test_a_partition_is_replaced_whole(root):
    folder = root / "child_chunks" / "kb=a" / "strategy_version=v1"
    write_partition(folder, pa.table({"x": [1, 2, 3]}))
    write_partition(folder, pa.table({"x": [4]}))
    assert read_partition(folder).column("x").to_pylist() == [4]
    assert len([n for n in _names(folder) if n.endswith(".parquet")]) == 1  # the old file is gone


def test_several_named_tables_share_one_partition(root):
    folder = root / "parsed_blocks" / "kb=a"
    write_partition(folder, {"blocks": pa.table({"b": [1]}), "texts": pa.table({"t": ["x"]})})
    both = read_partition(folder)
    assert set(both) == {"blocks", "texts"}
    assert read_partition(folder, "texts").column("t").to_pylist() == ["x"]
    assert read_columns(folder, ["t"], name="texts").column("t").to_pylist() == ["x"]  # type: ignore[union-attr]


def test_a_table_is_cut_at_document_boundaries_and_reads_back_in_order(root):
    table = _docs(300)
    parts = batches(table, every=16)
    assert 5 < len(parts) < 60
    owners: dict[str, int] = {}
    for i, part in enumerate(parts):  # no document is split between files
        for d in part.column("doc_id").to_pylist():
            assert owners.setdefault(d, i) == i
    folder = root / "child_chunks" / "kb=a" / "strategy_version=v1"
    write_partition(folder, table, docs_per_file=16)
    assert len(partition_files(folder)["data"]) == len(parts)
    assert read_partition(folder).equals(table)


def test_a_one_document_edit_writes_one_file_not_the_partition(root, monkeypatch):
    folder = root / "child_chunks" / "kb=a" / "strategy_version=v1"
    table = _docs(400)
    write_partition(folder, table, docs_per_file=16)
    before = set(partition_files(folder)["data"])
    assert read_manifest(folder)["written"]["files"] == len(before)

    ids = table.column("doc_id").to_pylist()
    edited = pa.table(
        {
            "doc_id": ids,
            "text": [
                t + (" edited" if d == "doc-0200" else "") for t, d in zip(table["text"].to_pylist(), ids, strict=True)
            ],
        }
    )
    encoded = []
    real_encode = parquet._encode
    monkeypatch.setattr(parquet, "_encode", lambda t: encoded.append(t.num_rows) or real_encode(t))
    write_partition(folder, edited, docs_per_file=16)
    after = set(partition_files(folder)["data"])
    written = read_manifest(folder)["written"]
    assert written["files"] == 1 and len(after - before) == 1 and len(before - after) == 1
    assert len(encoded) == 1  # the unchanged batches are known by their Arrow content: not encoded again
    assert written["bytes"] < sum(len(p.read_bytes()) for p in after) / 5
    assert read_partition(folder).equals(edited)
    assert {p.name for p in after} == {n for n in _names(folder) if n.endswith(".parquet")}  # old one deleted

    # a new document and a deleted one change at most the batches around them
    grown = pa.concat_tables(
        [
            edited.filter(pa.compute.not_equal(edited["doc_id"], "doc-0100")),
            _docs(1, text="new").set_column(0, "doc_id", pa.array(["doc-9999"] * 3)),
        ]
    )
    write_partition(folder, grown, docs_per_file=16)
    assert read_manifest(folder)["written"]["files"] <= 3
    assert read_partition(folder).equals(grown)


def test_an_unchanged_write_writes_no_data_file(root):
    folder = root / "documents" / "kb=a"
    write_partition(folder, _docs(50), docs_per_file=8)
    write_partition(folder, _docs(50), docs_per_file=8)
    assert read_manifest(folder)["written"] == {"files": 0, "bytes": 0}


def test_a_crash_before_the_pointer_leaves_the_previous_version_readable(root, monkeypatch):
    folder = root / "child_chunks" / "kb=a" / "strategy_version=v1"
    write_partition(folder, _docs(100), docs_per_file=8)
    real_put = parquet.put_bytes

    def dies_at_the_pointer(path, data):
        if path.name == MANIFEST:
            raise KeyboardInterrupt("killed")  # as a kill between the data files and the pointer
        real_put(path, data)

    monkeypatch.setattr(parquet, "put_bytes", dies_at_the_pointer)
    with pytest.raises(KeyboardInterrupt):
        write_partition(folder, _docs(100, text="new"), docs_per_file=8)
    assert read_partition(folder).equals(_docs(100))  # the old version, whole
    monkeypatch.setattr(parquet, "put_bytes", real_put)

    write_partition(folder, _docs(100, text="new"), docs_per_file=8)  # the next write cleans up
    assert read_partition(folder).equals(_docs(100, text="new"))
    listed = {p.name for p in partition_files(folder)["data"]}
    assert {n for n in _names(folder) if n.endswith(".parquet")} == listed


def test_a_failed_write_keeps_the_old_partition(root):
    folder = root / "t" / "kb=a"
    write_partition(folder, pa.table({"x": [1]}))
    with pytest.raises(AttributeError):
        write_partition(folder, {"bad": "not a table"})  # type: ignore[dict-item]
    assert read_partition(folder).column("x").to_pylist() == [1]


def test_reading_a_partition_never_written_says_so(root):
    with pytest.raises(StoreError, match="has not been materialized yet"):
        read_partition(root / "nope")
    assert read_columns(root / "nope") is None


def test_the_manifest_records_the_files_and_the_rows(root):
    folder = root / "t" / "kb=a"
    write_partition(folder, _docs(10), {"run_id": "r1"}, docs_per_file=4)
    m = json.loads((folder / MANIFEST).read_text())
    assert m["run_id"] == "r1" and m["rows"] == {"data": 30}
    assert [folder / f for f in m["files"]["data"]] == partition_files(folder)["data"]
    assert dataset(folder).count_rows() == 30


# ---------------------------------------------------------------- earlier releases' partitions


def test_a_partition_of_an_earlier_release_is_read_and_then_replaced(tmp_path):
    import pyarrow.parquet as pq

    folder = tmp_path / "t" / "kb=a"
    folder.mkdir(parents=True)
    pq.write_table(pa.table({"x": [1]}), folder / "data.parquet")
    (folder / MANIFEST).write_text(json.dumps({"run_id": "old"}))
    assert read_partition(folder).column("x").to_pylist() == [1]
    write_partition(folder, pa.table({"x": [2]}))
    assert read_partition(folder).column("x").to_pylist() == [2]
    assert not (folder / "data.parquet").exists()


def test_a_crash_between_an_earlier_releases_renames_leaves_the_previous_output_readable(tmp_path):
    folder = tmp_path / "t" / "kb=a"
    write_partition(folder, pa.table({"x": [1]}))
    os.rename(folder, folder.parent / ".old-kb=a-deadbeef")  # as if it died right there
    assert read_partition(folder).column("x").to_pylist() == [1]


def test_an_earlier_releases_half_write_leaves_nothing_behind_after_the_next(tmp_path):
    folder = tmp_path / "t" / "kb=a"
    write_partition(folder, pa.table({"x": [1]}))
    (folder.parent / ".tmp-kb=a-0badc0de").mkdir()  # as a kill -9 during a write left it
    (folder.parent / ".tmp-kb=a-0badc0de" / "data.parquet").write_bytes(b"half")
    write_partition(folder, pa.table({"x": [2]}))
    assert [p.name for p in folder.parent.iterdir()] == ["kb=a"]


# ---------------------------------------------------------------- where the warehouse is


def test_the_warehouse_is_home_warehouse_unless_corpus_warehouse_says_otherwise(tmp_path, monkeypatch):
    from corpus_pipeline.store.lance import storage_options
    from corpus_pipeline.store.layout import Layout

    monkeypatch.delenv("CORPUS_WAREHOUSE", raising=False)
    home = Layout.at(tmp_path)
    assert home.warehouse == tmp_path / "warehouse" and not home.remote and home.local == tmp_path / "warehouse"
    assert storage_options(home) == {}

    monkeypatch.setenv("CORPUS_WAREHOUSE", "")  # empty, as a compose file passes an unset one
    assert Layout.at(tmp_path).warehouse == tmp_path / "warehouse"

    monkeypatch.setenv("CORPUS_WAREHOUSE", str(tmp_path / "shared"))
    assert Layout.at(tmp_path).warehouse == tmp_path / "shared" and not Layout.at(tmp_path).remote

    monkeypatch.setenv("CORPUS_WAREHOUSE", "s3://bucket/prefix/")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    remote = Layout.at(tmp_path)
    assert remote.remote and str(remote.warehouse) == "s3://bucket/prefix"
    assert (
        str(remote.partition_dir("child_chunks", "a", "v1"))
        == "s3://bucket/prefix/child_chunks/kb=a/strategy_version=v1"
    )
    # this machine's part stays on its disk
    assert remote.locks == tmp_path / "warehouse" / "locks" and remote.staging == tmp_path / "warehouse" / "staging"
    assert remote.cache == tmp_path / "warehouse" / "cache"
    assert storage_options(remote) == {"aws_endpoint": "http://127.0.0.1:9000", "allow_http": "true"}


def test_a_table_without_doc_id_is_batched_by_chunk(root):
    """chunk_embeddings (chunk_id, vector): an edit rewrites the few batches around its chunks."""
    n = 4000
    table = pa.table({"chunk_id": [f"c{i:05d}" for i in range(n)], "x": list(range(n))})
    folder = root / "chunk_embeddings" / "kb=a" / "strategy_version=v1"
    write_partition(folder, table, docs_per_file=4)  # ~64 chunks a file
    files = partition_files(folder)["data"]
    assert 20 < len(files) < 200
    edited = table.set_column(1, "x", pa.array([i + (i in range(2000, 2013)) for i in range(n)]))
    write_partition(folder, edited, docs_per_file=4)
    assert read_manifest(folder)["written"]["files"] <= 2
    assert read_partition(folder).equals(edited)


def test_two_byte_identical_batches_are_both_read_back(root):
    table = pa.table({"doc_id": ["x", "y", "x"], "v": [1, 2, 1]})  # batches [x], [y], [x]: the first and last alike
    folder = root / "t" / "kb=a"
    write_partition(folder, table, docs_per_file=1)
    names = [p.name for p in partition_files(folder)["data"]]
    assert len(names) == 3 and names[0] == names[2]
    assert read_partition(folder).equals(table)


def _rows_by_doc(t: pa.Table) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = {}
    for d, c, h in zip(*(t.column(n).to_pylist() for n in ("doc_id", "chunk_id", "row_hash")), strict=True):
        out.setdefault(d, []).append((c, h))
    return {d: sorted(v) for d, v in out.items()}


def test_changed_docs_are_the_documents_whose_rows_differ():
    """``changed_docs`` (an Arrow join) against the rule it implements, written the slow way:
    a document changed when its sorted (chunk_id, row_hash) rows differ."""
    import random

    from corpus_pipeline.store.lance import changed_docs

    rng = random.Random(5)
    old = [(f"d{d}", f"d{d}-c{c}", f"h{d}.{c}") for d in range(40) for c in range(rng.randint(1, 5))]

    def table(rows: list[tuple[str, str, str]]) -> pa.Table:
        rows = rng.sample(rows, len(rows))  # order does not matter
        return pa.table({n: [r[i] for r in rows] for i, n in enumerate(("doc_id", "chunk_id", "row_hash"))})

    edits = {
        "nothing": list(old),
        "a changed row": [(d, c, h + "x" if c == "d3-c0" else h) for d, c, h in old],
        "a chunk added": [*old, ("d7", "d7-c9", "new")],
        "a chunk gone": [r for r in old if r[1] != "d9-c0"],
        "a document gone": [r for r in old if r[0] != "d11"],
        "a document added": [*old, ("d99", "d99-c0", "x"), ("d99", "d99-c1", "y")],
        "a chunk moved": [("d13" if c == "d12-c0" else d, c, h) for d, c, h in old],
        "several": [(d, c, h + "x" if d in ("d1", "d30") else h) for d, c, h in old if d != "d20"],
    }
    for what, rows in edits.items():
        before, after = _rows_by_doc(table(old)), _rows_by_doc(table(rows))
        want = sorted(d for d in set(before) | set(after) if before.get(d) != after.get(d))
        assert changed_docs(table(old), table(rows)) == want, what
    assert changed_docs(table(old), table(edits["a chunk moved"])) == ["d12", "d13"]
    assert changed_docs(table(old), table(old[:0])) == sorted({r[0] for r in old})


def test_a_few_documents_rows_open_only_the_files_that_hold_them(root, monkeypatch):
    """The manifest lists each file's documents: a batch's rows (``rows.of_docs`` of the
    partition's dataset) are read from the files that hold them, and the others are never
    opened (here they are junk by the time of the read); without the lists (an earlier
    release's manifest) the rows are the same, found by reading every file's ``doc_id``."""
    from corpus_pipeline.indexing import rows

    table = _docs(60)
    wanted = ["doc-0007", "doc-0031"]
    expected = table.filter(pa.compute.is_in(table["doc_id"], pa.array(wanted)))
    folder = root / "t" / "kb=a"
    write_partition(folder, table, docs_per_file=4)
    m = read_manifest(folder)
    assert sorted(d for ids in m["docs"]["data"].values() for d in ids) == sorted(set(table["doc_id"].to_pylist()))
    assert set(m["docs"]["data"]) == set(m["files"]["data"]) and len(m["files"]["data"]) > 5
    holding = {f for f, ids in m["docs"]["data"].items() if set(ids) & set(wanted)}
    assert len(holding) <= 2
    ds = dataset(folder)
    for name in set(m["files"]["data"]) - holding:
        (folder / name).write_bytes(b"not parquet: a file that is opened fails the read")
    assert rows.of_docs(ds, wanted).equals(expected)

    older = root / "t" / "kb=b"
    write_partition(older, table, docs_per_file=4)
    m = read_manifest(older)
    m.pop("docs")
    (older / MANIFEST).write_text(json.dumps(m))
    monkeypatch.setattr(parquet, "_FILE_DOCS", {})
    assert rows.of_docs(dataset(older), wanted).equals(expected)


@pytest.mark.parametrize("piece", [1, 7, 50, 10_000])
def test_a_table_streamed_in_pieces_is_written_as_the_whole_table_is(root, piece):
    """``PartitionWriter`` cuts at the same boundaries whatever the pieces (even a piece
    that ends inside a document), so the files and the manifest are those of one write."""
    table = _docs(120, rows_per_doc=4)
    whole = root / "whole"
    streamed = root / "streamed"
    write_partition(whole, {"data": table, "other": pa.table({"x": [1, 2]})}, docs_per_file=8)
    writer = parquet.PartitionWriter(streamed, docs_per_file=8)
    for start in range(0, table.num_rows, piece):
        writer.add(table.slice(start, piece))
    writer.add(pa.table({"x": [1]}), "other")
    writer.add(pa.table({"x": [2]}), "other")
    writer.commit()
    a, b = read_manifest(whole), read_manifest(streamed)
    assert b["files"] == a["files"] and b["docs"] == a["docs"] and b["rows"] == a["rows"]
    assert read_partition(streamed, "data").equals(table)


def test_a_stream_that_stops_before_its_commit_leaves_the_previous_version(root):
    folder = root / "child_chunks" / "kb=a" / "strategy_version=v1"
    write_partition(folder, _docs(10), docs_per_file=2)
    writer = parquet.PartitionWriter(folder, docs_per_file=2)
    writer.add(_docs(40, text="new"))  # complete batches are written beside the old files...
    assert read_partition(folder).equals(_docs(10))  # ...but the manifest still lists the old
    write_partition(folder, _docs(3), docs_per_file=2)  # the next write removes what it left
    assert read_partition(folder).equals(_docs(3))
    assert len([n for n in _names(folder) if n.endswith(".parquet")]) == len(partition_files(folder)["data"])


def test_an_empty_stream_is_one_empty_table(root):
    folder = root / "p"
    writer = parquet.PartitionWriter(folder)
    writer.add(_docs(0))
    writer.commit()
    assert read_partition(folder).num_rows == 0
    assert read_partition(folder).schema.names == ["doc_id", "text"]
