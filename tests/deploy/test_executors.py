"""CORPUS_EXECUTOR: which executor the launched runs of the code location use."""

from __future__ import annotations

import sys

import pytest

from assets import executors
from assets.definitions import build_definitions


def test_the_default_is_in_process_and_every_name_gives_its_executor():
    assert executors.executor_name({}) == "in_process"
    assert executors.executor_from_env({}).name == "in_process"
    for name in executors.EXECUTORS:
        assert executors.executor_from_env({executors.EXECUTOR_ENV: name}).name == name
    assert executors.executor_from_env({executors.EXECUTOR_ENV: " Multiprocess "}).name == "multiprocess"


def test_an_unknown_name_is_refused_with_the_names_there_are():
    with pytest.raises(
        executors.ExecutorConfigError, match=r"'dask' is no executor: use one of in_process, multiprocess, celery, k8s"
    ):
        executors.executor_from_env({executors.EXECUTOR_ENV: "dask"})
    with pytest.raises(executors.ExecutorConfigError, match="CORPUS_EXECUTOR_MAX_CONCURRENT='-2'"):
        executors.executor_from_env({executors.EXECUTOR_ENV: "multiprocess", executors.MAX_CONCURRENT_ENV: "-2"})


@pytest.mark.parametrize(
    ("name", "module", "package"),
    [("k8s", "dagster_k8s", "dagster-k8s"), ("celery", "dagster_celery", "dagster-celery")],
)
def test_a_missing_package_is_named_with_what_to_install(monkeypatch, name, module, package):
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    with pytest.raises(executors.ExecutorConfigError) as err:
        executors.executor_from_env({executors.EXECUTOR_ENV: name})
    assert f"needs the package {package}" in str(err.value)
    assert f"pip install 'corpus-pipeline[{name}]'" in str(err.value)


def test_celery_urls_come_from_the_environment_by_name_never_by_value():
    assert executors.celery_config({}) == {"broker": executors.DEFAULT_BROKER, "backend": executors.DEFAULT_BROKER}
    env = {executors.BROKER_ENV: "redis://:secret@redis:6379/0"}
    assert executors.celery_config(env) == {
        "broker": {"env": executors.BROKER_ENV},
        "backend": {"env": executors.BROKER_ENV},
    }
    env[executors.BACKEND_ENV] = "redis://redis:6379/1"
    assert executors.celery_config(env)["backend"] == {"env": executors.BACKEND_ENV}


def test_the_jobs_of_the_code_location_take_the_executor(tmp_path, monkeypatch):
    monkeypatch.setenv(executors.EXECUTOR_ENV, "celery")
    defs = build_definitions(str(tmp_path))
    for job in ("parse_kb", "index_version"):
        assert defs.resolve_job_def(job).executor_def.name == "celery"
    assert (
        build_definitions(str(tmp_path), executor="multiprocess").resolve_job_def("parse_kb").executor_def.name
        == "multiprocess"
    )


def test_multiprocess_steps_fork_from_a_server_that_preloaded_the_project():
    config = executors.multiprocess_config({executors.MAX_CONCURRENT_ENV: "3"})
    assert config["max_concurrent"] == 3
    assert config["start_method"] == {"forkserver": {"preload_modules": ["assets.preload"]}}
    from dagster import multiprocess_executor
    from dagster._config import process_config

    checked = process_config(multiprocess_executor.config_schema.config_type, config)
    assert checked.success, checked.errors  # (Dagster's own schema: a wrong shape fails here)
    assert checked.value["start_method"] == {"forkserver": {"preload_modules": ["assets.preload"]}}


def test_the_preload_imports_the_heavy_libraries_and_leaves_nothing_a_fork_cannot_copy():
    """In a fresh interpreter, as the forkserver does: Great Expectations and Dagster's
    storage are imported (what each step process would import again, seconds each), no
    thread is running, and LanceDB (whose runtime warns against a fork) is not imported."""
    import subprocess

    code = (
        "import sys, threading, assets.preload; "
        "print(threading.active_count(), 'great_expectations' in sys.modules, "
        "'dagster._core.storage.event_log.sqlite' in sys.modules, 'lancedb' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    assert out.stdout.split() == ["1", "True", "True", "False"], out.stderr[-2000:]
