"""Finished work is kept (issue 41): a run stopped in the middle of an embedding batch keeps
the vectors it had finished, so the re-run asks the model only for the rest.

``corpus index`` is killed (SIGKILL, as a lost worker or a second Ctrl-C leaves it) right
after its embedding batch step stored its first ``CHECKPOINT_TEXTS`` vectors. Before, the
batch's vectors reached the cache only in the merge step: the re-run embedded everything
again ("3295 embedded, 16 reused" after 960 were done, in the issue)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from corpus_pipeline.indexing.embed import CHECKPOINT_TEXTS
from faults.test_crash import WORDS
from faults.test_snapshots import CORPUS, _env

pytestmark = pytest.mark.slow


def _kill_after_first_checkpoint(home: Path) -> Path:
    hooks = home / "hooks-embed"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(
        "import inspect, os, signal\n"
        "from corpus_pipeline.embedding import cache\n"
        "real = cache.EmbeddingCache.put_many\n"
        "def put(self, model, items):\n"
        "    real(self, model, items)\n"
        "    if any(f.function == 'embed_batch' and f.filename.endswith('indexing/embed.py') for f in inspect.stack()):\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "cache.EmbeddingCache.put_many = put\n",
        encoding="utf-8",
    )
    return hooks


def _index(home: Path, hooks: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CORPUS, "index", "--kb", "ops", "--json"], env=_env(home, hooks),
                          capture_output=True, text=True, timeout=900)  # fmt: skip


def test_a_run_killed_inside_an_embedding_batch_keeps_the_vectors_it_finished(tmp_path: Path) -> None:
    home = tmp_path / "corpus"
    kb = home / "kbs" / "ops"
    kb.mkdir(parents=True)
    (kb / "kb.yaml").write_text(
        "chunking:\n  plan: PARENT:RECURSIVE;CHILD:RECURSIVE\n"
        "  parent: {RECURSIVE: {max_chars: 600, overlap_chars: 0}}\n"
        "  child: {RECURSIVE: {max_chars: 120, overlap_chars: 0}}\n"
        "vision: {enabled: false, ocr: false}\n"
    )
    for i in range(16):
        paras = [
            " ".join(WORDS[(i * 11 + j * 5 + k) % len(WORDS)] for k in range(22)) + f" ({i}.{j})." for j in range(12)
        ]
        (kb / f"doc{i}.md").write_text(f"# Runbook {i}\n\n" + "\n\n".join(paras) + "\n")

    killed = _index(home, _kill_after_first_checkpoint(home))
    assert killed.returncode != 0, "the run was not killed: its batch step stored nothing in the cache"

    done = _index(home)
    assert done.returncode == 0, done.stderr
    [summary] = json.loads(done.stdout)
    total = summary["embedded"] + summary["reused"]
    assert total > CHECKPOINT_TEXTS, summary  # (more than one checkpoint's worth to embed)
    assert summary["reused"] >= CHECKPOINT_TEXTS, summary  # what the killed run finished was kept
    assert summary["embedded"] <= total - CHECKPOINT_TEXTS, summary
