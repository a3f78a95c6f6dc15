"""Preparing DAGSTER_HOME (no Dagster import): SQLite by default, PostgreSQL by env vars.

Unless DAGSTER_HOME is set, the instance lives in ``$CORPUS_HOME/dagster``, so runs started
by ``corpus index`` show in ``corpus ui`` / ``dagster dev`` pointed at the same home.
"""

from __future__ import annotations

import os
from pathlib import Path

from corpus_pipeline.store.layout import Layout

_REPO = Path(__file__).resolve().parents[1]
_SQLITE_DEFAULT = "telemetry:\n  enabled: false\n"
_PG_DEFAULTS = {
    "DAGSTER_PG_PORT": "5432",
    "DAGSTER_PG_USER": "postgres",
    "DAGSTER_PG_PASSWORD": "postgres",
    "DAGSTER_PG_DB": "postgres",
}


def _template(postgres: bool) -> str:
    f = _REPO / ("dagster.postgres.yaml" if postgres else "dagster.yaml")
    if f.exists():
        return f.read_text(encoding="utf-8")
    if postgres:  # pragma: no cover - installed without the repo files
        raise FileNotFoundError(f"{f} is missing; cannot configure PostgreSQL storage")
    return _SQLITE_DEFAULT


def prepare_dagster_home(layout: Layout) -> Path:
    """Set DAGSTER_HOME (if unset) and make sure it holds a dagster.yaml; returns it."""
    home = Path(os.environ.get("DAGSTER_HOME") or layout.dagster_home).resolve()
    os.environ["DAGSTER_HOME"] = str(home)
    home.mkdir(parents=True, exist_ok=True)
    postgres = bool(os.environ.get("DAGSTER_PG_HOST"))
    if postgres:
        for k, v in _PG_DEFAULTS.items():
            os.environ.setdefault(k, v)
    cfg = home / "dagster.yaml"
    wanted = _template(postgres)
    marker = "# written by corpus_pipeline\n"
    current = cfg.read_text(encoding="utf-8") if cfg.exists() else None
    # a file we wrote is kept up to date; a file the user wrote is left alone
    if current is None or (current.startswith(marker) and current != marker + wanted):
        cfg.write_text(marker + wanted, encoding="utf-8")
    return home
