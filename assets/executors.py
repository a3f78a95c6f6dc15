"""Which Dagster executor runs the steps of a launched run, chosen by ``CORPUS_EXECUTOR``.

``corpus index`` chooses its own (in-process when serial, multiprocess with ``--workers N``,
``assets.runner.job_for``); this is for the runs that Dagster launches (the UI, a backfill, the sensor, the schedule,
``dagster job execute``):

- ``in_process`` (the default): every step of a run in the run's process, one after another.
- ``multiprocess``: every step in its own process on the run's machine
  (``CORPUS_EXECUTOR_MAX_CONCURRENT`` at once; 0 or unset: one per core), forked from a
  forkserver that imported the project and its libraries once (``assets.preload``).
- ``celery``: every step is a Celery task, executed by ``dagster-celery`` workers that share
  the broker (``CORPUS_CELERY_BROKER``, default ``redis://127.0.0.1:6379/0``) and the result
  backend (``CORPUS_CELERY_BACKEND``, default: the broker's URL). Needs ``dagster-celery``
  (``pip install 'corpus-pipeline[celery]'``), a persistent instance every worker can reach
  (PostgreSQL) and a ``CORPUS_HOME`` every worker sees.
- ``k8s``: every step is a Kubernetes Job (``dagster_k8s.k8s_job_executor``), configured by
  the instance's ``K8sRunLauncher`` (the Helm chart's values, see ``deploy/helm``). Needs
  ``dagster-k8s`` (``pip install 'corpus-pipeline[k8s]'``).

A URL that is set in the environment reaches the executor as ``{"env": NAME}``, resolved in
the run's process: the UI shows the variable's name, never a password inside the URL.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Mapping
from typing import Any

from dagster import ExecutorDefinition, in_process_executor, multiprocess_executor

EXECUTOR_ENV = "CORPUS_EXECUTOR"
BROKER_ENV = "CORPUS_CELERY_BROKER"
BACKEND_ENV = "CORPUS_CELERY_BACKEND"
MAX_CONCURRENT_ENV = "CORPUS_EXECUTOR_MAX_CONCURRENT"
DEFAULT_BROKER = "redis://127.0.0.1:6379/0"
EXECUTORS = ("in_process", "multiprocess", "celery", "k8s")
DEFAULT_EXECUTOR = "in_process"
#: What the multiprocess executor's forkserver imports before it forks a step process.
PRELOAD = ("assets.preload",)
# what to install for an executor whose package is missing
_PACKAGES = {"celery": "dagster-celery[redis]==0.29.27", "k8s": "dagster-k8s==0.29.27"}


class ExecutorConfigError(ValueError):
    """``CORPUS_EXECUTOR`` names no executor, or one whose package is not installed."""


def executor_name(environ: Mapping[str, str] | None = None) -> str:
    """The executor ``CORPUS_EXECUTOR`` names (unset or empty: ``in_process``)."""
    env = os.environ if environ is None else environ
    name = (env.get(EXECUTOR_ENV) or DEFAULT_EXECUTOR).strip().lower().replace("-", "_")
    if name not in EXECUTORS:
        raise ExecutorConfigError(
            f"{EXECUTOR_ENV}={env.get(EXECUTOR_ENV)!r} is no executor: use one of {', '.join(EXECUTORS)}"
        )
    return name


def executor_from_env(environ: Mapping[str, str] | None = None, name: str | None = None) -> ExecutorDefinition:
    """The executor for ``name`` (default: ``CORPUS_EXECUTOR``), configured from ``environ``
    (default: the process environment)."""
    env = os.environ if environ is None else environ
    chosen = executor_name({EXECUTOR_ENV: name} if name else env)
    if chosen == "in_process":
        return in_process_executor
    if chosen == "multiprocess":
        return multiprocess_executor.configured(multiprocess_config(env), name="multiprocess")
    if chosen == "celery":
        celery_executor = _import("celery", "dagster_celery", "celery_executor")
        return celery_executor.configured(celery_config(env), name="celery")  # type: ignore[no-any-return]
    k8s_job_executor = _import("k8s", "dagster_k8s", "k8s_job_executor")
    if env.get(MAX_CONCURRENT_ENV):
        return k8s_job_executor.configured({"max_concurrent": _max_concurrent(env)}, name="k8s")  # type: ignore[no-any-return]
    return k8s_job_executor  # type: ignore[no-any-return]


def multiprocess_config(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The ``multiprocess_executor``'s config: at most ``CORPUS_EXECUTOR_MAX_CONCURRENT``
    steps at once, each forked from a forkserver that imported ``PRELOAD`` once (where the
    platform has one; else each step is a fresh interpreter, Dagster's default)."""
    env = os.environ if environ is None else environ
    config: dict[str, Any] = {"max_concurrent": _max_concurrent(env)}
    if "forkserver" in multiprocessing.get_all_start_methods():
        config["start_method"] = {"forkserver": {"preload_modules": list(PRELOAD)}}
    return config


def celery_config(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The ``celery_executor``'s config: broker and backend from the environment. A worker
    must be started with the same (``deploy/celery-worker.yaml`` reads the same variables)."""
    env = os.environ if environ is None else environ
    broker: Any = {"env": BROKER_ENV} if env.get(BROKER_ENV) else DEFAULT_BROKER
    if env.get(BACKEND_ENV):
        backend: Any = {"env": BACKEND_ENV}
    else:
        backend = broker
    return {"broker": broker, "backend": backend}


def _max_concurrent(env: Mapping[str, str]) -> int:
    raw = env.get(MAX_CONCURRENT_ENV) or "0"
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ExecutorConfigError(f"{MAX_CONCURRENT_ENV}={raw!r}: a number of steps at once, 0 for one per core")
    return value or (os.cpu_count() or 1)


def _import(executor: str, module: str, attribute: str) -> Any:
    try:
        mod = __import__(module)
    except ImportError as exc:
        raise ExecutorConfigError(
            f"{EXECUTOR_ENV}={executor} needs the package {module.replace('_', '-')}, which is not installed: "
            f"pip install 'corpus-pipeline[{executor}]' (or pip install '{_PACKAGES[executor]}')"
        ) from exc
    return getattr(mod, attribute)
