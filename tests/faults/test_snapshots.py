"""Readers read one published snapshot: an update of the active version killed at any point
changes nothing any reader sees, and a version retired while the server reads it is never
an error.

``corpus index`` runs as users run it (the CLI, a Dagster run, step processes) and is killed
(SIGKILL) by a ``sitecustomize`` hook at a chosen write: after the version's child chunks and
parents were replaced (at the embeddings' manifest), or after everything including the
search table was written (at the snapshot's own file). Meanwhile a server (``corpus serve``'s
app, in this process) answers searches, lineage and document views in a loop: every chunk
id a search returns must be found by ``/chunks`` and in its document's view, with the same
text, and no request may fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from support.served import Served

from corpus_pipeline.api import KB
from corpus_pipeline.errors import ConfigError
from corpus_pipeline.lineage import trace_chunk
from corpus_pipeline.serve.app import create_app
from corpus_pipeline.store.lance import open_search_table
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.parquet import PINNED, partition_files, pin_manifest, read_manifest, write_partition
from corpus_pipeline.store.snapshots import (
    ASSETS,
    SnapshotNotFound,
    asset_folder,
    published_table_version,
    resolve,
)
from corpus_pipeline.store.versions import active_version, known_versions
from faults.test_crash import WORDS

pytestmark = pytest.mark.slow
CORPUS = str(Path(sys.executable).with_name("corpus"))
QUERIES = ["how long are snapshots kept", "which port does the console use", "nightly replica policy"]
YAML = (
    "chunking:\n  plan: PARENT:RECURSIVE;CHILD:RECURSIVE\n"
    "  parent: {{RECURSIVE: {{max_chars: 600, overlap_chars: 0}}}}\n"
    "  child: {{RECURSIVE: {{max_chars: {child}, overlap_chars: 20}}}}\n"
    "retention: {{keep_versions: 1}}\n"
)


def _env(home: Path, hooks: Path | None = None) -> dict[str, str]:
    env = {**os.environ, "CORPUS_HOME": str(home), "DAGSTER_HOME": str(home / "dagster"), "HF_HUB_OFFLINE": "1"}
    if hooks is not None:
        env["PYTHONPATH"] = str(hooks)
    return env


def _index(home: Path, hooks: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CORPUS, "index", "--kb", "ops"], env=_env(home, hooks), capture_output=True, text=True, timeout=900
    )


def _write_kb(home: Path, child: int = 200) -> Path:
    d = home / "kbs" / "ops"
    d.mkdir(parents=True, exist_ok=True)
    (d / "kb.yaml").write_text(YAML.format(child=child))
    for i in range(6):
        paras = [" ".join(WORDS[(i * 7 + j * 3 + k) % len(WORDS)] for k in range(30)) + "." for j in range(8)]
        (d / f"doc{i}.md").write_text(f"# Runbook {i}\n\n" + "\n\n".join(paras) + "\n")
    return d


def _kill_hook(home: Path, where: str) -> Path:
    """A ``sitecustomize`` that SIGKILLs whichever process of the run writes ``where``: the
    manifest of an asset's partition, or (``snapshot``) the snapshot file."""
    hooks = home / f"hooks-{where}"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(
        "import os, signal\n"
        "from corpus_pipeline.store import files, parquet\n"
        "real = files.put_bytes\n"
        "def put(path, data):\n"
        f"    hit = {where!r} == 'snapshot' and path.parent.name == 'snapshots'\n"
        f"    hit = hit or (path.name == parquet.MANIFEST and '/{where}/' in str(path))\n"
        "    if hit:\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    real(path, data)\n"
        "files.put_bytes = put\n"
        "parquet.put_bytes = put\n",
        encoding="utf-8",
    )
    return hooks


def _pause_hook(home: Path, seconds: float = 6.0) -> Path:
    """A ``sitecustomize`` that makes the run wait ``seconds`` just before its snapshot's
    switch (everything else written, the table's history pruned)."""
    hooks = home / "hooks-pause"
    hooks.mkdir(exist_ok=True)
    (hooks / "sitecustomize.py").write_text(
        "import time\n"
        "from corpus_pipeline.store import files\n"
        "real = files.put_bytes\n"
        "def put(path, data):\n"
        "    if path.parent.name == 'snapshots':\n"
        f"        time.sleep({seconds})\n"
        "    real(path, data)\n"
        "files.put_bytes = put\n",
        encoding="utf-8",
    )
    return hooks


