"""`corpus index` then `corpus search`, as a user runs them, on a tiny KB; then Dagster's
own CLI materializes a partition that `corpus index` registered."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]


def _run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, env=env, cwd=REPO, timeout=600)


def test_index_then_search_in_english_and_chinese(tiny_kb, corpus_home):
    env = {**os.environ}
    r = _run(str(BIN / "corpus"), "index", "--kb", "tiny", "--json", env=env)
    assert r.returncode == 0, r.stderr
    [summary] = json.loads(r.stdout)
    assert summary["kb"] == "tiny" and summary["documents"] == 2 and summary["failed_documents"] == []
    assert summary["child_chunks"] > 0 and summary["embedded"] == summary["child_chunks"]
    assert "✓ child_chunks" in r.stderr  # progress per asset and partition
    version = summary["strategy_version"]

    r = _run(str(BIN / "corpus"), "search", "how long are monthly snapshots kept", "--kb", "tiny", "--json", env=env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["strategy_version"] == version
    top = out["results"][0]
    assert "12 months" in top["text"] and top["doc_path"] == "harbor.md"
    assert set(top) >= {"parent_id", "score", "text", "doc_path", "start_offset", "end_offset", "hits"}
    assert set(top["hits"][0]) >= {"chunk_id", "score", "channels", "text"}  # chunk ids, for lineage

    r = _run(str(BIN / "corpus"), "search", "线程栈", "--kb", "tiny", "--json", env=env)
    assert r.returncode == 0, r.stderr
    assert any("jstack" in h["text"] for h in json.loads(r.stdout)["results"])

    # Dagster's own CLI can re-materialize the partition corpus index registered.
    r = _run(
        str(BIN / "dagster"),
        "asset",
        "materialize",
        "-m",
        "assets.definitions",
        "--select",
        "child_chunks",
        "--partition",
        f"tiny|{version}",
        env=env,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


def test_an_invalid_config_is_refused_before_anything_is_written(tiny_kb, corpus_home):
    (tiny_kb / "kb.yaml").write_text("chunking:\n  child: {RECURSIVE: {max_chars: 50}}\n")
    r = _run(str(BIN / "corpus"), "index", "--kb", "tiny", env={**os.environ})
    assert r.returncode == 2
    assert "chunking.child.RECURSIVE.max_chars = 50 is out of range: allowed 100..8000" in r.stderr
    assert not (corpus_home / "warehouse").exists() and not (corpus_home / "dagster").exists()


ZH_LONG = (
    "# 交易系统故障排查手册\n\n## 2.3 延迟问题\n\n"
    + "系统在高峰期出现延迟升高的情况，需要运维人员按照以下步骤进行排查和处理。首先检查应用服务器的CPU和内存使用率，"
    "确认是否存在资源瓶颈或者异常进程。其次查看数据库连接池的使用情况，如果活跃连接数长期接近上限，需要扩容或者优化慢查询。"
    * 3
    + "\n\n2.3.1 堆内存溢出\n\n"
    + "出现 OutOfMemoryError 时，先用 jmap 导出堆快照，再用分析工具找到占用最多的对象，确认是缓存没有上限还是连接没有关闭。"
    * 4
    + "\n"
)


def test_a_chinese_kb_sized_in_characters_indexes_with_chunks_cut_to_fit_the_model(corpus_home):
    """1,500 Chinese characters are ~1,100 tokens of the default model (window 507): the children
    are cut again, the WARN check says so, the version is built, activated and searchable
    (issue 12's KB, whose 300 characters overflowed the former default's 254 tokens)."""
    kb = corpus_home / "kbs" / "zh300"
    kb.mkdir()
    head, tail = ZH_LONG.split("\n\n2.3.1")
    (kb / "runbook.md").write_text(head + head.split("\n\n")[-1] * 3 + "\n\n2.3.1" + tail, encoding="utf-8")
    (kb / "kb.yaml").write_text(
        "chunking:\n  plan: 'PARENT:STRUCTURE,RECURSIVE;CHILD:RECURSIVE'\n"
        "  parent: {RECURSIVE: {max_chars: 2200, overlap_chars: 0}}\n"
        "  child: {RECURSIVE: {max_chars: 1500, overlap_chars: 30}}\n",
        encoding="utf-8",
    )
    env = {**os.environ}
    r = _run(str(BIN / "corpus"), "index", "--kb", "zh300", "--json", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    [summary] = json.loads(r.stdout)
    assert summary["status"] == "ok" and summary["active_version"] == summary["strategy_version"]
    assert summary["recut_chunks"] >= 1
    warned = {c["check"]: c for c in summary["checks_failed"]}
    assert warned["child_recut"]["severity"] == "WARN" and "size_unit: tokens" in warned["child_recut"]["message"]
    assert all(c["severity"] == "WARN" for c in summary["checks_failed"])
    r = _run(str(BIN / "corpus"), "search", "堆内存溢出 jmap", "--kb", "zh300", "--json", env=env)
    assert r.returncode == 0, r.stderr
    top = json.loads(r.stdout)["results"][0]
    assert "jmap" in top["text"] and top["section_path"].endswith("2.3.1 堆内存溢出")


def test_semantic_by_embeddings_indexes_and_caches_its_sentence_vectors(tiny_kb, corpus_home):
    (tiny_kb / "kb.yaml").write_text(
        "chunking:\n  plan: 'PARENT:RECURSIVE;CHILD:SEMANTIC,RECURSIVE'\n"
        "  parent: {RECURSIVE: {max_chars: 600, overlap_chars: 0}}\n"
        "  child: {SEMANTIC: {similarity: embedding, min_chars: 60, max_chars: 300}}\n",
        encoding="utf-8",
    )
    env = {**os.environ}
    r = _run(str(BIN / "corpus"), "index", "--kb", "tiny", "--json", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    [summary] = json.loads(r.stdout)
    assert summary["status"] == "ok" and summary["child_chunks"] > 0
    r = _run(str(BIN / "corpus"), "search", "how long are monthly snapshots kept", "--kb", "tiny", "--json", env=env)
    assert "12 months" in json.loads(r.stdout)["results"][0]["text"]
    from corpus_pipeline.store.parquet import read_partition

    rows = read_partition(
        corpus_home / "warehouse" / "child_chunks" / "kb=tiny" / f"strategy_version={summary['strategy_version']}"
    ).to_pylist()
    assert any(json.loads(r["metadata"]).get("similarity") == "embedding" for r in rows)
    # the sentences were embedded once, into the same vector cache as the chunks: a forced
    # rebuild embeds nothing new
    r = _run(str(BIN / "corpus"), "index", "--kb", "tiny", "--force", "--json", env=env)
    [again] = json.loads(r.stdout)
    assert again["status"] == "ok" and again["embedded"] == 0
