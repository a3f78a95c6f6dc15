"""Search filters: which chunks a query may return, applied inside both channels.

    SearchFilters(path="guides/**/*.md", format=["pdf"], section="Guide > Install",
                  chunk_type=["TEXT"], score_threshold=0.3)

``where()`` is one LanceDB SQL predicate that the vector and the keyword channel apply
*before* their top k (``.where(sql, prefilter=True)``), so a filter never leaves a query
with fewer hits because better unfiltered ones took the places. ``score_threshold`` is not
part of it: it drops fused children whose ``relevance`` (``retrieval.relevance``) is below it.

- ``path``: a glob on the document's path relative to the KB folder, with kb.yaml's
  ``include``/``exclude`` semantics (``globs.match_glob``: ``*`` and ``?`` also cross
  ``/``, ``[abc]`` / ``[!abc]``, ``**/`` also matches no folder), translated to an anchored
  ``regexp_like``.
- ``format``: the documents' formats (``markdown``, ``text``, ``html``, ``docx``, ``pdf``, the
  values of the documents table; ``md``, ``txt``, ``htm`` are accepted as aliases), by the
  path's extension (``parsing.discovery.EXTENSIONS``). The search table has no format column:
  adding one would take the documents table into ``publish_version`` and rebuild every built
  version (``SEARCH_TABLE_VERSION``); the extension decides the format for all but files whose
  content says otherwise (a PDF named ``.txt``), and those are passed as ``exceptions``
  (path → format from the documents table; ``Searcher`` reads them).
- ``section``: a section-path prefix by whole segments: ``Guide > Install`` selects
  ``Guide > Install`` and ``Guide > Install > Ports``, not ``Guide > Installation``.
- ``chunk_type``: chunk types (``TEXT``, ``PROPOSITION``, ``SEMANTIC_SEGMENT``, ``IMAGE``,
  ``TABLE_IMAGE``; case-insensitive).

Every value enters the SQL as a quoted literal (``'`` doubled; ``%``, ``_`` and ``\\``
escaped in LIKE patterns; regex metacharacters escaped), so no value changes the shape
of the predicate. Unknown keys and bad values are refused with a ``ConfigError`` naming them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from corpus_pipeline.doc_formats import ALIASES, EXTENSIONS, NAMES
from corpus_pipeline.errors import ConfigError
from corpus_pipeline.models import ChunkType
from corpus_pipeline.parsing.blocks import SECTION_SEPARATOR
from corpus_pipeline.store.sql import sql_string

FORMATS = NAMES
_ALIASES_SHOWN = ", ".join(ALIASES)
CHUNK_TYPES = tuple(t.value for t in ChunkType)
_MAX_PATTERN = 1000
# Characters with a meaning in Rust's regex syntax (what regexp_like runs), escaped with "\".
_REGEX_META = set("\\.+*?()|[]{}^$#&-~")


def like_prefix(value: str) -> str:
    """A LIKE pattern (with ``ESCAPE '\\'``) matching strings that start with ``value``."""
    return value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _regex_literal(text: str) -> str:
    return "".join("\\" + c if c in _REGEX_META else c for c in text)


def glob_regex(pattern: str) -> str:
    """One glob (``fnmatch`` syntax) as an anchored regex body for Rust's regex crate."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c == "*":
            while i < n and pattern[i] == "*":
                i += 1
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[":
            j = i
            if j < n and pattern[j] == "!":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:  # no closing bracket: a literal "[" (as fnmatch reads it)
                out.append("\\[")
                continue
            body = pattern[i:j]
            i = j + 1
            negate = body.startswith("!")
            if negate:
                body = body[1:]
            parts: list[str] = []
            k = 0
            while k < len(body):
                if k + 2 < len(body) and body[k + 1] == "-":
                    parts.append(f"{_regex_literal(body[k])}-{_regex_literal(body[k + 2])}")
                    k += 3
                else:
                    parts.append(_regex_literal(body[k]))
                    k += 1
            out.append("[" + ("^" if negate else "") + "".join(parts) + "]")
        else:
            out.append(_regex_literal(c))
    return "".join(out)


def path_regex(pattern: str) -> str:
    """The anchored regex of ``globs.match_glob(path, pattern)``: the pattern, and with
    ``**/`` at its start or ``/**/`` inside, the forms where those match no folder."""
    alternatives = [pattern]
    if pattern.startswith("**/"):
        alternatives.append(pattern[3:])
    if "/**/" in pattern:
        alternatives.append(pattern.replace("/**/", "/"))
    return "^(?s:" + "|".join(glob_regex(p) for p in dict.fromkeys(alternatives)) + ")$"


def format_of_path(path: str) -> str | None:
    """The format a document path's extension gives (``EXTENSIONS``), None for others."""
    dot = path.rfind(".")
    if dot < 0 or "/" in path[dot:]:
        return None
    return EXTENSIONS.get(path[dot:].lower())


def _in_list(column: str, values: list[str]) -> str:
    return f"{column} IN ({', '.join(sql_string(v) for v in values)})"


class SearchFilters(BaseModel):
    """What a search may return (see the module docstring); every field optional (None or
    empty: no restriction)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str | None = Field(None, description="glob on the document path, e.g. 'guides/**/*.md' or '*.pdf'")
    format: list[str] | None = Field(None, description=f"document formats: {', '.join(FORMATS)} ({_ALIASES_SHOWN})")
    section: str | None = Field(None, description="section-path prefix, whole segments: 'Guide > Install'")
    chunk_type: list[str] | None = Field(None, description=f"chunk types: {', '.join(CHUNK_TYPES)}")
    score_threshold: float | None = Field(None, ge=0.0, le=1.0, description="minimum relevance, 0 to 1")

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise filters_error(exc) from None

    @field_validator("path", "section")
    @classmethod
    def _text(cls, v: str | None) -> str | None:
        if v is None:
            return None
        if len(v) > _MAX_PATTERN:
            raise ValueError(f"longer than {_MAX_PATTERN} characters")
        if "\x00" in v:
            raise ValueError("contains a NUL character")
        return v.strip() or None

    @field_validator("format")
    @classmethod
    def _formats(cls, v: list[str] | None) -> list[str] | None:
        if not v:
            return None
        out = []
        for raw in v:
            name = ALIASES.get(raw.strip().lower(), raw.strip().lower())
            if name not in FORMATS:
                raise ValueError(f"unknown format {raw!r}; allowed: {', '.join(FORMATS)} (or {_ALIASES_SHOWN})")
            out.append(name)
        return sorted(set(out))

    @field_validator("chunk_type")
    @classmethod
    def _chunk_types(cls, v: list[str] | None) -> list[str] | None:
        if not v:
            return None
        out = []
        for raw in v:
            name = raw.strip().upper()
            if name not in CHUNK_TYPES:
                raise ValueError(f"unknown chunk type {raw!r}; allowed: {', '.join(CHUNK_TYPES)}")
            out.append(name)
        return sorted(set(out))

    @classmethod
    def from_mapping(cls, values: Any) -> SearchFilters | None:
        """From a mapping with these keys (or a ``SearchFilters``); None or {}: None."""
        if values is None or isinstance(values, SearchFilters):
            return values
        if not isinstance(values, Mapping):
            raise ConfigError(f"search filters must be a mapping of {', '.join(cls.model_fields)}, not {values!r}")
        return cls(**dict(values)) if values else None

    @property
    def restricts_rows(self) -> bool:
        """True when ``where()`` is not empty (every field but ``score_threshold``)."""
        return bool(self.path or self.format or self.section or self.chunk_type)

    def where(self, exceptions: Mapping[str, str] | None = None) -> str | None:
        """The LanceDB SQL predicate of the row filters (None when there are none).

        ``exceptions``: document path → format for documents whose format is not the one
        their extension gives (the documents table knows; see ``format``)."""
        clauses = []
        if self.path:
            clauses.append(f"regexp_like(doc_path, {sql_string(path_regex(self.path))})")
        if self.format:
            wanted = set(self.format)
            regex = _extension_regex([ext for ext, fmt in EXTENSIONS.items() if fmt in wanted])
            by_ext = f"regexp_like(doc_path, {sql_string(regex)})" if regex else "false"
            odd = dict(exceptions or {})
            drop = sorted(p for p, f in odd.items() if f not in wanted and format_of_path(p) in wanted)
            add = sorted(p for p, f in odd.items() if f in wanted and format_of_path(p) not in wanted)
            clause = by_ext if not drop else f"({by_ext} AND NOT {_in_list('doc_path', drop)})"
            clauses.append(f"({clause} OR {_in_list('doc_path', add)})" if add else clause)
        if self.section:
            prefix = self.section.removesuffix(SECTION_SEPARATOR.rstrip()).rstrip()
            clauses.append(
                f"(section_path = {sql_string(prefix)} OR section_path LIKE "
                f"{sql_string(like_prefix(prefix + SECTION_SEPARATOR))} ESCAPE '\\')"
            )
        if self.chunk_type:
            clauses.append(_in_list("chunk_type", self.chunk_type))
        return " AND ".join(clauses) or None

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


def _extension_regex(extensions: list[str]) -> str | None:
    if not extensions:
        return None
    return "(?i)(" + "|".join(_regex_literal(e) for e in sorted(extensions)) + ")$"


def filters_error(exc: ValidationError) -> ConfigError:
    """A ``ConfigError`` naming every bad filter key, its value and what is allowed."""
    lines = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"][:1]) or "filters"
        if err["type"] == "extra_forbidden":
            allowed = ", ".join(SearchFilters.model_fields)
            lines.append(f"unknown search filter {key!r} = {err.get('input')!r}; allowed: {allowed}.")
        else:
            msg = str(err["msg"]).removeprefix("Value error, ")
            lines.append(f"search filter {key} = {err.get('input')!r}: {msg}.")
    return ConfigError("\n".join(lines))


__all__ = ["SearchFilters", "format_of_path", "glob_regex", "path_regex", "sql_string"]
