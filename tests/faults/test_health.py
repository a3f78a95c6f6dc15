"""Telling dead runs from live ones (assets/health.py) on a real instance, and the sensor
repairing them on its tick."""

from __future__ import annotations

import subprocess
import uuid

import psutil
from dagster import DagsterRun, DagsterRunStatus, build_sensor_context, instance_for_test

from assets import health
from assets.sensors import kb_change_sensor
from resources import CorpusResource


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    assert not psutil.pid_exists(p.pid)
    return p.pid


def _run(instance, tags: dict[str, str], status=DagsterRunStatus.STARTED) -> str:
    run_id = str(uuid.uuid4())
    instance.add_run(DagsterRun(job_name="index_version", run_id=run_id, status=status, tags=tags))
    return run_id


def _claim(instance, run_id: str, step: str) -> None:
    res = instance.event_log_storage.claim_concurrency_slot("llm", run_id, step)
    assert res.is_claimed


def test_dead_live_reused_and_foreign_runs_are_told_apart_and_only_the_dead_repaired():
    me = psutil.Process()
    here = health.this_host()
    with instance_for_test() as instance:
        instance.event_log_storage.set_concurrency_slots("llm", 3)
        dead = _run(instance, {health.HOST_TAG: here, health.PID_TAG: str(_dead_pid())})
        alive = _run(instance, health.process_tags("kb"))
        reused = _run(instance, {health.HOST_TAG: here, health.PID_TAG: str(me.pid), health.PID_STARTED_TAG: "1.0"})
        foreign = _run(instance, {health.HOST_TAG: "another-host", health.PID_TAG: "1"})
        finished = _run(instance, {}, status=DagsterRunStatus.SUCCESS)
        for rid, step in ((dead, "a"), (alive, "b"), (finished, "c")):
            _claim(instance, rid, step)
        report = {h.run_id: h for h in health.inspect(instance).runs}
        assert report[dead].state == "dead" and "is gone" in report[dead].reason
        assert report[alive].state == "alive"
        assert report[reused].state == "dead" and "another process" in report[reused].reason
        assert report[foreign].state == "unknown" and "another-host" in report[foreign].reason
        assert report[finished].state == "finished" and report[finished].slots == ["llm:c"]

        done = health.repair(instance, health.inspect(instance))
        assert any(dead in line and "marked failed" in line for line in done)
        assert instance.get_run_by_id(dead).status == DagsterRunStatus.FAILURE
        assert instance.get_run_by_id(reused).status == DagsterRunStatus.FAILURE
        assert instance.get_run_by_id(alive).status == DagsterRunStatus.STARTED
        assert instance.get_run_by_id(foreign).status == DagsterRunStatus.STARTED
        info = instance.event_log_storage.get_concurrency_info("llm")
        assert {s.run_id for s in info.claimed_slots} == {alive}

        # a run on another host is only failed on request
        health.repair(instance, health.inspect(instance), fail=(foreign,))
        assert instance.get_run_by_id(foreign).status == DagsterRunStatus.FAILURE


def test_the_sensor_repairs_dead_runs_on_its_tick(corpus_home):
    with instance_for_test() as instance:
        instance.event_log_storage.set_concurrency_slots("llm", 2)
        dead = _run(instance, {health.HOST_TAG: health.this_host(), health.PID_TAG: str(_dead_pid())})
        _claim(instance, dead, "child_chunks")
        ctx = build_sensor_context(instance=instance, resources={"corpus": CorpusResource(home=str(corpus_home))})
        kb_change_sensor(ctx)
        assert instance.get_run_by_id(dead).status == DagsterRunStatus.FAILURE
        assert instance.event_log_storage.get_concurrency_info("llm").active_slot_count == 0
