"""The change sensor and the nightly schedule, with Dagster's test contexts."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from dagster import SensorResult, SkipReason, build_schedule_context, build_sensor_context, instance_for_test

from assets.definitions import build_definitions
from assets.runner import index_kb
from assets.sensors import kb_change_sensor, nightly_reindex
from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.versions import active_version, register_version
from corpus_pipeline.versioning import strategy_version
from resources import CorpusResource

pytestmark = pytest.mark.slow


def _kb(home, name, text="# Title\n\nSome text about backups. More text about restores.\n"):
    d = home / "kbs" / name
    d.mkdir(parents=True)
    (d / "a.md").write_text(text)
    (d / "b.md").write_text(text.replace("backups", "encryption"))
    return d


def _tick(instance, home):
    ctx = build_sensor_context(instance=instance, resources={"corpus": CorpusResource(home=str(home))})
    return kb_change_sensor(ctx)


def _apply(instance, result: SensorResult):
    for req in result.dynamic_partitions_requests:
        instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))


def _requests(result):
    if isinstance(result, SkipReason):
        return []
    return sorted((r.job_name, str(r.partition_key)) for r in result.run_requests)


def test_the_sensor_requests_exactly_the_affected_partitions(corpus_home):
    layout = Layout(corpus_home)
    _kb(corpus_home, "one")
    _kb(corpus_home, "two")
    bad = _kb(corpus_home, "broken")
    (bad / "kb.yaml").write_text("chunking: {plann: x}\n")
    with instance_for_test() as instance:
        # New KBs: both partitions registered, both parsed; the broken one is skipped.
        first = _tick(instance, corpus_home)
        assert isinstance(first, SensorResult)
        adds = {r.partitions_def_name: sorted(r.partition_keys) for r in first.dynamic_partitions_requests}
        version = strategy_version(resolve_kb(layout.kb_dir("one")))
        assert adds == {"kb": ["one", "two"], "strategy_version": [version]}
        assert _requests(first) == [("parse_kb", "one"), ("parse_kb", "two")]
        _apply(instance, first)

        # Index both; then nothing is stale.
        defs = build_definitions(str(corpus_home))
        for name in ("one", "two"):
            kb = resolve_kb(layout.kb_dir(name))
            assert index_kb(defs, instance, layout, kb, register_version(layout, kb), say=lambda s: None).status == "ok"
        assert isinstance(_tick(instance, corpus_home), SkipReason)

        # A changed document: only its KB is parsed again.
        (layout.kb_dir("two") / "a.md").write_text("# Title\n\nEdited text.\n")
        assert _requests(_tick(instance, corpus_home)) == [("parse_kb", "two")]
        (layout.kb_dir("two") / "a.md").unlink()  # and a deletion is a change too
        assert _requests(_tick(instance, corpus_home)) == [("parse_kb", "two")]
        kb2 = resolve_kb(layout.kb_dir("two"))
        index_kb(defs, instance, layout, kb2, register_version(layout, kb2), say=lambda s: None)
        assert isinstance(_tick(instance, corpus_home), SkipReason)

        # A chunking config change: a new version partition and its index run, no parse.
        (layout.kb_dir("one") / "kb.yaml").write_text(
            "chunking: {child: {RECURSIVE: {max_chars: 300, overlap_chars: 30}}}\n"
        )
        res = _tick(instance, corpus_home)
        new = strategy_version(resolve_kb(layout.kb_dir("one")))
        assert [(r.partitions_def_name, list(r.partition_keys)) for r in res.dynamic_partitions_requests] == [
            ("strategy_version", [new])
        ]
        assert _requests(res) == [("index_version", f"one|{new}")]
        assert res.run_requests[0].run_key.startswith(f"index|one|{new}|")

        # Build it (now active), then revert kb.yaml: the old version is built, so the tick
        # runs nothing and activates it again.
        _apply(instance, res)
        kb1 = resolve_kb(layout.kb_dir("one"))
        assert index_kb(defs, instance, layout, kb1, register_version(layout, kb1), say=lambda s: None).status == "ok"
        assert active_version(layout, "one") == new
        (layout.kb_dir("one") / "kb.yaml").unlink()
        assert isinstance(_tick(instance, corpus_home), SkipReason)
        assert active_version(layout, "one") == version


def test_the_nightly_schedule_reparses_every_registered_kb():
    with instance_for_test() as instance:
        ctx = build_schedule_context(instance=instance, scheduled_execution_time=datetime(2026, 12, 1, 2, tzinfo=UTC))
        assert isinstance(nightly_reindex(ctx), SkipReason)
        instance.add_dynamic_partitions("kb", ["one", "two"])
        reqs = nightly_reindex(ctx)
        assert [(r.partition_key, r.run_key) for r in reqs] == [
            ("one", "nightly|one|2026-12-01"),
            ("two", "nightly|two|2026-12-01"),
        ]
