"""What every embedder is: the one interface the index, search and the cache use."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np


class Embedder(Protocol):
    """What embeds text: the name its vectors are cached under (``model_name``), their size,
    ``embed`` for passages (what the index stores) and ``embed_queries`` for questions (the
    model's query prefix); L2-normalised float32 vectors, one row per text."""

    @property
    def model_name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray: ...
