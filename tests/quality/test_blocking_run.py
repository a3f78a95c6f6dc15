"""Real Dagster runs into a temporary CORPUS_HOME: a plan whose chunks pass the embedding
model's token limit is stopped by the blocking check before embedding, and the KB's
active version stays where it was; a good plan passes every check."""

from __future__ import annotations

import pytest
from dagster import AssetKey, DagsterEventType, instance_for_test

from assets.definitions import build_definitions
from assets.partitions import kb_version_key
from assets.runner import index_kb, register_partitions
from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.parquet import has_partition
from corpus_pipeline.store.versions import active_version, register_version, set_active

pytestmark = pytest.mark.slow

# ~2,600 characters of English prose without blank lines: a 2,000-character child is
# ~430 MiniLM tokens, far past the model's 254.
LONG_EN = " ".join(
    f"Step {i}: the operator checks the replication lag on the standby appliance, compares the "
    f"snapshot catalogue with the primary, and records the result in the change ticket before continuing."
    for i in range(1, 16)
)

GOOD_PLAN = (
    "chunking:\n"
    "  plan: PARENT:RECURSIVE;CHILD:RECURSIVE\n"
    "  parent: {RECURSIVE: {max_chars: 1200, overlap_chars: 100}}\n"
    "  child: {RECURSIVE: {max_chars: 400, overlap_chars: 40}}\n"
)
# Children are always cut to fit the model's window (254 tokens); a KB that holds its chunks
# to a stricter token limit than its plan makes still gets the blocking check as the last
# line of defence.
BAD_PLAN = (
    "chunking:\n"
    "  plan: PARENT:RECURSIVE;CHILD:RECURSIVE\n"
    "  parent: {RECURSIVE: {max_chars: 4000, overlap_chars: 100}}\n"
    "  child: {RECURSIVE: {size_unit: chars, max_chars: 2000, overlap_chars: 100}}\n"
    "quality: {token_limit: 120}\n"
)


def _run(instance, layout: Layout):
    kb = resolve_kb(layout.kb_dir("longdoc"))
    version = register_version(layout, kb)
    defs = build_definitions(str(layout.home))
    return index_kb(defs, instance, layout, kb, version, say=lambda s: None), version


def _chunk_only(instance, layout: Layout) -> tuple[str, str]:
    """Parse, then parent_blocks and child_chunks (with their checks) of the current
    version: a real run, without loading the embedding model (tests/dagster_layer
    covers a full run that activates)."""
    kb = resolve_kb(layout.kb_dir("longdoc"))
    version = register_version(layout, kb)
    register_partitions(instance, kb.name, version)
    defs = build_definitions(str(layout.home))
    assert defs.resolve_job_def("parse_kb").execute_in_process(partition_key=kb.name, instance=instance).success
    r = defs.resolve_job_def("index_version").execute_in_process(
        partition_key=kb_version_key(kb.name, version),
        instance=instance,
        asset_selection=[AssetKey("parent_blocks"), AssetKey("child_chunks")],
    )
    assert r.success
    return version, r.run_id


def _checks(instance, run_id: str) -> dict[str, tuple[bool, str]]:
    out = {}
    for rec in instance.all_logs(run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION):
        d = rec.get_dagster_event().event_specific_data
        out[f"{d.asset_key.to_user_string()}:{d.check_name}"] = (d.passed, d.severity.value)
    return out


def test_a_plan_over_the_token_limit_is_blocked_before_embedding_and_not_activated(corpus_home):
    kb_dir = corpus_home / "kbs" / "longdoc"
    kb_dir.mkdir()
    (kb_dir / "runbook.md").write_text("# Failover runbook\n\n" + LONG_EN + "\n", encoding="utf-8")
    layout = Layout(corpus_home)
    with instance_for_test() as instance:
        (kb_dir / "kb.yaml").write_text(GOOD_PLAN, encoding="utf-8")
        good_version, good_run = _chunk_only(instance, layout)
        checks = _checks(instance, good_run)
        assert checks and all(passed for passed, _ in checks.values()), checks
        assert {"child_chunks:child_token_limit", "parent_blocks:parent_offsets_valid"} <= set(checks)
        set_active(layout, "longdoc", good_version)  # as a successful full run would

        (kb_dir / "kb.yaml").write_text(BAD_PLAN, encoding="utf-8")
        bad, bad_version = _run(instance, layout)
        assert bad_version != good_version
        assert bad.status == "failed"
        # the CLI's error names the check, the partition, the worst chunk, its figure, the limit, the fix
        error = bad.error or ""
        assert error.startswith(f"blocking check child_token_limit on child_chunks (longdoc|{bad_version}) failed: "), (
            error
        )
        assert "Worst: runbook.md chunk " in error and ": token_count " in error and ", limit 120." in error, error
        assert "quality.token_limit" in error, error
        checks = _checks(instance, bad.runs[-1])
        assert checks["child_chunks:child_token_limit"] == (False, "ERROR")
        # Blocked in the same run: nothing was embedded or indexed for the bad version.
        steps = {
            rec.get_dagster_event().step_key
            for rec in instance.all_logs(bad.runs[-1], of_type=DagsterEventType.STEP_SUCCESS)
        }
        assert not any(s.split(".")[0] in ("chunk_embeddings", "search_index") for s in steps), steps
        assert not has_partition(layout.partition_dir("chunk_embeddings", "longdoc", bad_version))
        # The active version stays the good one.
        assert active_version(layout, "longdoc") == good_version
