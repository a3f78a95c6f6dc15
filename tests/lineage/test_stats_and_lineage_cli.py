"""``corpus stats`` and ``corpus lineage`` through the CLI on a tiny KB chunked by real
Dagster runs (parse, then parent_blocks and child_chunks) at two strategy versions."""

from __future__ import annotations

import json

import duckdb
import pytest
from dagster import AssetKey, instance_for_test

from assets.definitions import build_definitions
from assets.partitions import kb_version_key
from assets.runner import register_partitions
from corpus_pipeline.cli import main
from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.versions import register_version

pytestmark = pytest.mark.slow

DOC = (
    "# Harbor backup appliance\n\n"
    "Harbor keeps encrypted copies of your servers. The web console listens on port 8443.\n\n"
    "## Restoring a file\n\n"
    "Open the console, choose the snapshot, and press Restore. Restores of files under 2 GB\n"
    "finish in less than a minute. Larger restores run in the background.\n\n"
    "## Retention\n\n"
    "Daily snapshots are kept for 30 days and monthly snapshots for 12 months.\n"
)
PLAN = (
    "chunking:\n"
    "  plan: PARENT:RECURSIVE;CHILD:RECURSIVE\n"
    "  parent: {{RECURSIVE: {{max_chars: 300, overlap_chars: 40}}}}\n"
    "  child: {{RECURSIVE: {{max_chars: {child}, overlap_chars: 20}}}}\n"
)


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A CORPUS_HOME with KB ``tiny`` chunked at two versions (child max 120, then 200)."""
    root = tmp_path_factory.mktemp("lineage") / "corpus"
    kb_dir = root / "kbs" / "tiny"
    kb_dir.mkdir(parents=True)
    (kb_dir / "harbor.md").write_text(DOC, encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp, instance_for_test() as instance:
        mp.setenv("CORPUS_HOME", str(root))
        mp.setenv("DAGSTER_HOME", str(root / "dagster"))
        layout = Layout(root)
        defs = build_definitions(str(root))
        versions, runs = [], []
        for i, child in enumerate((120, 200)):
            (kb_dir / "kb.yaml").write_text(PLAN.format(child=child), encoding="utf-8")
            kb = resolve_kb(kb_dir)
            version = register_version(layout, kb)
            register_partitions(instance, "tiny", version)
            if i == 0:
                assert (
                    defs.resolve_job_def("parse_kb").execute_in_process(partition_key="tiny", instance=instance).success
                )
            r = defs.resolve_job_def("index_version").execute_in_process(
                partition_key=kb_version_key("tiny", version),
                instance=instance,
                asset_selection=[AssetKey("parent_blocks"), AssetKey("child_chunks")],
            )
            assert r.success
            versions.append(version)
            runs.append(r.run_id)
        yield root, versions, runs


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_stats_json_gives_counts_and_size_quantiles_of_one_version(home, capsys):
    root, (v1, _v2), _ = home
    code, out, err = _cli(capsys, "stats", "--kb", "tiny", "--version", v1, "--json")
    assert code == 0, err
    s = json.loads(out)
    assert (s["kb"], s["strategy_version"], s["active"]) == ("tiny", v1, False)
    for table in ("child_chunks", "parent_blocks"):
        assert s[table]["count"] > 0
        for col in ("char_count", "token_count"):
            q = s[table][col]
            assert q["min"] <= q["p5"] <= q["p50"] <= q["p95"] <= q["max"]
    assert s["child_chunks"]["char_count"]["max"] <= 120
    assert s["child_chunks"]["by_chunk_type"] == {"TEXT": s["child_chunks"]["count"]}
    assert s["child_chunks"]["over_token_limit"] == 0
    n = (
        duckdb.connect()
        .execute(
            f"select count(*) from read_parquet('{root}/warehouse/child_chunks/kb=tiny/strategy_version={v1}/*.parquet')"
        )
        .fetchone()[0]
    )
    assert s["child_chunks"]["count"] == n


def test_stats_puts_two_versions_side_by_side(home, capsys):
    _, (v1, v2), _ = home
    code, out, err = _cli(capsys, "stats", "--kb", "tiny", "--version", v1, "--version", v2, "--json")
    assert code == 0, err
    both = json.loads(out)
    assert both["strategy_versions"] == [v1, v2]
    a, b = both["versions"]
    assert b["child_chunks"]["count"] < a["child_chunks"]["count"]  # bigger children, fewer of them
    assert both["delta"]["child_chunks"]["count"] == b["child_chunks"]["count"] - a["child_chunks"]["count"]
    code, out, _ = _cli(capsys, "stats", "--kb", "tiny", "--compare")
    assert code == 0 and v1 in out and v2 in out and "char_count p50" in out and "token_count" in out


def test_stats_of_an_unknown_kb_or_version_is_an_error_on_stderr(home, capsys):
    code, out, err = _cli(capsys, "stats", "--kb", "nosuchkb")
    assert code == 2 and out == "" and "no knowledge base 'nosuchkb'" in err and "Knowledge bases here: tiny" in err
    code, out, err = _cli(capsys, "stats", "--kb", "tiny", "--version", "p2-c2-00000000")
    assert code == 1 and "versions with data" in err


def test_lineage_traces_a_chunk_to_its_document_parent_blocks_plan_and_run(home, capsys):
    root, (v1, _), runs = home
    row = (
        duckdb.connect()
        .execute(
            f"select chunk_id, text, parent_id from read_parquet('{root}/warehouse/child_chunks/kb=tiny/strategy_version={v1}/*.parquet') "
            "where text like '%monthly snapshots%'"
        )
        .fetchone()
    )
    chunk_id, text, parent_id = row
    code, out, err = _cli(capsys, "lineage", chunk_id, "--json")
    assert code == 0, err
    info = json.loads(out)
    assert (info["kb"], info["strategy_version"], info["chunk"]["text"]) == ("tiny", v1, text)
    assert info["parent"]["parent_id"] == parent_id
    doc = info["document"]
    assert doc["path"] == "harbor.md" and doc["offsets_verified"] is True
    assert doc["excerpt"]["span"] == text and f"«{text}»" in doc["excerpt"]["highlighted"]
    assert any(b["block_type"] == "TEXT" and "monthly" in b["text_start"] for b in info["blocks"])
    assert info["plan"]["snapshot"] == "PARENT:RECURSIVE;CHILD:RECURSIVE"
    assert info["plan"]["child"][0]["config"]["max_chars"] == 120
    assert info["strategy"]["name"] == "RECURSIVE" and info["fallbacks"] == []
    assert info["run"]["run_id"] == runs[0] and info["run"]["written_at"]

    code, out, err = _cli(capsys, "lineage", chunk_id[:10])  # a unique prefix, as text
    assert code == 0, err
    assert f"«{text.splitlines()[0]}" in out and runs[0] in out and "harbor.md" in out


def test_lineage_of_an_unknown_chunk_is_an_error_on_stderr(home, capsys):
    code, out, err = _cli(capsys, "lineage", "0" * 24)
    assert code == 1 and out == "" and "was not found" in err
