"""The warehouse on object storage: a full cycle (index, re-index after an edit, search,
a second strategy version, rollback, lineage, stats) with ``CORPUS_WAREHOUSE=s3://...``
against a local S3-compatible server (moto's server mode, on 127.0.0.1), through the
product's own CLI; then a crash before a partition's pointer leaves the previous version
readable. Nothing of the shared warehouse may be left on the local disk.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from upath import UPath

from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.parquet import partition_files, read_manifest, read_table

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]


def _corpus(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "corpus"), *args], capture_output=True, text=True, env={**os.environ}, cwd=REPO, timeout=900
    )


def _json(*args: str) -> object:
    r = _corpus(*args, "--json")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return json.loads(r.stdout)


def test_index_reindex_search_and_rollback_on_a_local_s3_server(tiny_kb, corpus_home, s3_warehouse):
    [first] = _json("index", "--kb", "tiny")  # type: ignore[misc]
    assert first["documents"] == 2 and first["failed_documents"] == [] and first["embedded"] > 0
    v1 = first["strategy_version"]

    # the shared warehouse is in the bucket; only this machine's part is on the disk
    layout = Layout.at(corpus_home)
    assert layout.remote and str(layout.warehouse) == s3_warehouse
    wh = UPath(s3_warehouse)
    assert {p.name for p in wh.iterdir()} >= {"documents", "child_chunks", "lancedb", "versions", "state"}
    local = {p.name for p in (corpus_home / "warehouse").iterdir()}
    assert local <= {"locks", "cache", "staging"}, local
    assert read_table(layout.partition_dir("child_chunks", "tiny", v1)).num_rows == first["child_chunks"]

    out = _json("search", "how long are monthly snapshots kept", "--kb", "tiny")
    assert "12 months" in out["results"][0]["text"]  # type: ignore[index]
    out = _json("search", "线程栈", "--kb", "tiny")
    assert any("jstack" in r["text"] for r in out["results"])  # type: ignore[index]

    # an edit re-indexes that document only, and search finds the new text
    chunks_before = {p.name for p in partition_files(layout.partition_dir("child_chunks", "tiny", v1))["data"]}
    harbor = tiny_kb / "harbor.md"
    harbor.write_text(harbor.read_text().replace("12 months", "18 months"), encoding="utf-8")
    [second] = _json("index", "--kb", "tiny")  # type: ignore[misc]
    assert second["strategy_version"] == v1 and second["reused"] > 0
    out = _json("search", "how long are monthly snapshots kept", "--kb", "tiny")
    assert "18 months" in out["results"][0]["text"]  # type: ignore[index]
    assert not any("12 months" in r["text"] for r in out["results"])  # type: ignore[index]
    after = {p.name for p in partition_files(layout.partition_dir("child_chunks", "tiny", v1))["data"]}
    assert (
        after != chunks_before
        and {p.name for p in wh.glob(f"child_chunks/kb=tiny/strategy_version={v1}/*.parquet")} == after
    )

    # lineage and stats read the bucket too
    chunk_id = out["results"][0]["hits"][0]["chunk_id"]  # type: ignore[index]
    trace = _json("lineage", chunk_id)
    assert trace["chunk"]["chunk_id"] == chunk_id and "18 months" in trace["parent"]["text"]  # type: ignore[index]
    stats = _json("stats", "--kb", "tiny")
    assert "child_chunks" in json.dumps(stats)

    # a second strategy version, then rollback to the first
    (tiny_kb / "kb.yaml").write_text("chunking:\n  child: {RECURSIVE: {max_chars: 300, overlap_chars: 30}}\n")
    [third] = _json("index", "--kb", "tiny")  # type: ignore[misc]
    v2 = third["strategy_version"]
    assert v2 != v1 and (wh / "versions" / "tiny" / "ACTIVE").read_text().strip() == v2
    r = _corpus("activate", "--kb", "tiny", v1)
    assert r.returncode == 0, r.stderr
    assert (wh / "versions" / "tiny" / "ACTIVE").read_text().strip() == v1
    out = _json("search", "how long are monthly snapshots kept", "--kb", "tiny")
    assert out["strategy_version"] == v1 and "18 months" in out["results"][0]["text"]  # type: ignore[index]
    assert read_manifest(layout.partition_dir("child_chunks", "tiny", v2))["rows"]["data"] == third["child_chunks"]

    # drop removes the KB from the bucket
    dropped = _json("drop", "--kb", "tiny", "--yes")
    assert len(dropped["tables"]) == 2 and dropped["partitions"]  # type: ignore[index]
    assert not list(wh.glob("*/kb=tiny")) and not (wh / "versions" / "tiny").exists()
    assert not list(wh.glob("lancedb/chunks__tiny__*"))


def test_a_write_killed_before_its_pointer_leaves_the_bucket_readable(tiny_kb, corpus_home, s3_warehouse):
    """``corpus index`` killed (SIGKILL) just before a partition's manifest is replaced: the
    previous version stays whole, and a re-run gives the same rows and ids."""
    [first] = _json("index", "--kb", "tiny")  # type: ignore[misc]
    v1 = first["strategy_version"]
    layout = Layout.at(corpus_home)
    folder = layout.partition_dir("child_chunks", "tiny", v1)
    before = read_table(folder)

    harbor = tiny_kb / "harbor.md"
    harbor.write_text(harbor.read_text() + "\n## Alerts\n\nAlerts go to the on-call phone.\n", encoding="utf-8")
    hooks = corpus_home / "hooks"  # imported by every Python process of the run, step processes too
    hooks.mkdir()
    hook = hooks / "sitecustomize.py"
    hook.write_text(
        "import os, signal\n"
        "from corpus_pipeline.store import parquet\n"
        "real = parquet.put_bytes\n"
        "def put(path, data):\n"
        "    if path.name == parquet.MANIFEST and 'child_chunks' in str(path):\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    real(path, data)\n"
        "parquet.put_bytes = put\n",
        encoding="utf-8",
    )
    env = {**os.environ, "PYTHONPATH": str(hooks)}
    r = subprocess.run(
        [str(BIN / "corpus"), "index", "--kb", "tiny"], capture_output=True, text=True, env=env, cwd=REPO, timeout=900
    )
    assert r.returncode != 0, r.stderr[-2000:]
    assert read_table(folder).equals(before)  # the previous version, whole
    out = _json("search", "how long are monthly snapshots kept", "--kb", "tiny")
    assert "12 months" in out["results"][0]["text"]  # type: ignore[index]

    [again] = _json("index", "--kb", "tiny")  # type: ignore[misc]
    assert again["strategy_version"] == v1
    now = read_table(folder)
    assert now.num_rows > before.num_rows and any("on-call" in t for t in now.column("text").to_pylist())
    listed = {p.name for p in partition_files(folder)["data"]}
    assert {p.name for p in folder.glob("*.parquet")} == listed  # the killed run's files are gone
