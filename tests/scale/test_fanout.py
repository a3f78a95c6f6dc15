"""Work inside a partition fans out: a KB's documents parsed, its images described,
chunked (parents, then children) and its texts embedded in batches, one Dagster step
each, with the same rows and ids as one batch; a failed batch is retried alone;
``corpus index --workers N`` runs the batches in N processes at once.

The index runs are real (Dagster, Parquet, LanceDB); the embedding and vision models are
an OpenAI-compatible endpoint on 127.0.0.1 (hashed vectors and a description per image:
fast, and deterministic whatever the batch), also for the CLI's step processes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from dagster import DagsterEventType, DagsterInstance, instance_for_test
from parsing.builders import png
from support.openai_server import Handler, OpenAIServer, Reply, Request, embeddings_handler

from assets.definitions import build_definitions
from assets.runner import index_kb
from corpus_pipeline.indexing import batches
from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.store.lance import open_search_table
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.parquet import read_partition
from corpus_pipeline.store.versions import register_version

REPO = Path(__file__).resolve().parents[2]
KB = "fleet"
TOPICS = [
    ("backup", "Snapshots run nightly at 02:00 and are kept for 30 days. Restore from the console."),
    ("network", "The console listens on port 8443. Replicas talk over TLS on port 9443."),
    ("oncall", "告警：CPU 使用率持续 5 分钟超过 85%。处理：先用 top 定位进程，再扩容到 16 个实例。"),
    ("release", "Every release is tagged and signed. Roll back by activating the previous tag."),
    ("storage", "Volumes are encrypted with AES-256; keys rotate every 90 days through the vault."),
    ("quota", "Each tenant may keep 500 GB; past 90 % an alert goes to the owners' channel."),
    ("logs", "Logs are shipped to the collector on port 5140 and kept for 14 days."),
]


#: Documents with a diagram (one shared by two of them: described once, placed twice).
PICTURES = {"backup": "NIGHTLY 02:00", "network": "PORT 8443", "storage": "AES-256", "logs": "PORT 8443"}


def _kb_yaml(base_url: str) -> str:
    return (
        "chunking:\n  plan: PARENT:RECURSIVE;CHILD:RECURSIVE\n"
        "  parent: {RECURSIVE: {max_chars: 300, overlap_chars: 40}}\n"
        "  child: {RECURSIVE: {max_chars: 120, overlap_chars: 20}}\n"
        "embedding:\n  provider: openai\n"
        f"  base_url: {base_url}\n"
        "  model: acme-embed\n  api_key_env: ACME_KEY\n  batch_size: 4\n  max_retries: 0\n"
        f"vision: {{model: acme-vision, base_url: '{base_url}', api_key_env: ACME_KEY, max_retries: 0}}\n"
    )


def _handler(dim: int = 32) -> Handler:
    """Vectors for /v1/embeddings; for a vision call, a description naming the image's size
    in bytes (so each image gets its own)."""
    embed = embeddings_handler(dim)

    def answer(request: Request) -> Reply:
        if request.path.endswith("/embeddings"):
            return embed(request)
        [image] = request.parts("image_url")
        size = len(image["image_url"]["url"])
        return Reply.chat(
            json.dumps({"description": f"A diagram ({size} chars).", "keywords": ["diagram"],
                        "image_type": "IMAGE", "embedding_text": f"diagram {size}"})
        )  # fmt: skip

    return answer


def _write_kb(home: Path, base_url: str | None = None) -> Path:
    kb = home / "kbs" / KB
    kb.mkdir(parents=True, exist_ok=True)
    for name, text in TOPICS:
        body = f"# {name.title()}\n\n{text}\n\n## More\n\n{text} (see the {name} runbook)\n"
        if name in PICTURES:
            label = PICTURES[name]
            (kb / f"{label.replace(' ', '_')}.png").write_bytes(png(label))
            body += f"\n![{name} diagram]({label.replace(' ', '_')}.png)\n\nThe diagram above sums it up.\n"
        (kb / f"{name}.md").write_text(body, encoding="utf-8")
    if base_url is not None:
        (kb / "kb.yaml").write_text(_kb_yaml(base_url), encoding="utf-8")
    return kb


def _index(home: Path, instance: DagsterInstance, workers: int = 1) -> tuple[Any, str]:
    layout = Layout(home)
    kb = resolve_kb(layout.kb_dir(KB))
    version = register_version(layout, kb)
    defs = build_definitions(str(home), workers=workers)
    return index_kb(defs, instance, layout, kb, version, say=lambda s: None), version


def _rows(home: Path, version: str) -> dict[str, Any]:
    """Every row a version is made of (parse, parents, children, vectors, search table),
    in stored order, with the home's own path taken out of image paths."""
    layout = Layout(home)
    parsed = read_partition(layout.partition_dir("parsed_blocks", KB))
    out: dict[str, Any] = {f"parsed.{k}": t.to_pylist() for k, t in parsed.items()}
    out["image_descriptions"] = read_partition(layout.partition_dir("image_descriptions", KB)).to_pylist()
    for asset in ("parent_blocks", "child_chunks"):
        out[asset] = read_partition(layout.partition_dir(asset, KB, version)).to_pylist()
    emb = read_partition(layout.partition_dir("chunk_embeddings", KB, version))
    out["embeddings"] = emb.drop(["vector"]).to_pylist()
    out["vectors"] = np.array(emb.column("vector").to_pylist(), dtype=np.float32)
    table = open_search_table(layout, KB, version).to_arrow()
    out["search"] = table.drop(["vector"]).to_pylist()
    return json.loads(json.dumps(out, default=lambda v: v.tolist(), ensure_ascii=False).replace(str(home), "HOME"))


