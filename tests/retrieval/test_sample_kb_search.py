"""Search and evaluation on the bundled Chinese sample KB, indexed through Dagster into a
temporary CORPUS_HOME: Chinese questions must be answered by the keyword channel (the
default embedding model turns most Chinese characters into [UNK])."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from dagster import instance_for_test, materialize

from assets.definitions import build_definitions
from assets.evaluation import retrieval_eval
from assets.partitions import kb_version_key
from assets.runner import index_kb
from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.retrieval import search_kb
from corpus_pipeline.retrieval.evaluation import evaluate_version
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.versions import register_version
from resources import CorpusResource

pytestmark = pytest.mark.slow
SAMPLE = Path(__file__).resolve().parents[2] / "data" / "kbs" / "ops-runbook-zh"
MODEL = "all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def zh_kb(tmp_path_factory):
    home = tmp_path_factory.mktemp("corpus")
    shutil.copytree(SAMPLE, home / "kbs" / "ops-runbook-zh")
    # Children small enough for the model's 256-token window (Chinese is ~1 token a char),
    # so the blocking token-limit check passes; images are not what this tests (OCR is slow).
    (home / "kbs" / "ops-runbook-zh" / "kb.yaml").write_text(
        "chunking:\n"
        "  plan: PARENT:RECURSIVE;CHILD:RECURSIVE\n"
        "  parent: {RECURSIVE: {max_chars: 1200, overlap_chars: 100}}\n"
        "  child: {RECURSIVE: {max_chars: 220, overlap_chars: 40}}\n"
        "vision: {enabled: false, ocr: false}\n",
        encoding="utf-8",
    )
    layout = Layout(home)
    kb = resolve_kb(layout.kb_dir("ops-runbook-zh"))
    version = register_version(layout, kb)
    with instance_for_test() as instance:
        summary = index_kb(build_definitions(str(home)), instance, layout, kb, version, say=lambda s: None)
        assert summary.status == "ok", summary.error
        yield layout, version, instance


@pytest.mark.parametrize(
    ("query", "doc", "must_contain"),
    [
        ("磁盘使用率超过多少算严重告警", "04-disk-space-alert.txt", "严重（P2）"),
        ("回滚决策要在多长时间内完成", "05-release-rollback.html", "15 分钟内"),
        ("连接跟踪表满了怎么处理", "08-network-latency.txt", "nf_conntrack_max"),
        ("值班补贴", "06-alert-levels-oncall.md", "1,500 元"),
        ("堆外内存泄漏", "02-memory-leak.docx", "NativeMemoryTracking"),
    ],
)
def test_chinese_questions_find_their_runbook_through_the_keyword_channel(zh_kb, query, doc, must_contain):
    layout, version, _ = zh_kb
    res = search_kb(layout, "ops-runbook-zh", version, query, embedding=MODEL)
    top = res.results[0]
    assert top.doc_path == doc and must_contain in top.text
    assert "keyword" in top.channels
    assert all(h.chunk_id for h in top.hits)


def test_the_bundled_questions_are_answered_within_the_five_returned_parents(zh_kb):
    layout, version, _ = zh_kb
    kb = resolve_kb(layout.kb_dir("ops-runbook-zh"))
    report = evaluate_version(layout, kb, version, SAMPLE / "questions.jsonl")
    s = report.summary()
    assert report.notes == []  # every reference span matches the canonical text exactly
    assert s["questions"] == 15 and s["hit_rate"] >= 0.9 and s["parent_recall"] >= 0.9
    assert 0 < s["parent_iou"] <= s["child_iou"] <= 1  # children are tighter spans than parents


def test_the_retrieval_eval_asset_records_the_scores_of_its_partition(zh_kb):
    layout, version, instance = zh_kb
    result = materialize(
        [retrieval_eval],
        partition_key=kb_version_key("ops-runbook-zh", version),
        resources={"corpus": CorpusResource(home=str(layout.home))},
        instance=instance,
    )
    [mat] = result.asset_materializations_for_node("retrieval_eval")
    assert mat.metadata["questions"].value == 15 and mat.metadata["hit_rate"].value >= 0.9
    assert (layout.partition_dir("retrieval_eval", "ops-runbook-zh", version) / "report.json").exists()
