"""kb.yaml's ``llm:`` section, its own typed settings: resolved over the Dagster resource, then the environment.

Resolved key by key (a key written in kb.yaml wins; an unset one is taken from the next
source that has it):

==================  ======================  ====================  ===========================
setting             kb.yaml key             resource key          environment / default
==================  ======================  ====================  ===========================
model               ``llm.model``           ``model``             ``CORPUS_LLM_MODEL``
base URL            ``llm.base_url``        ``base_url``          ``OPENAI_BASE_URL``
API key             (never in kb.yaml)      ``api_key`` (value)   the variable named by
                    ``llm.api_key_env``     or ``api_key_env``    ``api_key_env``, default
                                                                  ``OPENAI_API_KEY``
timeout, retries    ``llm.timeout_s``,      same names            60 s, 2
                    ``llm.max_retries``
calls in flight     ``llm.max_concurrency`` same name             4
answer length       ``llm.max_output_tokens`` same name           not sent
==================  ======================  ====================  ===========================

No model means no LLM: PROPOSITION and LLM splitting take their fallbacks (recorded).
``llm_settings`` returns the same type, ``LLMConfig``, with what kb.yaml leaves unset filled
in (there is no second settings type); the key it resolved is held in a private attribute
(``api_key``: not a field, not in ``repr``, never dumped or written), registered as a secret
(``corpus_pipeline.secrets``): masked in every error stored or printed, whatever its shape.

Only ``llm.model`` and ``llm.enabled`` of kb.yaml enter the strategy version, and only for
plans that call an LLM (``version_input``): the version must be reproducible from the
registered kb.yaml alone, in any process, whatever its environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pydantic import ConfigDict, Field, PrivateAttr

from corpus_pipeline.endpoints import ConcurrentEndpoint
from corpus_pipeline.secrets import register_secret, secret_from_env

ENV_MODEL = "CORPUS_LLM_MODEL"
ENV_BASE_URL = "OPENAI_BASE_URL"
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
LLM_STRATEGIES = ("PROPOSITION", "LLM")


class LLMConfig(ConcurrentEndpoint):
    """``llm:`` — the chat model for PROPOSITION and LLM splitting, behind an
    OpenAI-compatible endpoint (see the module docstring).

    Unset keys come from the Dagster resource, then ``OPENAI_BASE_URL`` / ``CORPUS_LLM_MODEL``.
    The API key is never written here: ``api_key_env`` names the variable that holds it.
    Only ``model`` and ``enabled`` enter the strategy version, for plans that call an LLM.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    model: str | None = Field(None, min_length=1, max_length=200)
    max_output_tokens: int | None = Field(None, ge=16, le=200_000)
    _api_key: str | None = PrivateAttr(None)

    @property
    def configured(self) -> bool:
        return self.enabled and bool(self.model)

    @property
    def api_key(self) -> str | None:
        """The key ``llm_settings`` resolved (None before, or when there is none)."""
        return self._api_key

    def with_api_key(self, key: str | None) -> LLMConfig:
        out = self.model_copy()
        out._api_key = key or None
        return out


_TUNABLE = ("timeout_s", "max_retries", "max_concurrency", "max_output_tokens")


def llm_settings(
    config: LLMConfig | None = None,
    resource: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> LLMConfig:
    """kb.yaml's ``llm:`` section with what it leaves unset taken from the resource's values,
    then the environment; its key resolved (``LLMConfig.api_key``)."""
    cfg = config or LLMConfig()
    res = {k: v for k, v in (resource or {}).items() if v not in (None, "")}
    env = os.environ if env is None else env
    written = cfg.model_fields_set

    def pick(key: str, env_name: str | None = None) -> Any:
        if key in written and getattr(cfg, key) is not None:
            return getattr(cfg, key)
        if key in res:
            return res[key]
        if env_name and env.get(env_name):
            return env[env_name]
        return getattr(cfg, key)

    if "api_key_env" in written:
        api_key = secret_from_env(cfg.api_key_env, env)
    elif "api_key" in res:
        api_key = str(res["api_key"])
        register_secret(api_key)
    else:
        api_key = secret_from_env(str(res.get("api_key_env") or cfg.api_key_env), env)
    tunables = {k: pick(k) for k in _TUNABLE}
    resolved = cfg.model_copy(
        update={
            "model": pick("model", ENV_MODEL) or None,
            "base_url": pick("base_url", ENV_BASE_URL) or None,
            "timeout_s": float(tunables["timeout_s"]),
            "max_retries": int(tunables["max_retries"]),
            "max_concurrency": int(tunables["max_concurrency"]),
            "max_output_tokens": int(tunables["max_output_tokens"]) if tunables["max_output_tokens"] else None,
            "enabled": bool(cfg.enabled and res.get("enabled", True)),
        }
    )
    return resolved.with_api_key(api_key)
