"""Parquet partitions are replaced atomically and survive a crash between the renames."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from corpus_pipeline.errors import StoreError
from corpus_pipeline.store.parquet import read_partition, write_partition


def test_a_partition_is_replaced_whole(tmp_path):
    folder = tmp_path / "child_chunks" / "kb=a" / "strategy_version=v1"
    write_partition(folder, pa.table({"x": [1, 2, 3]}))
    write_partition(folder, pa.table({"x": [4]}))
    assert read_partition(folder).column("x").to_pylist() == [4]
    assert sorted(p.name for p in folder.parent.iterdir()) == ["strategy_version=v1"]


def test_several_named_tables_share_one_partition(tmp_path):
    folder = tmp_path / "parsed_blocks" / "kb=a"
    write_partition(folder, {"blocks": pa.table({"b": [1]}), "texts": pa.table({"t": ["x"]})})
    both = read_partition(folder)
    assert set(both) == {"blocks", "texts"}
    assert read_partition(folder, "texts").column("t").to_pylist() == ["x"]


def test_a_crash_between_the_renames_leaves_the_previous_output_readable(tmp_path):
    folder = tmp_path / "t" / "kb=a"
    write_partition(folder, pa.table({"x": [1]}))
    os.rename(folder, folder.parent / ".old-kb=a-deadbeef")  # as if we died right here
    assert read_partition(folder).column("x").to_pylist() == [1]


def test_a_failed_write_keeps_the_old_partition(tmp_path):
    folder = tmp_path / "t" / "kb=a"
    write_partition(folder, pa.table({"x": [1]}))
    with pytest.raises(AttributeError, match=r"num_rows|schema|write"):
        write_partition(folder, {"bad": "not a table"})  # type: ignore[dict-item]
    assert read_partition(folder).column("x").to_pylist() == [1]
    assert [p.name for p in folder.parent.iterdir()] == ["kb=a"]


def test_reading_a_partition_never_written_says_so(tmp_path):
    with pytest.raises(StoreError, match="has not been materialized yet"):
        read_partition(tmp_path / "nope")


def test_a_write_killed_half_way_leaves_nothing_behind_after_the_next(tmp_path):
    folder = tmp_path / "t" / "kb=a"
    write_partition(folder, pa.table({"x": [1]}))
    (folder.parent / ".tmp-kb=a-0badc0de").mkdir()  # as a kill -9 during a write leaves it
    (folder.parent / ".tmp-kb=a-0badc0de" / "data.parquet").write_bytes(b"half")
    write_partition(folder, pa.table({"x": [2]}))
    assert [p.name for p in folder.parent.iterdir()] == ["kb=a"]
