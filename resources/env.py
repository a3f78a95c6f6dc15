"""Resource fields taken from the environment as Dagster ``EnvVar``\\ s.

An ``EnvVar`` is resolved when a run starts (in the run's own process) and shows in the UI
as the variable's name, never its value. Only a variable that is set becomes one: an
``EnvVar`` of an unset variable fails the run, while an unset variable here must keep the
default (``CORPUS_HOME`` → ``./data``; no LLM key → no key)."""

from __future__ import annotations

import os

from dagster import EnvVar


def env_or(name: str, default: str = "") -> str:
    """``EnvVar(name)`` when the variable is set (non-empty), else ``default``."""
    return EnvVar(name) if os.environ.get(name) else default


def env_or_none(name: str) -> str | None:
    """``EnvVar(name)`` when the variable is set (non-empty), else None (the field unset)."""
    return EnvVar(name) if os.environ.get(name) else None
