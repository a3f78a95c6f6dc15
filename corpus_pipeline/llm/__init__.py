"""The chat model behind an OpenAI-compatible endpoint: one client for chunking and vision.

settings   kb.yaml ``llm:`` > Dagster resource > environment (``llm_settings``: the same ``LLMConfig``, resolved)
cache      answers on disk under ``$CORPUS_HOME/warehouse/cache/llm``, by (model,
           prompt, parameters): re-runs and repeated previews cost no calls
client     ``LLMClient.chat`` / ``chat_many``: timeouts, retries, a stop after
           consecutive failures, masked keys, usage counters; ``open_llm`` builds one
           or returns None when no model is configured
"""

from corpus_pipeline.llm.cache import ResponseCache
from corpus_pipeline.llm.client import (
    ChatResult,
    LLMClient,
    LLMUsage,
    Messages,
    open_llm,
)
from corpus_pipeline.llm.config import (
    LLMConfig,
    llm_settings,
)
from corpus_pipeline.llm.planning import kb_calls_llm, plans_call_llm, version_input

__all__ = [
    "ChatResult",
    "LLMClient",
    "LLMConfig",
    "LLMUsage",
    "Messages",
    "ResponseCache",
    "kb_calls_llm",
    "llm_settings",
    "open_llm",
    "plans_call_llm",
    "version_input",
]
