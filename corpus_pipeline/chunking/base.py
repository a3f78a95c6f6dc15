"""The strategy interface: one method, ``split``, over spans of a document.

A strategy receives the document's full text and one input ``Piece`` (a span of it) and
returns the pieces it cuts that span into. Batching over pieces, clean-up and numbering
live once in ``pipeline``; token counting in ``tokens``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from corpus_pipeline.chunking.params import StrategyConfig
from corpus_pipeline.chunking.sizes import SizeMeter
from corpus_pipeline.models import Block, Piece
from corpus_pipeline.tokens import TokenCounter


@dataclass
class ChunkContext:
    """What a strategy may use besides the text: the document's parsed blocks, the token
    counter of the KB's embedding model, and model clients where configured."""

    text: str
    token_counter: TokenCounter | None = None
    blocks: Sequence[Block] = ()
    embedder: Any = None  # corpus_pipeline.embedding.Embedder, for SEMANTIC (embedding mode)
    llm: Any = None  # corpus_pipeline.llm.LLMClient, for PROPOSITION and LLM
    stats: dict[str, int] = field(default_factory=dict)
    _meters: dict[str, SizeMeter] = field(default_factory=dict)

    def meter(self, unit: str) -> SizeMeter:
        m = self._meters.get(unit)
        if m is None:
            m = self._meters[unit] = SizeMeter(self.text, unit, self.token_counter)
        return m

    def bump(self, key: str, n: int = 1) -> None:
        self.stats[key] = self.stats.get(key, 0) + n


class Strategy(ABC):
    """A chunking strategy. Subclasses set the class attributes and implement ``split``."""

    name: ClassVar[str]
    code: ClassVar[int | None] = None  # seed 003's numeric code, where it has one
    version: ClassVar[str] = "v1"  # bump when the output for the same input can change
    description: ClassVar[str] = ""
    config_class: ClassVar[type[StrategyConfig]]
    keeps_source_text: ClassVar[bool] = True  # text == source[start:end] for its pieces
    # From one input piece, its pieces are never blank and never repeat (section path, start,
    # text): the pipeline's cleanup would keep them all, so it is skipped (a contract test
    # holds every strategy that claims it to it).
    clean_output: ClassVar[bool] = False

    def __init__(self, config: StrategyConfig | None = None) -> None:
        self.config = config if config is not None else self.config_class()

    @abstractmethod
    def split(self, piece: Piece, ctx: ChunkContext) -> list[Piece]:
        """Cut ``piece`` (a span of ``ctx.text``) into pieces, in order."""

    def split_all(self, pieces: Sequence[Piece], ctx: ChunkContext) -> list[Piece]:
        out: list[Piece] = []
        for piece in pieces:
            out.extend(self.split(piece, ctx))
        return out

    def split_all_then(self, pieces: Sequence[Piece], ctx: ChunkContext, then: Strategy) -> list[Piece] | None:
        """``then.split_all(self.split_all(pieces))`` in one pass, for a pair of steps that can
        be fused (no intermediate pieces made only to be cut again); ``None`` when this pair
        cannot. The result must equal the two steps run one after the other, and every piece
        in it must carry the name of the strategy that cut it."""
        return None


def sub_piece(parent: Piece, text: str, start: int, end: int, **changes: Any) -> Piece:
    """A piece cut from ``parent``: inherits its section path, block index and metadata."""
    return Piece(
        text=text[start:end],
        start=start,
        end=end,
        section_path=changes.pop("section_path", parent.section_path),
        chunk_type=changes.pop("chunk_type", parent.chunk_type),
        block_index=changes.pop("block_index", parent.block_index),
        metadata=changes.pop("metadata", parent.metadata),
        **changes,
    )


def _piece_maker() -> Callable[..., Piece]:
    """``Piece(text, start, end, section_path, chunk_type, overlap_chars, derived,
    block_index, strategy, metadata)``, all ten fields positional, at half the cost of the
    dataclass ``__init__`` (a frozen dataclass sets each field through
    ``object.__setattr__``; this sets the slots through their descriptors). For the hot
    loops that make one piece per chunk; the result is an ordinary ``Piece``."""
    new = Piece.__new__
    fields = ("text", "start", "end", "section_path", "chunk_type", "overlap_chars", "derived",
              "block_index", "strategy", "metadata")  # fmt: skip
    assert tuple(Piece.__slots__) == fields, "Piece's fields changed: update make_piece"
    s0, s1, s2, s3, s4, s5, s6, s7, s8, s9 = (getattr(Piece, f).__set__ for f in fields)

    def make_piece(
        text: str, start: int, end: int, section_path: str, chunk_type: str, overlap_chars: int,
        derived: bool, block_index: int | None, strategy: str, metadata: Any,
    ) -> Piece:  # fmt: skip
        p = new(Piece)
        s0(p, text)
        s1(p, start)
        s2(p, end)
        s3(p, section_path)
        s4(p, chunk_type)
        s5(p, overlap_chars)
        s6(p, derived)
        s7(p, block_index)
        s8(p, strategy)
        s9(p, metadata)
        return p

    return make_piece


make_piece = _piece_maker()


Factory = Callable[[StrategyConfig | None], Strategy]
