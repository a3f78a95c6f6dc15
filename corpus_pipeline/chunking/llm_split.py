"""LLM: a language model chooses the cut points (seed 002 ``applyLlmChunking``).

Off by default (``llm_enabled: false``, as in the seed: every call costs money). With it
on and an LLM client configured (issue 5), text longer than ``llm_max_chars`` is first cut
by RECURSIVE without overlap, each part is sent with the seed's prompt asking for a JSON
array of pieces (``extract_json_array`` takes the outermost ``[...]`` from the answer),
and a part whose answer is empty or unusable falls back to SEMANTIC on its own.

Until then, and whenever the switch is off or no client is configured, the whole piece
goes to SEMANTIC (Jaccard, with the ``fallback_*`` sizes; seed 003's parent pipeline uses
480..1600) and every chunk records ``metadata["fallback_from"] = "LLM"`` and the reason.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from corpus_pipeline.chunking import text as tx
from corpus_pipeline.chunking.base import ChunkContext, Strategy
from corpus_pipeline.chunking.params import StrategyConfig, param
from corpus_pipeline.chunking.registry import register
from corpus_pipeline.chunking.semantic import Semantic, SemanticConfig
from corpus_pipeline.errors import ConfigError
from corpus_pipeline.models import Piece

PROMPT = (
    "你是 RAG 文档切块助手。\n"
    "请把下面文本切成适合知识检索的若干片段，并严格返回 JSON 数组字符串。\n"
    "要求：\n1. 每个片段尽量语义完整。\n2. 不要输出解释文字。\n3. 不要丢失原文关键信息。\n"
    '4. 返回格式示例：["片段1","片段2"]\n\n文本如下：\n{source_text}'
)


@dataclass(frozen=True)
class LLMSplitConfig(StrategyConfig):
    llm_enabled: bool = param(False, doc="call the LLM at all (off by default: each call costs)")
    llm_max_chars: int = param(3500, ge=200, le=32000, doc="longest text sent in one call; longer text is pre-split")
    fallback_min_chars: int = param(240, ge=0, le=8000, doc="SEMANTIC min_chars of the fallback")
    fallback_max_chars: int = param(700, ge=50, le=8000, doc="SEMANTIC max_chars of the fallback")
    fallback_threshold: float = param(0.18, ge=0.0, le=1.0, doc="SEMANTIC Jaccard threshold of the fallback")

    def check(self) -> None:
        try:
            self.fallback_config()
        except ConfigError as exc:
            raise ConfigError(f"fallback_{exc}") from None

    def fallback_config(self) -> SemanticConfig:
        return SemanticConfig(
            similarity="jaccard",
            min_chars=self.fallback_min_chars,
            max_chars=self.fallback_max_chars,
            threshold=self.fallback_threshold,
        )


def extract_json_array(answer: str) -> list[str]:
    """The pieces of the outermost JSON array in an LLM answer (blank ones dropped); [] when
    there is none or it does not parse."""
    a, b = answer.find("["), answer.rfind("]")
    if a < 0 or b <= a:
        return []
    try:
        data = json.loads(answer[a : b + 1])
    except ValueError:
        return []
    if not isinstance(data, list):
        return []
    return [str(x).strip() for x in data if isinstance(x, str) and x.strip()]


@register
class LLMSplit(Strategy):
    name = "LLM"
    code = 4
    version = "v1"
    description = (
        "An LLM picks the cut points (JSON array answer). Off by default (llm_enabled: false): "
        "then, or without an LLM client, SEMANTIC (Jaccard) does the work, recorded in metadata."
    )
    config_class = LLMSplitConfig
    config: LLMSplitConfig
    keeps_source_text = False  # LLM answers may rewrite text; the fallback keeps it

    def split(self, piece: Piece, ctx: ChunkContext) -> list[Piece]:
        s, e = tx.trim(ctx.text, piece.start, piece.end)
        if e <= s:
            return []
        if not self.config.llm_enabled:
            return self._fallback(piece, ctx, "llm_enabled is false")
        if ctx.llm is None:
            return self._fallback(piece, ctx, "no LLM client configured")
        pieces = self._with_llm(piece, ctx)
        if not pieces:
            return self._fallback(piece, ctx, "the LLM returned no usable pieces")
        return pieces

    def _with_llm(self, piece: Piece, ctx: ChunkContext) -> list[Piece]:
        """Splitting with the LLM client: issue 5. Until then nothing is produced and the
        caller falls back (recorded in every chunk's metadata)."""
        return []

    def _fallback(self, piece: Piece, ctx: ChunkContext, reason: str) -> list[Piece]:
        out = Semantic(self.config.fallback_config()).split(piece, ctx)
        return [
            Piece(
                p.text, p.start, p.end, p.section_path, p.chunk_type, p.overlap_chars, False, p.block_index, "",
                {**p.metadata, "fallback_from": "LLM", "fallback_to": "SEMANTIC", "fallback_reason": reason},
            )
            for p in out
        ]