class _Readers:
    """Searches, lineage and document views in a loop against the server, in a thread; each
    round's answers checked against each other (strictly while ``strict``)."""

    def __init__(self, url: str) -> None:
        self.url, self.strict = url, True
        self.failures: list[str] = []
        self.rounds = 0
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=120) as c:
            while not self._stop.is_set():
                try:
                    for q in QUERIES:
                        self._round(c, q)
                except httpx.HTTPError as exc:  # (a failure to record, never a dead thread)
                    self.failures.append(f"request failed: {exc!r}")
                self.rounds += 1

    def wait(self, rounds: int = 1, timeout: float = 600) -> None:
        """Until ``rounds`` more rounds were made (bounded: a stuck reader fails the test)."""
        start, t0 = self.rounds, time.monotonic()
        while self.rounds < start + rounds:
            assert self.thread.is_alive() and time.monotonic() - t0 < timeout, "the readers stopped"
            time.sleep(0.2)

    def _round(self, c: httpx.Client, q: str) -> None:
        r = c.post("/search", json={"query": q, "kb": "ops", "top_k": 3})
        if r.status_code != 200:
            self.failures.append(f"search {r.status_code}: {r.text[:300]}")
            return
        data = r.json()
        for res in data["results"]:
            for hit in res["hits"]:
                t = c.get(f"/chunks/{hit['chunk_id']}")
                if t.status_code >= 500 or (self.strict and t.status_code != 200):
                    self.failures.append(f"/chunks/{hit['chunk_id']} {t.status_code}: {t.text[:300]}")
                    continue
                if t.status_code != 200:
                    continue
                trace = t.json()
                if self.strict and not trace["chunk"]["text"].startswith(hit["text"].rstrip("…")):
                    self.failures.append(f"{hit['chunk_id']}: lineage's text is not the search's")
                doc = c.get(
                    f"/ui/api/kbs/ops/documents/{trace['chunk']['doc_id']}",
                    params={"version": data["strategy_version"]},
                )
                if doc.status_code >= 500 or (self.strict and doc.status_code != 200):
                    self.failures.append(f"document view {doc.status_code}: {doc.text[:300]}")
                    continue
                if doc.status_code != 200:
                    continue
                ids = {k["chunk_id"] for p in doc.json()["parents"] for k in p["children"]}
                if self.strict and hit["chunk_id"] not in ids:
                    self.failures.append(f"{hit['chunk_id']} is not in its document's view")

    def __enter__(self) -> _Readers:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.thread.join(300)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "corpus"
    _write_kb(home)
    r = _index(home)
    assert r.returncode == 0, r.stderr[-3000:]
    return home


def _answers(kb: KB, version: str | None = None) -> list[list[tuple[str, str]]]:
    """(chunk id, text) of each hit of each of ``QUERIES`` (the active version, or ``version``)."""
    out = []
    for q in QUERIES:
        result = kb.search(q, top_k=3, version=version)
        out.append([(h.chunk_id, h.text) for r in result.results for h in r.hits])
    return out


def _files_kept_are_the_snapshots(layout: Layout, kb: str) -> None:
    """Each partition holds the files its current manifest and the published snapshot list:
    nothing a killed or superseded write left."""
    snap = resolve(layout, kb, active_version(layout, kb) or "")
    for asset in ASSETS:
        folder = asset_folder(layout, asset, kb, snap.version)
        if not folder.is_dir():
            continue
        listed = {p.name for names in partition_files(folder).values() for p in names}
        listed |= {p.name for names in snap._listing(asset)[0].values() for p in names}
        assert {p.name for p in folder.glob("*.parquet")} == listed, asset
        pin = snap.pinned.get(asset)
        assert {p.name for p in (folder / PINNED).glob("*.json")} == ({pin} if pin else set()), asset


