"""``corpus preview`` and the index make the same parents and children: every registered
strategy and a set of plans, over documents of every format (English and Chinese, with
images), compared record for record (ids, texts, offsets, every column).

The index is real: Dagster runs of the ``parse_kb`` job and of ``parent_blocks`` /
``child_chunks`` of the ``index_version`` job on a temporary instance. LLM steps talk to
the local OpenAI-compatible server; SEMANTIC by embeddings loads the packaged model.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from dagster import AssetKey, instance_for_test
from llm.conftest import KEY, fake_model
from support.openai_server import OpenAIServer

from assets.definitions import build_definitions
from assets.partitions import kb_version_key
from assets.runner import register_partitions
from corpus_pipeline.chunking import registry
from corpus_pipeline.embedding.tokens import token_counter_for
from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.models import Chunk, ParentBlock
from corpus_pipeline.preview import preview_file
from corpus_pipeline.store import schemas
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.parquet import read_partition
from corpus_pipeline.store.versions import register_version

pytestmark = pytest.mark.slow

SAMPLES = Path(__file__).resolve().parents[2] / "data" / "kbs"
# one document of each format in each language (the images come along with their documents)
DOCS = {
    "product-manual-en": ["01-installation.md", "02-configuration-reference.html", "03-backup-schedules.docx",
                          "04-restore-procedure.pdf", "06-faq.txt"],
    "ops-runbook-zh": ["01-cpu-high-load.md", "05-release-rollback.html", "02-memory-leak.docx",
                       "03-db-connection-pool.pdf", "04-disk-space-alert.txt"],
}  # fmt: skip

LLM_STEPS = {"LLM": "{llm_enabled: true}", "PROPOSITION": "{max_chunk_size: 400, min_chunk_size: 40}"}


def _strategy_plans() -> list[tuple[str, str]]:
    """Every registered strategy alone, as ``corpus preview --strategy`` runs it."""
    out = []
    for cls in registry.all_strategies():
        child = f"\n  child: {{{cls.name}: {LLM_STEPS[cls.name]}}}" if cls.name in LLM_STEPS else ""
        out.append((f"strategy {cls.name}", f"chunking:\n  plan: 'CHILD:{cls.name}'{child}\n"))
    return out


PLANS = [
    *_strategy_plans(),
    ("seed 003 default", "chunking: {plan: 'PARENT:STRUCTURE;CHILD:SEMANTIC,RECURSIVE'}\n"),
    (
        "sample KBs' plan",
        "chunking:\n  plan: 'PARENT:STRUCTURE,RECURSIVE;CHILD:RECURSIVE'\n"
        "  child: {RECURSIVE: {size_unit: tokens, max_tokens: 200, overlap_tokens: 24}}\n",
    ),
    (
        "chars that are too many tokens (re-cut)",
        "chunking:\n  plan: 'PARENT:RECURSIVE;CHILD:RECURSIVE'\n  child: {RECURSIVE: {max_chars: 2000, overlap_chars: 60}}\n",
    ),
    ("sliding windows under recursive parents", "chunking: {plan: 'PARENT:2;CHILD:SLIDING_WINDOW'}\n"),
    ("auto", "chunking: {plan: auto}\n"),
    (
        "a partial per-document override",
        "chunking:\n  plan: 'PARENT:RECURSIVE;CHILD:RECURSIVE'\n"
        "  child: {RECURSIVE: {max_chars: 500, overlap_chars: 50}}\n"
        "  overrides: [{match: '*.md', child: {RECURSIVE: {overlap_chars: 20}}}]\n",
    ),
    (
        "SEMANTIC by embeddings, then an LLM proposition step",
        "chunking:\n  plan: 'PARENT:STRUCTURE;CHILD:SEMANTIC,PROPOSITION'\n"
        "  child: {SEMANTIC: {similarity: embedding, size_unit: tokens, min_tokens: 40, max_tokens: 200}}\n",
    ),
]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("corpus")
    kb = home / "kbs" / "mixed"
    kb.mkdir(parents=True)
    for source, names in DOCS.items():
        for name in names:
            shutil.copy(SAMPLES / source / name, kb / f"{source[:2]}-{name}")
        shutil.copytree(SAMPLES / source / "images", kb / "images", dirs_exist_ok=True)
    return home


def _records(layout: Layout, version: str) -> tuple[list[ParentBlock], list[Chunk]]:
    parents = schemas.from_table(read_partition(layout.partition_dir("parent_blocks", "mixed", version)), ParentBlock)
    children = schemas.from_table(read_partition(layout.partition_dir("child_chunks", "mixed", version)), Chunk)
    return parents, children


@pytest.mark.parametrize(("label", "kb_yaml"), PLANS, ids=[p[0] for p in PLANS])
def test_preview_makes_exactly_the_records_the_index_writes(
    label: str, kb_yaml: str, home: Path, openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    openai_server.handler = fake_model
    monkeypatch.setenv("CORPUS_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))
    monkeypatch.setenv("MIXED_KEY", KEY)
    llm = f"llm: {{base_url: '{openai_server.base_url}', model: fake, api_key_env: MIXED_KEY, max_retries: 0}}\n"
    kb_dir = home / "kbs" / "mixed"
    (kb_dir / "kb.yaml").write_text(kb_yaml + llm, encoding="utf-8")
    layout = Layout(home)
    kb = resolve_kb(kb_dir)
    version = register_version(layout, kb)
    with instance_for_test() as instance:
        register_partitions(instance, kb.name, version)
        defs = build_definitions(str(home))
        assert defs.resolve_job_def("parse_kb").execute_in_process(partition_key="mixed", instance=instance).success
        run = defs.resolve_job_def("index_version").execute_in_process(
            partition_key=kb_version_key("mixed", version),
            instance=instance,
            asset_selection=[AssetKey("parent_blocks"), AssetKey("child_chunks")],
            raise_on_error=False,
        )
    parents, children = _records(layout, version)
    assert parents and children
    docs = sorted({p.doc_path for p in parents})
    assert len(docs) == sum(len(v) for v in DOCS.values()), docs
    for path in docs:
        shown = preview_file(kb_dir / path, layout=layout, kb="mixed")
        assert shown.strategy_version == version
        want_parents = [p for p in parents if p.doc_path == path]
        want_children = [c for c in children if c.doc_path == path]
        assert shown.chunked.parents == want_parents, f"{label}: parents of {path} differ"
        assert shown.chunked.children == want_children, f"{label}: children of {path} differ"
    # every child fits the model's window: cut again where the plan made it larger
    assert max(c.token_count for c in children) <= token_counter_for(resolve_kb(kb_dir).config.embedding).max_tokens
    if "re-cut" in label:
        assert any("recut_from_tokens" in c.metadata for c in children)
    assert run.success or label.startswith("strategy STRUCTURE"), label