def _steps(instance: DagsterInstance, run_id: str, kind: DagsterEventType) -> list[str]:
    return [str(r.step_key) for r in instance.all_logs(run_id, of_type=kind)]


# ---------------------------------------------------------------- the cut


def test_batches_are_contiguous_even_and_bounded():
    rule = batches.BatchRule(min_size=3, max_size=10)
    items = list(range(25))
    for workers in (1, 2, 4, 16):
        parts = batches.split(items, workers, rule)
        assert [x for p in parts for x in p] == items  # every item once, in order
        assert max(map(len, parts)) - min(map(len, parts)) <= 1
        assert all(len(p) <= rule.max_size for p in parts)
    assert len(batches.split(items, 1, rule)) == 3  # max_size decides
    assert len(batches.split(items, 4, rule)) == 4  # one per worker
    assert len(batches.split(items, 16, rule)) == 8  # not below min_size
    assert batches.split([], 4, rule) == []
    assert len(batches.split(items[:2], 4, rule)) == 1


def test_the_smallest_batch_comes_from_the_environment(monkeypatch):
    assert batches.rule("parse") == batches.PARSE
    monkeypatch.setenv("CORPUS_MIN_BATCH_DOCUMENTS", "2")
    monkeypatch.setenv("CORPUS_WORKERS", "3")
    assert batches.rule("parse").min_size == 2 and batches.rule("embed") == batches.EMBED
    assert batches.rule("embed", 5).min_size == 5
    assert batches.rule("describe") == batches.DESCRIBE
    monkeypatch.setenv("CORPUS_MIN_BATCH_IMAGES", "2")
    assert batches.rule("describe").min_size == 2 and batches.rule("parse").min_size == 2
    assert batches.workers_from_env() == 3
    monkeypatch.setenv("CORPUS_WORKERS", "lots")
    assert batches.workers_from_env() == 1


# ---------------------------------------------------------------- through Dagster


