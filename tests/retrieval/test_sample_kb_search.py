"""Search and evaluation on the bundled Chinese sample KB, indexed through Dagster into a
temporary CORPUS_HOME with its own kb.yaml (images off: OCR is not what this tests):
Chinese questions find their runbook, both channels take part (the default embedding model,
multilingual-e5-small, reads Chinese), and the README demo's question ranks the CPU runbook
first."""

from __future__ import annotations

import json
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


@pytest.fixture(scope="module")
def zh_kb(tmp_path_factory):
    home = tmp_path_factory.mktemp("corpus")
    shutil.copytree(SAMPLE, home / "kbs" / "ops-runbook-zh")
    kb_yaml = home / "kbs" / "ops-runbook-zh" / "kb.yaml"
    kb_yaml.write_text(kb_yaml.read_text(encoding="utf-8") + "vision: {enabled: false, ocr: false}\n", encoding="utf-8")
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
        ("CPU 使用率持续超过 85% 怎么排查", "01-cpu-high-load.md", "85%"),  # the README demo's question
    ],
)
def test_chinese_questions_find_their_runbook_on_both_channels(zh_kb, query, doc, must_contain):
    layout, version, _ = zh_kb
    res = search_kb(layout, "ops-runbook-zh", version, query)
    top = res.results[0]
    assert top.doc_path == doc and must_contain in top.text
    assert set(top.channels) == {"vector", "keyword"}
    assert all(h.chunk_id for h in top.hits)
    assert res.warnings == []  # the vector channel did not abstain


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


def _cli_search(layout, monkeypatch, capsys, *args):
    from corpus_pipeline.cli import main

    monkeypatch.setenv("CORPUS_HOME", str(layout.home))
    code = main(["search", "CPU 使用率持续超过 85% 怎么排查", "--kb", "ops-runbook-zh", *args])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out) if "--json" in args else out.out


def test_corpus_search_filters_and_scores_on_the_indexed_kb(zh_kb, monkeypatch, capsys):
    layout, _, _ = zh_kb
    plain = _cli_search(layout, monkeypatch, capsys, "--json")
    assert plain["results"][0]["doc_path"] == "01-cpu-high-load.md" and plain["filters"] is None
    hit = plain["results"][0]["hits"][0]
    assert set(hit["found_by"]) == {"vector", "keyword"} and 0 < hit["relevance"] <= 1
    assert set(hit["found_by"]["vector"]) == {"cosine", "rank"} and set(hit["found_by"]["keyword"]) == {"bm25", "rank"}
    assert all(r["relevance"] == max(h["relevance"] for h in r["hits"]) for r in plain["results"])

    # A format the top answer is not in: results of that format only (found inside the channels).
    txt = _cli_search(layout, monkeypatch, capsys, "--json", "--format", "txt")
    assert txt["results"] and {r["doc_path"] for r in txt["results"]} <= {
        "04-disk-space-alert.txt",
        "08-network-latency.txt",
    }
    assert txt["filters"] == {"format": ["text"]}
    two = _cli_search(layout, monkeypatch, capsys, "--json", "--path", "0[89]-*", "--format", "docx", "--format", "txt")
    assert two["results"] and {r["doc_path"] for r in two["results"]} <= {
        "08-network-latency.txt",
        "09-kafka-consumer-lag.docx",
    }

    section = plain["results"][0]["section_path"].split(" > ")[0]
    by_section = _cli_search(layout, monkeypatch, capsys, "--json", "--section", section, "--type", "text")
    assert by_section["results"]
    assert all(
        r["section_path"] == section or r["section_path"].startswith(section + " > ") for r in by_section["results"]
    )
    assert all(h["chunk_type"] == "TEXT" for r in by_section["results"] for h in r["hits"])

    high = _cli_search(layout, monkeypatch, capsys, "--json", "--min-score", "0.5")
    assert all(h["relevance"] >= 0.5 for r in high["results"] for h in r["hits"])
    assert len([h for r in high["results"] for h in r["hits"]]) < len([h for r in plain["results"] for h in r["hits"]])

    text = _cli_search(layout, monkeypatch, capsys, "--top-k", "2")
    assert "1. relevance 0." in text and "vector #" in text and " cos 0." in text and "bm25 " in text


def test_corpus_search_refuses_a_bad_filter_before_loading_anything(zh_kb, monkeypatch, capsys):
    from corpus_pipeline.cli import main

    layout, _, _ = zh_kb
    monkeypatch.setenv("CORPUS_HOME", str(layout.home))
    assert main(["search", "x", "--kb", "ops-runbook-zh", "--format", "odt", "--min-score", "2"]) == 2
    err = capsys.readouterr().err
    assert "unknown format 'odt'" in err and "score_threshold = 2.0" in err


def test_queries_embedded_in_onnx_runtime_answer_as_torch_does(zh_kb):
    """``search.query_backend`` auto embeds queries in ONNX Runtime on this CPU once the
    model's export is on disk (half the CPU of torch a query, measured in benchmarks/serve):
    the same parents, in the same order, with the same scores to rounding, as torch. A
    search never waits for the export: ``corpus serve`` makes it at its start."""
    from corpus_pipeline.embedding.models import require_model_folder
    from corpus_pipeline.embedding.onnx_backend import export_ready
    from corpus_pipeline.embedding.opening import prepare_query_runtime, query_embedding
    from corpus_pipeline.retrieval import Searcher
    from corpus_pipeline.retrieval.settings import SearchSettings
    from corpus_pipeline.store.versions import version_embedding

    layout, version, _ = zh_kb
    emb = version_embedding(layout, "ops-runbook-zh", version)
    assert emb.backend == "torch"
    if not export_ready(require_model_folder(emb.model)):  # (a fresh machine: no export yet)
        assert query_embedding(emb).backend == "torch"
        assert prepare_query_runtime(emb)
    assert query_embedding(emb).backend == "onnx"  # (CPU, onnxruntime installed, exported)
    assert not prepare_query_runtime(emb)  # (nothing left to do)
    lines = (SAMPLE / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    questions = [json.loads(line)["question"] for line in lines if line.strip()]
    answers = {}
    for backend in ("torch", "auto"):
        s = Searcher(layout, "ops-runbook-zh", version, embedding=emb, settings=SearchSettings(query_backend=backend))
        assert type(s.embedder).__name__ == "SentenceTransformerEmbedder"
        assert s.embedder.backend == ("torch" if backend == "torch" else "onnx")
        answers[backend] = [[(r.parent_id, round(r.score, 4)) for r in s.search(q).results] for q in questions]
    assert answers["auto"] == answers["torch"]


def test_the_query_runtime_never_changes_what_an_int8_or_remote_model_embeds():
    from corpus_pipeline.embedding import EmbeddingConfig
    from corpus_pipeline.embedding.opening import query_embedding

    int8 = EmbeddingConfig(backend="onnx-int8")
    assert query_embedding(int8, "torch") == int8 and query_embedding(int8, "auto") == int8
    remote = EmbeddingConfig(provider="openai", model="text-embedding-3-small")
    assert query_embedding(remote, "onnx") == remote
    assert query_embedding(EmbeddingConfig(), "torch").backend == "torch"
    assert query_embedding(EmbeddingConfig(), "onnx").backend == "onnx"
