"""The one context factory: what every strategy gets, the same way in preview and in the index.

    with ContextFactory.for_kb(kb, cache_dir=layout.cache, llm_defaults=...) as tools:
        ctx = tools.context(text, blocks)      # per document

A strategy may need the KB's token counter (sizes in model tokens, ``token_count``), an
embedding model (SEMANTIC by embeddings) and an LLM client (PROPOSITION, LLM splitting).
The factory opens each only when some plan of the KB needs it: the token counter always
(the model's tokenizer, no model load), an embedder that answers from the vector cache
(``embedding.CachedEmbedder``: batched, keyed by model and text hash, the model loaded on
a miss), an LLM client with its answer cache. ``corpus preview`` and the Dagster assets
both build their contexts here, so a strategy sees the same tools in both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from corpus_pipeline.chunking.base import ChunkContext
from corpus_pipeline.embedding.tokens import TokenCounter, token_counter_for
from corpus_pipeline.models import Block

if TYPE_CHECKING:
    from corpus_pipeline.embedding import Embedder
    from corpus_pipeline.kbconfig import KnowledgeBase
    from corpus_pipeline.llm import LLMClient


@dataclass
class ContextFactory:
    """The tools of one KB's chunking, shared by every document of a run."""

    token_counter: TokenCounter
    embedder: Embedder | None = None
    llm: LLMClient | None = None
    #: counters summed over every context made (fallbacks, re-cut chunks, ...)
    stats: dict[str, int] = field(default_factory=dict)

    @classmethod
    def for_kb(
        cls,
        kb: KnowledgeBase,
        *,
        cache_dir: Path | None,
        llm_defaults: Mapping[str, Any] | None = None,
    ) -> ContextFactory:
        """The tools ``kb``'s plans need: its embedding model's token counter; a cached
        embedder when a plan embeds; an LLM client when a plan calls one and a model is
        configured (kb.yaml ``llm:`` > ``llm_defaults`` (the Dagster resource) > environment).
        Caches live under ``cache_dir`` (None: no cache)."""
        emb = kb.config.embedding
        counter = token_counter_for(emb)
        embedder = None
        if kb.needs_embedder:
            from corpus_pipeline.embedding import CachedEmbedder, EmbeddingCache

            cache = EmbeddingCache(cache_dir / "embeddings.sqlite") if cache_dir is not None else None
            embedder = CachedEmbedder(emb, cache=cache)
        llm = None
        if kb.calls_llm:
            from corpus_pipeline.llm import open_llm

            llm = open_llm(kb.config.llm, resource=llm_defaults, cache_dir=cache_dir)
        return cls(counter, embedder, llm)

    def context(self, text: str, blocks: Sequence[Block] = ()) -> ChunkContext:
        """A fresh context for one document; its counters are added to ``stats`` by ``absorb``."""
        return ChunkContext(
            text=text, token_counter=self.token_counter, blocks=blocks, embedder=self.embedder, llm=self.llm
        )

    def close(self) -> None:
        """Close the LLM client's connections (the factory stays usable for counting)."""
        if self.llm is not None:
            self.llm.close()

    def __enter__(self) -> ContextFactory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def absorb(self, ctx: ChunkContext) -> None:
        for k, v in ctx.stats.items():
            self.stats[k] = self.stats.get(k, 0) + v
