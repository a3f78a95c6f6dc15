"""The exceptions corpus_pipeline raises, in one place.

    CorpusError                      base of everything raised on purpose
    ├── ConfigError                  a kb.yaml / --config / plan value is wrong; nothing was written
    │   └── UnknownStrategyError     a strategy name or code that is not registered
    ├── DocumentError                one document could not be read or parsed; the KB goes on
    ├── ModelError                   an embedding / LLM / vision model is missing or failed
    └── StoreError                   the warehouse (Parquet, LanceDB) is missing or inconsistent

Messages name the file, key or value, the allowed range, and what to do. Errors of
third-party libraries are translated at the boundary with ``raise ... from exc``.
"""

from __future__ import annotations


class CorpusError(Exception):
    """Base class of every error corpus_pipeline raises on purpose."""


class ConfigError(CorpusError, ValueError):
    """A configuration value is invalid. Raised before any output is written."""


class UnknownStrategyError(ConfigError, KeyError):
    """A strategy name or numeric code that is not registered."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class DocumentError(CorpusError):
    """One document could not be read or parsed; it is recorded and the KB continues."""


class ModelError(CorpusError):
    """A model (embedding, LLM, vision) is not configured, not available, or failed."""


class StoreError(CorpusError):
    """The warehouse is missing something that was expected, or is inconsistent."""