@pytest.mark.parametrize("where", ["child_chunks", "chunk_embeddings", "snapshot"])
def test_an_update_killed_at_any_write_changes_nothing_a_reader_sees(home: Path, where: str) -> None:
    layout = Layout.at(home)
    v1 = active_version(layout, "ops")
    assert v1 is not None
    kb = KB("ops", home)
    before = _answers(kb)
    snap = resolve(layout, "ops", v1)
    (home / "kbs" / "ops" / "doc0.md").write_text("# Runbook 0\n\nSnapshots are kept for 90 days now.\n")
    (home / "kbs" / "ops" / "doc1.md").unlink()

    with Served(create_app(home, api_keys=[], rate_per_s=0)) as url, _Readers(url) as readers:
        readers.wait()
        r = _index(home, _kill_hook(home, where))
        assert r.returncode != 0, r.stderr[-2000:]
        readers.wait()
        assert readers.failures == []
        # The killed run did replace some of the version's partitions (the test can fail) ...
        replaced = "parent_blocks" if where == "child_chunks" else "child_chunks"
        assert read_manifest(asset_folder(layout, replaced, "ops", v1)) != snap.manifest(replaced)
        assert read_manifest(asset_folder(layout, "parsed_blocks", "ops", v1)) != snap.manifest("parsed_blocks")
        if where == "snapshot":
            assert int(open_search_table(layout, "ops", v1).version) != published_table_version(layout, "ops", v1)
        # ... and no reader sees it: the same snapshot, the same answers, each hit traced whole.
        assert resolve(layout, "ops", v1).id == snap.id
        assert _answers(kb) == before == _answers(KB("ops", home))
        for hits in before:
            for chunk_id, text in hits:
                assert trace_chunk(layout, chunk_id)["chunk"]["text"] == text
        # The next run writes again (its table write prunes what no tag keeps) and pauses
        # before its switch: the readers of the old snapshot read on, never an error.
        readers.strict = False  # (after the switch the edited documents' old chunks are gone)
        r = _index(home, _pause_hook(home))
        assert r.returncode == 0, r.stderr[-3000:]
        readers.wait()
    assert readers.failures == []

    # The next run published the update, and left no file of the killed one behind.
    after = kb.search("how long are snapshots kept", top_k=3)
    assert "90 days" in after.results[0].text
    assert not any(r.doc_path == "doc1.md" for r in kb.search("nightly replica policy", top_k=5).results)
    _files_kept_are_the_snapshots(layout, "ops")


def test_a_version_retired_while_the_server_reads_it_is_never_an_error(home: Path) -> None:
    layout = Layout.at(home)
    v1 = active_version(layout, "ops")
    kb = KB("ops", home)
    old = kb.search(QUERIES[0], top_k=3)  # (its searcher stays open on v1)
    old_chunk = old.results[0].hits[0].chunk_id
    _write_kb(home, child=150)  # another strategy version; keep_versions: 1 retires v1

    with Served(create_app(home, api_keys=[], rate_per_s=0)) as url, _Readers(url) as readers:
        readers.strict = False  # (the chunks of v1 go with it: a 404 then, never a 5xx)
        readers.wait()
        r = _index(home)
        assert r.returncode == 0, r.stderr[-3000:]
        readers.wait(2)
        v2 = active_version(layout, "ops")
        assert v2 != v1 and known_versions(layout, "ops") == [v2]  # v1 retired
        with httpx.Client(base_url=url, timeout=120) as c:
            gone = [
                c.post("/search", json={"query": QUERIES[0], "kb": "ops", "version": v1}),
                c.get(f"/chunks/{old_chunk}"),
                c.get("/ui/api/kbs/ops/documents", params={"version": v1}),
            ]
            strict_after = _Readers(url)
            for q in QUERIES:
                strict_after._round(c, q)  # (on v2 alone now: strictly consistent again)
    assert readers.failures == [] and strict_after.failures == []
    for resp in gone:
        assert 400 <= resp.status_code < 500, resp.text
        assert str(home) not in resp.text and ".rs" not in resp.text

    # The application's open KB moves to the new version by itself.
    result = kb.search(QUERIES[0], top_k=3)
    assert result.strategy_version == v2 and result.results
    with pytest.raises(SnapshotNotFound):
        kb.search(QUERIES[0], version=v1)


