"""Keys out of everything stored or printed: one registry of secret values, one ``mask``.

A key reaches the pipeline only through an environment variable named in kb.yaml
(``api_key_env`` of ``llm:``, ``vision:``, ``embedding:``, ``rerank:``) or a Dagster
resource value. Whoever reads one registers it (``secret_from_env`` / ``register_secret``),
when settings are resolved, before any call is made: ``kbconfig.kb_from_config`` registers
the values of every ``api_key_env`` a KB names, and each client's settings register the
key it was given. An endpoint may then echo the key in an error in any shape (not only
``sk-...``); ``mask`` removes every registered value (as written, and JSON-, repr- and
URL-escaped) and anything that looks like a key: ``sk-...``, ``Bearer ...``,
``api_key=...``, URL credentials, and common token shapes (``hf_``, ``ghp_``, ``xoxb-``,
``AKIA...``, ``AIza...``, JWTs). ``mask_error`` also caps the text at ``ERROR_LIMIT``
characters: what an endpoint answers is untrusted and may be huge.

Masked: ``ModelError`` messages (at construction, ``corpus_pipeline.errors``), the errors
the LLM, vision, embedding and rerank clients raise, what is stored as an error
(``image_descriptions.error``, a fallback's reason in ``child_chunks.metadata``, a check
that could not run) and what the ``corpus`` command prints for an error. Document text is
never masked (offsets must stay exact): a key written in a document is the document's.

Values shorter than ``MIN_SECRET_CHARS`` (4) are not registered: masking ``"x"`` or ``"1"``
in every message would wreck the text, and a key that short protects nothing.
"""

from __future__ import annotations

import base64
import json
import os
import re
import threading
from collections.abc import Iterable, Mapping
from urllib.parse import quote

MIN_SECRET_CHARS = 4
ERROR_LIMIT = 500  # characters of an endpoint's error body kept in a message
MASK = "***"

_lock = threading.Lock()
_secrets: set[str] = set()
_pattern: re.Pattern[str] | None = None

# Key shapes recognized without being registered; group 1 (when present) is kept.
_SHAPES = re.compile(
    r"(?<![A-Za-z0-9])(sk-)[A-Za-z0-9_\-\.]{8,}"
    r"|(\bBearer\s+)[A-Za-z0-9_\-\.~+/=]{6,}"
    r"|(\b(?:api[_-]?key|access[_-]?token|auth[_-]?token|secret|password)[\"']?\s*[=:]\s*[\"']?)[^\s\"'&,;}]{4,}"
    r"|(?<![A-Za-z0-9])(?:hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|xox[abprs]-[A-Za-z0-9\-]{10,}"
    r"|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_\-]{30,}|eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,})",
    re.IGNORECASE,
)
_URL_CREDENTIALS = re.compile(r"(//)[^/@\s:]+:[^/@\s]+@")


def _variants(value: str) -> set[str]:
    """How ``value`` may appear in a message: as is, JSON-escaped, repr-escaped, URL-quoted,
    base64- and hex-encoded (a model may answer any of them)."""
    out = {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1], repr(value)[1:-1]}
    out.add(quote(value, safe=""))
    raw = value.encode("utf-8")
    b64 = base64.b64encode(raw).decode("ascii")
    out |= {b64, b64.rstrip("="), base64.urlsafe_b64encode(raw).decode("ascii").rstrip("="), raw.hex()}
    return {v for v in out if len(v) >= MIN_SECRET_CHARS}


def register_secret(value: str | None) -> None:
    """Mask ``value`` from now on, in this process. None, empty and values shorter than
    ``MIN_SECRET_CHARS`` (after stripping whitespace) are ignored."""
    global _pattern
    if not value:
        return
    values = {value, value.strip()}
    found: set[str] = set()
    for v in values:
        if len(v) >= MIN_SECRET_CHARS:
            found |= _variants(v)
    if not found:
        return
    with _lock:
        if found <= _secrets:
            return
        _secrets.update(found)
        ordered = sorted(_secrets, key=len, reverse=True)  # a longer value first: no half-masked key
        _pattern = re.compile("|".join(re.escape(v) for v in ordered))


def secret_from_env(name: str | None, env: Mapping[str, str] | None = None) -> str | None:
    """The value of the variable ``name`` (None when unset or empty), registered as a secret."""
    if not name:
        return None
    value = (os.environ if env is None else env).get(name) or None
    register_secret(value)
    return value


def register_env_secrets(names: Iterable[str | None], env: Mapping[str, str] | None = None) -> None:
    """Register the values of the variables ``names`` (the ``api_key_env`` of each section)."""
    for name in names:
        secret_from_env(name, env)


def mask(text: str, limit: int | None = None) -> str:
    """``text`` without any registered secret or anything that looks like a key; cut to
    ``limit`` characters (after masking, so no part of a key survives the cut)."""
    if not text:
        return text
    pattern = _pattern
    if pattern is not None:
        text = pattern.sub(MASK, text)
    text = _SHAPES.sub(lambda m: (m.group(1) or m.group(2) or m.group(3) or "") + MASK, text)
    text = _URL_CREDENTIALS.sub(r"\1" + MASK + "@", text)
    if limit is not None and len(text) > limit:
        text = text[: max(0, limit - 1)] + "…"
    return text


def mask_secrets(text: str) -> str:
    """``text`` without any registered secret (in any of its encodings), and nothing else
    changed: what a model answered, before it is stored, cached or returned (an endpoint
    may echo its key in a description or an answer). Unlike ``mask``, text that only looks
    like a key is kept: a model's answer about a document may quote one."""
    pattern = _pattern
    return pattern.sub(MASK, text) if text and pattern is not None else text


def mask_error(text: str, limit: int = ERROR_LIMIT) -> str:
    """An error text fit to store or raise: masked and cut to ``limit`` characters."""
    return mask(text, limit)


def is_registered(value: str) -> bool:
    """Whether ``value`` is masked as a registered secret (for tests and diagnostics)."""
    with _lock:
        return value in _secrets
