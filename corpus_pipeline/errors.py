"""The exceptions corpus_pipeline raises, in one place.

    CorpusError                      base of everything raised on purpose
    ├── ConfigError                  a kb.yaml / --config / plan value is wrong; nothing was written
    │   └── UnknownStrategyError     a strategy name or code that is not registered
    ├── DocumentError                one document could not be read or parsed; the KB goes on
    ├── ModelError                   an embedding / LLM / vision model is missing or failed
    │                                (its message is masked: no configured key, no key shape)
    └── StoreError                   the warehouse (Parquet, LanceDB) is missing or inconsistent

Messages name the file, key or value, the allowed range, and what to do. Errors of
third-party libraries are translated at the boundary with ``raise ... from exc``.
"""

from __future__ import annotations

from collections.abc import Sequence

from corpus_pipeline.secrets import mask


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
    """A model (embedding, LLM, vision) is not configured, not available, or failed.

    Its message often carries what an endpoint answered, so it is masked when the error is
    made (``corpus_pipeline.secrets.mask``): whoever stores or prints it leaks no key."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(mask(a) if isinstance(a, str) else a for a in args))


class StoreError(CorpusError):
    """The warehouse is missing something that was expected, or is inconsistent."""


def did_you_mean(word: object, choices: Sequence[str]) -> str:
    """`` Did you mean 'x'?`` for the nearest of ``choices`` (difflib), else nothing: what an
    unknown KB name and an unknown kb.yaml key are answered with."""
    import difflib

    near = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    return f" Did you mean {near[0]!r}?" if near else ""
