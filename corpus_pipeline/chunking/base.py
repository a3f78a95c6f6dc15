"""The strategy interface: one method, ``split``, over spans of a document.

A strategy receives the document's full text and one input ``Piece`` (a span of it) and
returns the pieces it cuts that span into. Batching over pieces, clean-up and numbering
live once in ``pipeline``; token counting in ``tokens``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from corpus_pipeline.chunking.params import StrategyConfig
from corpus_pipeline.chunking.sizes import SizeBound, SizeMeter
from corpus_pipeline.embedding.tokens import TokenCounter
from corpus_pipeline.models import Block, Piece
from corpus_pipeline.secrets import mask_error


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
    """A chunking strategy. Subclasses set the class attributes and implement ``split``.

    Besides cutting, a strategy says what it knows about itself, so that adding one is a
    module and its registration, nothing else: its size bound under a config
    (``size_bound``, read by the quality checks), its defaults in each pipeline
    (``parent_defaults`` / ``child_defaults``, seed 003's numbers), which of its keys size
    it (``size_keys``: a KB that sets one of them sizes the strategy itself, and the
    pipeline's size defaults are not applied under it), whether it is the size guard of a
    pipeline (``size_guard``: its role after the first step is FALLBACK), whether it calls
    an LLM or needs an embedding model (``calls_llm`` / ``needs_embedder``), and its code
    in version names (``short_code``).
    """

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
    #: a later step of this strategy guarantees the size (role FALLBACK, not OPTIMIZE)
    size_guard: ClassVar[bool] = False
    #: settings applied under the KB's own in a parent / child pipeline
    parent_defaults: ClassVar[Mapping[str, Any]] = {}
    child_defaults: ClassVar[Mapping[str, Any]] = {}
    #: keys that size the strategy: a KB setting any of them replaces the size defaults
    size_keys: ClassVar[frozenset[str]] = frozenset()
    #: the strategy in version names (``p1-c32-...``); default: its numeric code
    short_code: ClassVar[str] = ""

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

    # ------------------------------------------------------------------ self-knowledge

    @classmethod
    def size_bound(cls, config: StrategyConfig) -> SizeBound | None:
        """The size its pieces stay within under ``config``; None when it does not bound
        sizes (STRUCTURE: sections are as long as they are)."""
        return None

    @classmethod
    def calls_llm(cls, config: StrategyConfig) -> bool:
        """Whether it may call an LLM under ``config`` (then the LLM model is part of the
        strategy version, and the run opens an LLM client)."""
        return False

    @classmethod
    def needs_embedder(cls, config: StrategyConfig) -> bool:
        """Whether it embeds text under ``config`` (SEMANTIC by embeddings)."""
        return False

    @classmethod
    def role_defaults(cls, pipeline: str, user_keys: frozenset[str] | set[str]) -> dict[str, Any]:
        """The settings under the KB's own in the ``parent`` or ``child`` pipeline. A child
        strategy the KB sized itself (a ``size_keys`` key is set) gets no size default."""
        if pipeline == "parent":
            return dict(cls.parent_defaults)
        if cls.size_keys & set(user_keys):
            return {}
        return dict(cls.child_defaults)

    @classmethod
    def code_letter(cls) -> str:
        """Its code in version names: ``short_code``, else the numeric code, else the first
        letter of its name."""
        if cls.short_code:
            return cls.short_code
        return str(cls.code) if cls.code is not None else cls.name[0].lower()


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


def fallback_pieces(pieces: Sequence[Piece], *, from_: str, to: str, reason: str, retry: bool = False) -> list[Piece]:
    """``pieces`` a fallback strategy made, marked as such (source text kept, so not derived):
    ``fallback_from`` / ``fallback_to`` / ``fallback_reason``, and ``llm_retry`` when the
    cause may pass (no LLM, a failed call): a later run with a working LLM redoes them."""
    extra: dict[str, Any] = {"fallback_from": from_, "fallback_to": to, "fallback_reason": mask_error(reason)}
    if retry:
        extra["llm_retry"] = True
    return [
        make_piece(
            p.text, p.start, p.end, p.section_path, p.chunk_type, p.overlap_chars, False, p.block_index, "",
            {**p.metadata, **extra},
        )
        for p in pieces
    ]  # fmt: skip


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