@pytest.mark.slow
def test_a_fanned_out_index_equals_one_batch_and_an_edit_parses_one_document(tmp_path, monkeypatch):
    monkeypatch.setenv("ACME_KEY", "k-123456")
    with OpenAIServer() as server:
        server.handler = _handler(32)
        serial, fanned = tmp_path / "serial", tmp_path / "fanned"
        for home in (serial, fanned):
            _write_kb(home, server.base_url)
        with instance_for_test() as inst:
            one, version = _index(serial, inst, workers=1)
            assert one.status == "ok", one.error
            assert _steps(inst, one.runs[0], DagsterEventType.STEP_SUCCESS).count("parsed_blocks.parse_batch[b0]") == 1
            assert len(server.calls("/v1/chat/completions")) == 3  # the distinct images
            monkeypatch.setenv("CORPUS_MIN_BATCH_DOCUMENTS", "1")
            monkeypatch.setenv("CORPUS_MIN_BATCH_IMAGES", "1")
            monkeypatch.setenv("CORPUS_MIN_BATCH_TEXTS", "2")
            many, version2 = _index(fanned, inst, workers=3)
            assert many.status == "ok", many.error
            assert version2 == version
            parse_steps = _steps(inst, many.runs[0], DagsterEventType.STEP_SUCCESS)
            embed_steps = _steps(inst, many.runs[1], DagsterEventType.STEP_SUCCESS)
            assert sorted(s for s in parse_steps if "parse_batch" in s) == [
                f"parsed_blocks.parse_batch[b{i}]" for i in range(3)
            ]
            assert sorted(s for s in parse_steps if "describe_batch" in s) == [
                f"image_descriptions.describe_batch[b{i}]" for i in range(3)
            ]
            assert len(server.calls("/v1/chat/completions")) == 6  # each image once more, by its batch
            assert sorted(s for s in embed_steps if "embed_batch" in s) == [
                f"chunk_embeddings.embed_batch[b{i}]" for i in range(3)
            ]
            for asset, op in (("parent_blocks", "parents_batch"), ("child_chunks", "children_batch")):
                assert sorted(s for s in embed_steps if f".{op}[" in s) == [f"{asset}.{op}[b{i}]" for i in range(3)]
            a, b = _rows(serial, version), _rows(fanned, version)
            assert [r["status"] for r in b["image_descriptions"]] == ["DESCRIBED"] * len(PICTURES)
            assert a.keys() == b.keys()
            for key in a:
                assert a[key] == b[key], key
            assert not (Layout(fanned).staging).exists() or not any(Layout(fanned).staging.iterdir())

            # One edited document: only it is parsed (one batch), the rest carried over.
            doc = fanned / "kbs" / KB / "quota.md"
            doc.write_text(doc.read_text(encoding="utf-8").replace("500 GB", "800 GB"), encoding="utf-8")
            edit, _ = _index(fanned, inst, workers=3)
            assert edit.status == "ok", edit.error
            assert (edit.documents_parsed, edit.documents_reused) == (1, len(TOPICS) - 1)
            steps = _steps(inst, edit.runs[0], DagsterEventType.STEP_SUCCESS)
            assert [s for s in steps if "parse_batch" in s] == ["parsed_blocks.parse_batch[b0]"]
            steps = _steps(inst, edit.runs[1], DagsterEventType.STEP_SUCCESS)
            assert [s for s in steps if "_batch[" in s] == [
                "parent_blocks.parents_batch[b0]", "child_chunks.children_batch[b0]", "chunk_embeddings.embed_batch[b0]"
            ]  # fmt: skip
            assert edit.documents_chunked == 1  # the edited document; the others keep their rows
            assert len(server.calls("/v1/chat/completions")) == 6  # the images: from the cache
            texts = read_partition(Layout(fanned).partition_dir("parsed_blocks", KB))["texts"]
            assert [r["path"] for r in texts.to_pylist()] == sorted(f"{n}.md" for n, _ in TOPICS)
            assert "800 GB" in " ".join(texts.column("text").to_pylist())


