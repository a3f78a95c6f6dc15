"""``LLMResource``: deployment-wide defaults for the chat model (PROPOSITION, LLM split).

Settings resolve key by key: a KB's ``kb.yaml`` ``llm:`` section first, then this
resource, then the environment (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``,
``CORPUS_LLM_MODEL``). Unset fields here are ignored. Give the key with
``EnvVar("MY_KEY")`` so it never lands in run configuration.
"""

from __future__ import annotations

from typing import Any

from dagster import ConfigurableResource

from resources.env import env_or_none


class LLMResource(ConfigurableResource):  # type: ignore[type-arg]  # (Dagster's generic parameter is the resource's own type)
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    api_key_env: str | None = None
    timeout_s: float | None = None
    max_retries: int | None = None
    max_concurrency: int | None = None
    max_output_tokens: int | None = None
    enabled: bool | None = None

    @classmethod
    def from_env(cls) -> LLMResource:
        """The resource of the code location: model, base URL and key as ``EnvVar``\\ s of
        ``CORPUS_LLM_MODEL``, ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` when they are set
        (the same values ``corpus_pipeline.llm.config`` would take from the environment,
        and a kb.yaml ``llm:`` key still wins); the unset ones stay unset."""
        from corpus_pipeline.llm.config import DEFAULT_API_KEY_ENV, ENV_BASE_URL, ENV_MODEL

        return cls(
            model=env_or_none(ENV_MODEL),
            base_url=env_or_none(ENV_BASE_URL),
            api_key=env_or_none(DEFAULT_API_KEY_ENV),
        )

    def defaults(self) -> dict[str, Any]:
        """The fields that are set, for ``corpus_pipeline.llm.config`` (None is ignored there)."""
        return {k: v for k, v in self.model_dump().items() if v not in (None, "")}
