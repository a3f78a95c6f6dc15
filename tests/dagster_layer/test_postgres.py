"""The Dagster instance on PostgreSQL (dagster-postgres), chosen by DAGSTER_PG_* variables:
a real materialization whose runs and events land in a real PostgreSQL server.

scripts/test.sh (and so CI) starts a throw-away server and exports CORPUS_TEST_PG_*.
"""

from __future__ import annotations

import os
import uuid

import pytest

from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.versions import register_version

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture
def pg_env(monkeypatch):
    host = os.environ.get("CORPUS_TEST_PG_HOST")
    if not host:
        if os.environ.get("CORPUS_REQUIRE_PG"):
            pytest.fail("CORPUS_REQUIRE_PG is set but no PostgreSQL was started (CORPUS_TEST_PG_HOST)")
        pytest.skip("no PostgreSQL server: run through scripts/test.sh, which starts one")
    import psycopg2

    db = f"corpus_test_{uuid.uuid4().hex[:8]}"
    conn = psycopg2.connect(
        host=host,
        port=os.environ["CORPUS_TEST_PG_PORT"],
        user=os.environ["CORPUS_TEST_PG_USER"],
        password=os.environ.get("CORPUS_TEST_PG_PASSWORD", ""),
        dbname="postgres",
    )
    conn.autocommit = True
    conn.cursor().execute(f"CREATE DATABASE {db}")
    monkeypatch.setenv("DAGSTER_PG_HOST", host)
    monkeypatch.setenv("DAGSTER_PG_PORT", os.environ["CORPUS_TEST_PG_PORT"])
    monkeypatch.setenv("DAGSTER_PG_USER", os.environ["CORPUS_TEST_PG_USER"])
    monkeypatch.setenv("DAGSTER_PG_PASSWORD", os.environ.get("CORPUS_TEST_PG_PASSWORD", "postgres"))
    monkeypatch.setenv("DAGSTER_PG_DB", db)
    yield db
    conn.cursor().execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    conn.close()


def test_a_materialization_is_recorded_in_postgresql(tiny_kb, corpus_home, pg_env):
    from dagster import DagsterInstance
    from dagster_postgres import PostgresRunStorage

    from assets.definitions import build_definitions
    from assets.runner import index_kb
    from corpus_pipeline.instance import prepare_dagster_home

    layout = Layout(corpus_home)
    home = prepare_dagster_home(layout)
    assert "postgres" in (home / "dagster.yaml").read_text()
    kb = resolve_kb(layout.kb_dir("tiny"))
    version = register_version(layout, kb)
    with DagsterInstance.from_config(str(home)) as instance:
        assert isinstance(instance.run_storage, PostgresRunStorage)
        summary = index_kb(build_definitions(str(corpus_home)), instance, layout, kb, version, say=lambda s: None)
        assert summary.status == "ok", summary.error
        runs = instance.get_runs()
        assert {r.run_id for r in runs} == set(summary.runs)
        assert instance.get_dynamic_partitions("strategy_version") == [version]

    import psycopg2

    with psycopg2.connect(
        host=os.environ["DAGSTER_PG_HOST"],
        port=os.environ["DAGSTER_PG_PORT"],
        user=os.environ["DAGSTER_PG_USER"],
        password=os.environ["DAGSTER_PG_PASSWORD"],
        dbname=pg_env,
    ) as conn:
        cur = conn.cursor()
        cur.execute("select count(*) from runs")
        assert cur.fetchone()[0] == 2
        cur.execute("select count(*) from event_logs where dagster_event_type = 'ASSET_MATERIALIZATION'")
        assert cur.fetchone()[0] == 8  # 3 parsing assets + 5 per-version assets
