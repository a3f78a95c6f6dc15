"""LLM settings: kb.yaml's ``llm:`` section, then the Dagster resource, then the environment.

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

No model means no LLM: PROPOSITION and LLM splitting take their fallbacks (recorded). The
key lives in a field excluded from ``repr`` and comparisons; it is never written anywhere,
and it is registered as a secret when resolved (``corpus_pipeline.secrets``): masked in
every error stored or printed, whatever its shape.

Only ``llm.model`` and ``llm.enabled`` of kb.yaml enter the strategy version, and only for
plans that call an LLM (``version_input``): the version must be reproducible from the
registered kb.yaml alone, in any process, whatever its environment.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from corpus_pipeline.secrets import register_secret, secret_from_env

if TYPE_CHECKING:  # kbconfig imports the chunking package; keep this module import-light
    from corpus_pipeline.chunking.plan import Plan
    from corpus_pipeline.kbconfig import KnowledgeBase, LLMConfig

ENV_MODEL = "CORPUS_LLM_MODEL"
ENV_BASE_URL = "OPENAI_BASE_URL"
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
LLM_STRATEGIES = ("PROPOSITION", "LLM")


@dataclass(frozen=True)
class LLMSettings:
    """Everything ``LLMClient`` needs; build it with ``llm_settings``.

    ``max_consecutive_failures``: after that many failed calls in a row the client stops
    calling for the rest of its life (a model that is down costs one timeout, not one per
    batch); None never stops. ``max_response_chars``: a longer answer is refused.
    """

    model: str | None = None
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False, compare=False)
    timeout_s: float = 60.0
    max_retries: int = 2
    max_concurrency: int = 4
    max_output_tokens: int | None = None
    temperature: float = 0.0
    enabled: bool = True
    max_consecutive_failures: int | None = 3
    max_response_chars: int = 200_000

    @property
    def configured(self) -> bool:
        return self.enabled and bool(self.model)


_TUNABLE = ("timeout_s", "max_retries", "max_concurrency", "max_output_tokens")


def llm_settings(
    config: LLMConfig | None = None,
    resource: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> LLMSettings:
    """Resolve kb.yaml's ``llm:`` section over the resource's values over the environment."""
    from corpus_pipeline.kbconfig import LLMConfig

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
    return LLMSettings(
        model=pick("model", ENV_MODEL) or None,
        base_url=pick("base_url", ENV_BASE_URL) or None,
        api_key=api_key or None,
        timeout_s=float(tunables["timeout_s"]),
        max_retries=int(tunables["max_retries"]),
        max_concurrency=int(tunables["max_concurrency"]),
        max_output_tokens=int(tunables["max_output_tokens"]) if tunables["max_output_tokens"] else None,
        enabled=bool(cfg.enabled and res.get("enabled", True)),
    )


def plans_call_llm(plans: Iterable[Plan]) -> bool:
    """Whether any step of these plans may call an LLM (``Strategy.calls_llm``)."""
    return any(plan.calls_llm for plan in plans)


def version_input(kb: KnowledgeBase) -> dict[str, Any] | None:
    """What of kb.yaml's ``llm:`` section names the KB's chunks (the model shapes them), or
    None when no document of the KB can be chunked by a strategy that calls an LLM (then
    the section changes no chunk)."""
    if not kb.calls_llm:
        return None
    return {"model": kb.config.llm.model, "enabled": kb.config.llm.enabled}


def kb_calls_llm(kb: KnowledgeBase) -> bool:
    """Whether any document of the KB may be chunked by a strategy that calls an LLM."""
    return kb.calls_llm
