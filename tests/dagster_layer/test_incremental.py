"""Issue 6 scenarios on three KBs, with real Dagster runs: what ran, what was re-parsed and
re-embedded, which version search uses, rollback, retirement, and that the other KBs'
partitions are untouched."""

from __future__ import annotations

import pytest
from dagster import AssetKey, AssetRecordsFilter, instance_for_test

from assets.definitions import build_definitions
from assets.runner import backfill_strategy, index_kb
from corpus_pipeline.chunking import registry
from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.store import parquet
from corpus_pipeline.store.lance import open_search_table
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.parquet import read_manifest, read_partition
from corpus_pipeline.store.versions import active_version, known_versions, register_version, set_active

pytestmark = pytest.mark.slow

PARAS = [
    "Backups run every night at 01:00 and keep thirty daily copies of each server.",
    "Restores are started from the console; a single file comes back in under a minute.",
    "The appliance encrypts every snapshot with AES-256 before it leaves the server.",
    "Replication to a second site is optional and runs after the nightly backup.",
]


def _search_write(instance, partition: str) -> dict[str, object]:
    """How the latest ``search_index`` materialization of ``partition`` wrote its table."""
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey("search_index"), asset_partitions=[partition]), limit=1
    ).records
    meta = records[0].asset_materialization.metadata
    return {"write": meta["write"].value, "docs_changed": meta["docs_changed"].value}


def _write_kb(home, name: str, plan: str, docs: int = 3) -> None:
    d = home / "kbs" / name
    d.mkdir(parents=True)
    (d / "kb.yaml").write_text(
        f"chunking:\n  plan: '{plan}'\n"
        "  parent: {RECURSIVE: {max_chars: 400, overlap_chars: 40}}\n"
        "  child: {RECURSIVE: {max_chars: 160, overlap_chars: 20}, SLIDING_WINDOW: {chunk_size: 160, chunk_overlap: 20}}\n"
        "retention: {keep_versions: 2}\n"
    )
    for i in range(docs):
        body = "\n\n".join(f"{p} ({name} document {i}, part {j})" for j, p in enumerate(PARAS))
        (d / f"doc{i}.md").write_text(f"# {name} document {i}\n\n{body}\n")


@pytest.fixture
def three_kbs(corpus_home):
    _write_kb(corpus_home, "alpha", "PARENT:RECURSIVE;CHILD:RECURSIVE")
    _write_kb(corpus_home, "beta", "PARENT:RECURSIVE;CHILD:RECURSIVE")
    _write_kb(corpus_home, "gamma", "PARENT:RECURSIVE;CHILD:SLIDING_WINDOW")
    return Layout(corpus_home)


def _index_all(instance, layout, names=("alpha", "beta", "gamma")):
    defs = build_definitions(str(layout.home))
    out = {}
    for n in names:
        kb = resolve_kb(layout.kb_dir(n))
        out[n] = index_kb(defs, instance, layout, kb, register_version(layout, kb), say=lambda s: None)
        assert out[n].status == "ok", out[n].error
    return out


def _run_id(layout, asset, kb, version=None):
    return read_manifest(layout.partition_dir(asset, kb, version)).get("run_id")