@pytest.mark.slow
def test_a_failed_batch_is_retried_alone(tmp_path, monkeypatch):
    """The endpoint fails once for the batch holding one text: that batch's step is retried
    (and succeeds); the other batches ran once, their texts sent once."""
    monkeypatch.setenv("ACME_KEY", "k-123456")
    monkeypatch.setenv("CORPUS_MIN_BATCH_TEXTS", "2")
    answer = _handler(32)
    failed: list[str] = []

    def flaky(request: Request) -> Reply:
        inputs = request.body.get("input", []) if isinstance(request.body, dict) else []
        if not failed and any("5140" in t for t in inputs):
            failed.append(inputs[0])
            return Reply.error(503, "overloaded")
        return answer(request)

    with OpenAIServer() as server, instance_for_test() as inst:
        server.handler = flaky
        _write_kb(tmp_path / "home", server.base_url)
        summary, _version = _index(tmp_path / "home", inst, workers=3)
        assert summary.status == "ok", summary.error
        assert failed, "the endpoint never failed: the test proves nothing"
        index_run = summary.runs[1]
        retried = _steps(inst, index_run, DagsterEventType.STEP_UP_FOR_RETRY)
        assert len(retried) == 1 and retried[0].startswith("chunk_embeddings.embed_batch["), retried
        assert _steps(inst, index_run, DagsterEventType.STEP_RESTARTED) == retried  # run again, alone
        starts = _steps(inst, index_run, DagsterEventType.STEP_START)
        others = [s for s in starts if "embed_batch" in s and s != retried[0]]
        assert len(others) == 2 and all(starts.count(s) == 1 for s in others)
        assert sorted(_steps(inst, index_run, DagsterEventType.STEP_SUCCESS)).count(retried[0]) == 1
        sent = [t for c in server.calls("/v1/embeddings") for t in c.body["input"]]
        # every text once, but the failed batch's, sent twice (its first request failed)
        twice = {t for t in sent if sent.count(t) > 1}
        assert failed[0] in twice and len(sent) == summary.embedded + len(twice)


# ---------------------------------------------------------------- the CLI, in processes


@pytest.mark.slow
def test_corpus_index_workers_runs_batches_in_processes_with_the_serial_rows(tmp_path):
    """``corpus index --workers 2``: Dagster's multiprocess executor, every step in its own
    process; rows and ids as ``--workers 1`` gives."""
    with OpenAIServer() as server:
        server.handler = _handler(32)
        _run_workers_cli(tmp_path, server.base_url)


def _run_workers_cli(tmp_path: Path, base_url: str) -> None:
    homes = {w: tmp_path / f"w{w}" for w in (1, 2)}
    for home in homes.values():
        _write_kb(home, base_url)
    summaries, pids = {}, {}
    for w, home in homes.items():
        env = {
            **os.environ, "CORPUS_HOME": str(home), "DAGSTER_HOME": str(home / "dagster"), "HF_HUB_OFFLINE": "1",
            "CORPUS_MIN_BATCH_DOCUMENTS": "2", "CORPUS_MIN_BATCH_TEXTS": "8", "ACME_KEY": "k-123456",
        }  # fmt: skip
        r = subprocess.run(
            [str(Path(sys.executable).parent / "corpus"), "index", "--workers", str(w), "--json"],
            env=env, cwd=REPO, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
        summaries[w] = json.loads(r.stdout)[0]
        with DagsterInstance.from_config(str(home / "dagster")) as inst:
            pids[w] = {
                str(rec.step_key): rec.dagster_event.pid for run in summaries[w]["runs"] for rec in inst.all_logs(run)
                if rec.dagster_event is not None and rec.dagster_event.event_type == DagsterEventType.STEP_START
            }  # fmt: skip
    assert len(set(pids[1].values())) == 1  # all in the CLI's process
    batch_pids = {p for s, p in pids[2].items() if "_batch[" in s}
    assert len(batch_pids) >= 3 and os.getpid() not in batch_pids  # a process per step
    assert sorted(s for s in pids[2] if "parse_batch" in s) == [f"parsed_blocks.parse_batch[b{i}]" for i in range(2)]
    version = summaries[1]["strategy_version"]
    a, b = _rows(homes[1], version), _rows(homes[2], version)
    assert a == b
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_corpus_index_names_a_fanned_out_assets_steps_by_the_asset():
    from corpus_pipeline.progress import step_label

    assert step_label("parsed_blocks.parse_batch[b2]") == "parsed_blocks [b2]"
    assert step_label("chunk_embeddings.embed_plan") == "chunk_embeddings (plan)"
    assert step_label("chunk_embeddings.embed_merge") == "chunk_embeddings"
    assert step_label("child_chunks") == "child_chunks"
