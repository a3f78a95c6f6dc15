"""``LLMResource``: deployment-wide defaults for the chat model (PROPOSITION, LLM split).

Settings resolve key by key: a KB's ``kb.yaml`` ``llm:`` section first, then this
resource, then the environment (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``,
``CORPUS_LLM_MODEL``). Unset fields here are ignored. Give the key with
``EnvVar("MY_KEY")`` so it never lands in run configuration.
"""

from __future__ import annotations

from typing import Any

from dagster import ConfigurableResource


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

    def defaults(self) -> dict[str, Any]:
        """The fields that are set, for ``corpus_pipeline.llm.settings`` (None is ignored there)."""
        return {k: v for k, v in self.model_dump().items() if v not in (None, "")}
