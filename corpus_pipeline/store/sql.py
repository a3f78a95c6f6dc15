"""SQL literals for LanceDB's filters (``where``): the one quoting every filter uses."""

from __future__ import annotations

from corpus_pipeline.errors import ConfigError


def sql_string(value: str) -> str:
    """``value`` as a SQL string literal (quotes doubled; NUL refused)."""
    if "\x00" in value:
        raise ConfigError(f"filter value {value!r} contains a NUL character")
    return "'" + value.replace("'", "''") + "'"
