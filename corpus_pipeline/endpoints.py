"""The keys every section that calls an HTTP endpoint shares, declared once.

    embedding:, llm:      base_url, api_key_env, timeout_s, max_retries, max_concurrency
    vision:               base_url, api_key_env, timeout_s, max_retries
    rerank:               url (its own: the endpoint itself), api_key_env, timeout_s, max_retries

A section's model subclasses one of these and redeclares a key only to change its default
(rerank: 30 s, 1 retry, ``RERANK_API_KEY``), so the bounds and checks cannot drift apart
between sections. A key is never written in kb.yaml: ``api_key_env`` names the environment
variable that holds it (a name, checked), and a URL with credentials in it is refused (they
would be stored with the version's registration and shown in messages).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import BaseModel, Field, field_validator

#: What an environment variable's name may be (``api_key_env``).
KEY_ENV_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"


def check_url(value: str | None, key: str) -> str | None:
    """``value`` when it is an http(s) URL with a host and no credentials (``ValueError``
    naming ``key`` otherwise)."""
    if value is None:
        return None
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{key} = {value!r} is not an http(s) URL with a host (e.g. http://gpu-box:8000/v1)")
    if parts.username or parts.password:
        raise ValueError(
            f"{key} holds credentials: put the key in the environment variable named by api_key_env, not in the URL"
        )
    return value


class EndpointKeys(BaseModel):
    """Which key, how long, how often: what every endpoint section has."""

    api_key_env: str = Field("OPENAI_API_KEY", pattern=KEY_ENV_PATTERN)
    timeout_s: float = Field(60, gt=0, le=600)
    max_retries: int = Field(2, ge=0, le=10)


class Endpoint(EndpointKeys):
    """An OpenAI-compatible (or provider's own) endpoint: its base URL as well."""

    base_url: str | None = Field(None, min_length=1, max_length=2000)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return check_url(value, "base_url")


class ConcurrentEndpoint(Endpoint):
    """An endpoint a batch of calls goes to at once (embeddings, the LLM)."""

    max_concurrency: int = Field(4, ge=1, le=64)
