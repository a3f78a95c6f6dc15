"""The local OpenAI-compatible server and LLM client of the LLM tests, for sub-questions."""

import pytest
from llm.conftest import _shared_server, make_client, openai_server  # noqa: F401 - fixtures

from .tiny_index import build_index


@pytest.fixture
def index(tmp_path):
    """The hand-made search table of tiny_index.py: (layout, parents file)."""
    return build_index(tmp_path)
