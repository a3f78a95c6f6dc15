"""SEMANTIC: cut where the topic changes, measured by Jaccard overlap or by embeddings.

Both modes walk the piece's sentences (Chinese and English, ``text.sentences``) and grow
a chunk sentence by sentence. A chunk ends before a sentence when adding it would pass
``max`` (the hard bound), or when the chunk already has ``min`` and the sentence starts a
new topic:

- ``similarity: jaccard`` (default, seed 002; needs no model): a sentence starts a new
  topic when the Jaccard similarity of its tokens (English words of 2+ letters, digits,
  single CJK characters) with the tokens of the chunk's last ``jaccard_window`` sentences
  is below ``threshold``. The seed compared with the whole growing chunk, whose token set
  only grows, so every chunk ended right after ``min``; ``jaccard_window: 0`` restores it.
- ``similarity: embedding`` (seed 000 §5.2): all sentences of the piece are embedded in
  one batched call (the seed made one call per sentence); the cosine similarity of
  neighbours is compared with a threshold from their distribution: ``percentile`` (the
  lowest ``100 - amount`` percent are breaks; the seed's code took the 95th percentile of
  similarity and so broke almost everywhere), ``standard_deviation`` (below
  ``mean - std * amount/100``) or ``interquartile`` (below ``Q1 - IQR * amount/100``).
  With no embedding model configured this mode is an error, never a silent fallback.

Sentences longer than ``max`` (and Chinese text without punctuation) are first cut by
RECURSIVE's rules, so no chunk passes ``max``; a piece within ``min`` is kept whole.
Chunks are ``SEMANTIC_SEGMENT`` with ``metadata``: ``similarity``, ``boundary_score``
(the similarity at the cut that started the chunk), ``split_reason`` (topic / size) and
``merged_small`` when a topic break was passed over because the chunk was under ``min``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from corpus_pipeline.chunking import text as tx
from corpus_pipeline.chunking.base import ChunkContext, Strategy, sub_piece
from corpus_pipeline.chunking.params import StrategyConfig, param
from corpus_pipeline.chunking.recursive import split_spans
from corpus_pipeline.chunking.registry import register
from corpus_pipeline.chunking.sizes import SizeBound
from corpus_pipeline.errors import ConfigError, ModelError
from corpus_pipeline.models import ChunkType, Piece

_TOKEN = re.compile(r"[a-z0-9]{2,}|[\u3400-\u9fff\uf900-\ufaff]")


@dataclass(frozen=True)
class SemanticConfig(StrategyConfig):
    similarity: str = param("jaccard", choices=("jaccard", "embedding"), doc="how topic shifts are measured")
    min_chars: int = param(240, ge=0, le=8000, doc="a chunk is not cut for topic before this many characters")
    max_chars: int = param(700, ge=50, le=8000, doc="largest chunk in characters (hard bound)")
    size_unit: str = param("chars", choices=("chars", "tokens"), doc="measure sizes in characters or model tokens")
    min_tokens: int = param(48, ge=0, le=8192, doc="min_chars in tokens, when size_unit is 'tokens'")
    max_tokens: int = param(240, ge=16, le=8192, doc="max_chars in tokens, when size_unit is 'tokens'")
    threshold: float = param(0.18, ge=0.0, le=1.0, doc="jaccard: a similarity below this starts a new topic")
    jaccard_window: int = param(
        3, ge=0, le=50, doc="jaccard: compare with this many previous sentences (0 = the whole chunk, as the seed)"
    )
    breakpoint_type: str = param(
        "percentile",
        choices=("percentile", "standard_deviation", "interquartile"),
        doc="embedding: how the break threshold is derived from the similarities",
    )
    breakpoint_amount: float = param(
        95.0, ge=0.0, le=300.0, doc="embedding: percentile (0..100), or std / IQR multiplier in percent"
    )

    def check(self) -> None:
        if self.min_chars >= self.max_chars:
            raise ConfigError(
                f"min_chars = {self.min_chars} must be smaller than max_chars = {self.max_chars}; "
                f"allowed 0..{self.max_chars - 1}."
            )
        if self.min_tokens >= self.max_tokens:
            raise ConfigError(
                f"min_tokens = {self.min_tokens} must be smaller than max_tokens = {self.max_tokens}; "
                f"allowed 0..{self.max_tokens - 1}."
            )
        if self.breakpoint_type == "percentile" and self.breakpoint_amount > 100:
            raise ConfigError(
                f"breakpoint_amount = {self.breakpoint_amount} is out of range for breakpoint_type = "
                "'percentile': allowed 0..100."
            )

    @property
    def min_size(self) -> int:
        return self.min_tokens if self.size_unit == "tokens" else self.min_chars

    @property
    def max_size(self) -> int:
        return self.max_tokens if self.size_unit == "tokens" else self.max_chars


def jaccard_tokens(text: str) -> frozenset[str]:
    """Seed 002 ``extractTokens``: lower-case words of 2+ letters or digits, single CJK characters."""
    return frozenset(_TOKEN.findall(text.lower()))


def jaccard(a: frozenset[str] | set[str], b: frozenset[str] | set[str]) -> float:
    if not a and not b:
        return 1.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def embedding_breaks(sims: list[float], kind: str, amount: float) -> list[bool]:
    """Which neighbour similarities are topic breaks (seed 000's three detectors, fixed)."""
    import numpy as np

    if not sims:
        return []
    arr = np.asarray(sims, dtype=np.float64)
    if kind == "percentile":
        threshold = float(np.percentile(arr, 100.0 - amount))
        return [s < threshold or (amount >= 100.0 and s <= threshold) for s in sims]
    if kind == "standard_deviation":
        threshold = float(arr.mean() - arr.std() * amount / 100.0)
    else:
        q1, q3 = np.percentile(arr, [25, 75])
        threshold = float(q1 - (q3 - q1) * amount / 100.0)
    return [s < threshold for s in sims]


def bounded_sentences(text: str, start: int, end: int, meter: Any, max_size: int) -> list[tuple[int, int]]:
    """Sentence spans of ``[start, end)``, each cut further when longer than ``max_size``."""
    out: list[tuple[int, int]] = []
    for a, b in tx.sentences(text, start, end):
        if meter.measure(a, b) > max_size:
            out.extend((x, y) for x, y, _ in split_spans(text, a, b, meter, max_size))
        else:
            out.append((a, b))
    return out


@register
class Semantic(Strategy):
    name = "SEMANTIC"
    code = 3
    version = "v1"
    description = (
        "Cuts where the topic shifts: Jaccard token overlap between sentences (default, no model) "
        "or embedding similarity breakpoints (percentile / standard deviation / IQR)."
    )
    config_class = SemanticConfig
    config: SemanticConfig
    parent_defaults: ClassVar[Mapping[str, Any]] = {"min_chars": 480, "max_chars": 1600}  # seed 003's parent pipeline
    size_keys = frozenset({"size_unit", "min_chars", "max_chars", "min_tokens", "max_tokens"})

    @classmethod
    def size_bound(cls, config: StrategyConfig) -> SizeBound:
        assert isinstance(config, SemanticConfig)
        tok = config.size_unit == "tokens"
        what = f"{cls.name} {'max_tokens' if tok else 'max_chars'}"
        return SizeBound("tokens" if tok else "chars", config.max_size, config.min_size or None, what)

    @classmethod
    def needs_embedder(cls, config: StrategyConfig) -> bool:
        return getattr(config, "similarity", None) == "embedding"

    def split(self, piece: Piece, ctx: ChunkContext) -> list[Piece]:
        cfg = self.config
        text = ctx.text
        meter = ctx.meter(cfg.size_unit)
        s, e = tx.trim(text, piece.start, piece.end)
        if e <= s:
            return []
        if meter.measure(s, e) <= cfg.min_size:
            return [piece] if (s, e) == (piece.start, piece.end) else [sub_piece(piece, text, s, e)]
        sents = bounded_sentences(text, s, e, meter, cfg.max_size)
        if cfg.similarity == "embedding":
            breaks, sims = self._embedding_breaks(sents, ctx)
        else:
            breaks, sims = None, None
        return self._assemble(piece, ctx, sents, meter, breaks, sims)

    def _embedding_breaks(self, sents: list[tuple[int, int]], ctx: ChunkContext) -> tuple[list[bool], list[float]]:
        cfg = self.config
        if ctx.embedder is None:
            raise ModelError(
                "SEMANTIC with similarity = 'embedding' needs an embedding model, but none is configured "
                "for this run. Configure embedding.model in kb.yaml (or pass --embed-model to corpus "
                "preview), or set similarity: jaccard, which needs no model."
            )
        if len(sents) < 2:
            return [], []
        texts = [ctx.text[a:b] for a, b in sents]
        try:
            vecs = ctx.embedder.embed(texts)  # one batched call for every sentence of the piece
        except ModelError:
            raise
        except Exception as exc:
            raise ModelError(f"embedding {len(texts)} sentences for SEMANTIC failed: {exc}") from exc
        import numpy as np

        v = np.asarray(vecs, dtype=np.float32)
        norms = np.linalg.norm(v, axis=1)
        norms[norms == 0] = 1.0
        v = v / norms[:, None]
        sims = [float(x) for x in np.einsum("ij,ij->i", v[:-1], v[1:])]
        return embedding_breaks(sims, cfg.breakpoint_type, cfg.breakpoint_amount), sims

    def _assemble(
        self,
        piece: Piece,
        ctx: ChunkContext,
        sents: list[tuple[int, int]],
        meter: Any,
        breaks: list[bool] | None,
        sims: list[float] | None,
    ) -> list[Piece]:
        cfg = self.config
        text = ctx.text
        lo, hi = cfg.min_size, cfg.max_size
        window = cfg.jaccard_window
        use_jaccard = breaks is None
        toks = [jaccard_tokens(text[a:b]) for a, b in sents] if use_jaccard else []
        rows: list[tuple[int, int, float | None, str, bool]] = []
        cur_s, cur_e, first_i = sents[0][0], sents[0][1], 0
        start_score: float | None = None
        start_reason = "start"
        merged = False
        for i in range(1, len(sents)):
            a, b = sents[i]
            if use_jaccard:
                if window == 0:
                    ctx_set: set[str] = set().union(*toks[first_i:i])
                else:
                    ctx_set = set().union(*toks[max(first_i, i - window) : i])
                sim = jaccard(ctx_set, toks[i])
                topic = sim < cfg.threshold
            else:
                assert breaks is not None and sims is not None
                sim = sims[i - 1]
                topic = breaks[i - 1]
            too_big = meter.measure(cur_s, b) > hi
            big_enough = meter.measure(cur_s, cur_e) >= lo
            if too_big or (topic and big_enough):
                rows.append((cur_s, cur_e, start_score, start_reason, merged))
                cur_s, first_i = a, i
                start_score, start_reason, merged = sim, ("size" if too_big and not topic else "topic"), False
            elif topic:
                merged = True
            cur_e = b
        # A last chunk under min joins the one before it when the result stays within max.
        if rows and meter.measure(cur_s, cur_e) < lo and meter.measure(rows[-1][0], cur_e) <= hi:
            ps, _, sc, rs, _ = rows.pop()
            cur_s, start_score, start_reason, merged = ps, sc, rs, True
        rows.append((cur_s, cur_e, start_score, start_reason, merged))
        out = []
        for a, b, score, reason, was_merged in rows:
            meta = dict(piece.metadata)
            meta["similarity"] = cfg.similarity
            if cfg.similarity == "embedding":
                meta["breakpoint_type"] = cfg.breakpoint_type
            if score is not None:
                meta["boundary_score"] = round(score, 4)
            meta["split_reason"] = reason
            if was_merged:
                meta["merged_small"] = True
            out.append(sub_piece(piece, text, a, b, chunk_type=ChunkType.SEMANTIC_SEGMENT.value, metadata=meta))
        return out