def test_only_what_changed_is_rebuilt(three_kbs, monkeypatch):
    layout = three_kbs
    monkeypatch.setattr(parquet, "DOCS_PER_FILE", 1)  # a Parquet file per document: edits are visible
    with instance_for_test() as instance:
        first = _index_all(instance, layout)
        assert all(s.documents_parsed == 3 and len(s.partitions_run) == 2 for s in first.values())
        v = {n: s.strategy_version for n, s in first.items()}
        chunks = {n: s.child_chunks for n, s in first.items()}

        # 1. Nothing changed: no run at all.
        again = _index_all(instance, layout)
        assert all(s.up_to_date and s.partitions_run == [] for s in again.values())

        # 2. alpha's child chunking changes: only alpha|new runs; nothing is re-parsed; beta
        #    and gamma are untouched; only chunk texts never seen before are embedded.
        beta_run = _run_id(layout, "child_chunks", "beta", v["beta"])
        (layout.kb_dir("alpha") / "kb.yaml").write_text(
            (layout.kb_dir("alpha") / "kb.yaml").read_text().replace("max_chars: 160", "max_chars: 300")
        )
        changed = _index_all(instance, layout)
        a = changed["alpha"]
        v2 = a.strategy_version
        assert v2 != v["alpha"] and a.partitions_run == [f"alpha|{v2}"]
        assert a.documents_parsed == 0 and a.documents_reused == 3
        assert a.embedded + a.reused == a.child_chunks and a.embedded > 0
        assert changed["beta"].up_to_date and changed["gamma"].up_to_date
        assert _run_id(layout, "child_chunks", "beta", v["beta"]) == beta_run
        assert active_version(layout, "alpha") == v2
        assert sorted(known_versions(layout, "alpha")) == sorted([v["alpha"], v2])

        # 2b. kb.yaml reverted to the first (built) configuration: nothing runs, but search
        #     must serve what kb.yaml says again; forward again the same way.
        yaml = layout.kb_dir("alpha") / "kb.yaml"
        yaml.write_text(yaml.read_text().replace("max_chars: 300", "max_chars: 160"))
        reverted = _index_all(instance, layout, ("alpha",))["alpha"]
        assert reverted.strategy_version == v["alpha"] and reverted.up_to_date and reverted.partitions_run == []
        assert reverted.active_version == v["alpha"] == active_version(layout, "alpha")
        yaml.write_text(yaml.read_text().replace("max_chars: 160", "max_chars: 300"))
        forward = _index_all(instance, layout, ("alpha",))["alpha"]
        assert forward.partitions_run == [] and active_version(layout, "alpha") == v2

        # 3. Rollback: switch search back to the old version, then forward again.
        set_active(layout, "alpha", v["alpha"])
        assert open_search_table(layout, "alpha", v["alpha"]).count_rows() == chunks["alpha"]
        set_active(layout, "alpha", v2)

        # 4. One document of beta edited: one parsed, one re-chunked, the rest reused.
        doc = layout.kb_dir("beta") / "doc1.md"
        doc.write_text(doc.read_text().replace("thirty daily copies", "forty-five daily copies"))
        edited = _index_all(instance, layout)["beta"]
        assert (edited.documents_parsed, edited.documents_reused) == (1, 2)
        assert edited.documents_chunked == 1
        assert 0 < edited.embedded < edited.child_chunks
        assert edited.partitions_run == ["beta", f"beta|{v['beta']}"]
        # ... and the search table got that document's rows only (issue 16: writes follow the change)
        assert _search_write(instance, f"beta|{v['beta']}") == {"write": "merge", "docs_changed": 1}
        # ... and each Parquet partition got one new file, the edited document's
        for asset, version in [("documents", None), ("parent_blocks", v["beta"]), ("child_chunks", v["beta"])]:
            m = read_manifest(layout.partition_dir(asset, "beta", version))
            assert m["written"]["files"] == 1 and len(m["files"]["data"]) == 3, (asset, m["written"])

        # 5. One document of beta deleted: its rows leave Parquet and LanceDB.
        (layout.kb_dir("beta") / "doc2.md").unlink()
        deleted = _index_all(instance, layout)["beta"]
        assert deleted.documents == 2 and deleted.embedded == 0
        rows = read_partition(layout.partition_dir("child_chunks", "beta", v["beta"])).column("doc_path").to_pylist()
        assert "doc2.md" not in rows and set(rows) == {"doc0.md", "doc1.md"}
        table = open_search_table(layout, "beta", v["beta"]).to_arrow()
        assert "doc2.md" not in table.column("doc_path").to_pylist() and table.num_rows == len(rows)
        assert _search_write(instance, f"beta|{v['beta']}") == {"write": "merge", "docs_changed": 1}

        # 6. A strategy upgrade: bumping SLIDING_WINDOW's code version changes only gamma's
        #    version; the backfill builds gamma|new and nothing else.
        monkeypatch.setattr(registry.get("SLIDING_WINDOW"), "version", "v99")
        kbs = [resolve_kb(layout.kb_dir(n)) for n in ("alpha", "beta", "gamma")]
        upgraded = backfill_strategy(layout, kbs, "SLIDING_WINDOW", say=lambda s: None)
        assert [s.kb for s in upgraded] == ["gamma"]
        g = upgraded[0]
        assert g.strategy_version != v["gamma"] and g.partitions_run == [f"gamma|{g.strategy_version}"]
        assert g.documents_parsed == 0 and g.embedded == 0  # same texts: every vector is reused
        assert active_version(layout, "gamma") == g.strategy_version
        assert {n: register_version(layout, resolve_kb(layout.kb_dir(n))) for n in ("alpha", "beta")} == {
            "alpha": v2,
            "beta": v["beta"],
        }


def test_versions_past_the_retention_count_are_retired(three_kbs):
    layout = three_kbs
    kb_yaml = layout.kb_dir("alpha") / "kb.yaml"
    built = []
    with instance_for_test() as instance:
        for size in (160, 200, 240):
            kb_yaml.write_text(
                kb_yaml.read_text()
                .replace("max_chars: 160", f"max_chars: {size}")
                .replace("max_chars: 200", f"max_chars: {size}")
            )
            built.append(_index_all(instance, layout, names=("alpha",))["alpha"].strategy_version)
        assert len(set(built)) == 3
        assert sorted(known_versions(layout, "alpha")) == sorted(built[1:])
        assert not layout.partition_dir("child_chunks", "alpha", built[0]).exists()
        assert layout.partition_dir("child_chunks", "alpha", built[1]).exists()
        with pytest.raises(Exception, match="no search table"):
            open_search_table(layout, "alpha", built[0])
        assert not instance.has_dynamic_partition("strategy_version", built[0])
