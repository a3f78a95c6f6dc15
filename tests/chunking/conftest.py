"""The local OpenAI-compatible server of the LLM tests, for the chunking tests that index
with LLM steps (tests/chunking/test_preview_equals_index.py)."""

from llm.conftest import _shared_server, openai_server  # noqa: F401 - fixtures