def test_a_pinned_manifest_keeps_its_files_through_writes_until_released(tmp_path: Path) -> None:
    import pyarrow as pa

    from corpus_pipeline.store.parquet import release_manifests, snapshot_listing

    folder = tmp_path / "child_chunks" / "kb=a"
    first = pa.table({"doc_id": [f"d{i}" for i in range(200)], "text": [f"one {i}" for i in range(200)]})
    second = pa.table({"doc_id": [f"d{i}" for i in range(200)], "text": [f"two {i}" for i in range(200)]})
    write_partition(folder, first)
    pin = pin_manifest(folder)
    assert pin is not None and pin_manifest(folder) == pin  # (once, named by its bytes)
    write_partition(folder, second)
    files, manifest = snapshot_listing(folder, pin)
    from corpus_pipeline.store.parquet import listed_dataset

    assert listed_dataset(folder, "data", files, manifest).to_table().equals(first)  # the pinned rows, whole
    write_partition(folder, first.slice(0, 10))  # a third write keeps them too (the second's go)
    assert listed_dataset(folder, "data", files, manifest).to_table().equals(first)
    pinned = {p.name for p in files["data"]}
    assert {p.name for p in folder.glob("*.parquet")} == pinned | {p.name for p in partition_files(folder)["data"]}
    assert release_manifests(folder, {pin}) == 0  # (still pinned)
    assert release_manifests(folder, set()) == len(pinned - {p.name for p in partition_files(folder)["data"]}) > 0
    assert {p.name for p in folder.glob("*.parquet")} == {p.name for p in partition_files(folder)["data"]}
    assert not list((folder / PINNED).glob("*.json"))


def test_maintenance_moves_the_snapshot_to_the_compacted_table(home: Path) -> None:
    from corpus_pipeline.indexing.publish import maintain_kb

    layout = Layout.at(home)
    v = active_version(layout, "ops")
    assert v is not None
    kb = KB("ops", home)
    before = _answers(kb)
    published = published_table_version(layout, "ops", v)
    assert published == int(open_search_table(layout, "ops", v).version)
    maintain_kb(layout, "ops")
    tbl = open_search_table(layout, "ops", v)
    moved = published_table_version(layout, "ops", v)
    if moved != published:  # (maintenance committed something: readers read it now)
        assert moved == int(tbl.version)
    assert [x["version"] for x in tbl.list_versions()] == [moved]
    assert _answers(kb) == before


def test_a_kb_built_before_snapshots_is_read_as_it_is_and_published_by_its_next_run(home: Path) -> None:
    layout = Layout.at(home)
    v1 = active_version(layout, "ops")
    assert v1 is not None
    kb = KB("ops", home)
    before = _answers(kb)
    # as an earlier release left it: no snapshot file, no pinned manifest
    for f in layout.snapshot_dir("ops").glob("*.json"):
        f.unlink()
    for asset in ASSETS:
        for p in (asset_folder(layout, asset, "ops", v1) / PINNED).glob("*.json"):
            p.unlink()
    assert resolve(layout, "ops", v1).live
    assert _answers(KB("ops", home)) == before
    (home / "kbs" / "ops" / "kb.yaml").write_text(
        YAML.format(child=150).replace("keep_versions: 1", "keep_versions: 3")
    )
    r = _index(home)
    assert r.returncode == 0, r.stderr[-3000:]
    v2 = active_version(layout, "ops")
    assert v2 != v1
    # the first publish published the earlier build as it was: v1 stays readable
    snap = resolve(layout, "ops", v1)
    assert not snap.live and snap.has("child_chunks")
    assert [[c for c, _ in hits] for hits in _answers(kb, v1)] == [[c for c, _ in hits] for hits in before]
    assert kb.activate(v1) == v2  # (rollback through the library, as `corpus activate` does)
    assert kb.search(QUERIES[0], top_k=3).strategy_version == v1
    with pytest.raises(ConfigError, match="not a version"):
        kb.activate("p9-c9-00000000")
    with pytest.raises(SnapshotNotFound):
        resolve(layout, "ops", "p9-c9-00000000")


def test_a_snapshot_file_lists_what_its_readers_read(home: Path) -> None:
    layout = Layout.at(home)
    v = active_version(layout, "ops")
    assert v is not None
    data = json.loads(layout.snapshot_file("ops", v).read_text())
    assert set(data["pinned"]) == set(ASSETS)
    assert data["table_version"] == published_table_version(layout, "ops", v)
    tags = open_search_table(layout, "ops", v).to_lance().tags.list()
    assert tags["published"]["version"] == data["table_version"]
