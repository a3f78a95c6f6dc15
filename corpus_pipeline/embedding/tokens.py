"""Token counting with the embedding model's own tokenizer (never ``len(text) / 2``).

A ``TokenCounter`` counts tokens the way the embedding model will see them, so chunk
sizes in tokens and the ``token_count`` column mean what the model means. Counting spans
of one document uses one tokenization of the whole text and the tokens' character
offsets, so measuring a span is a binary search, not a new tokenization.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import Protocol

from corpus_pipeline.embedding.settings import ESTIMATE, EmbeddingConfig, embedding_config
from corpus_pipeline.errors import ModelError

DEFAULT_MODEL = EmbeddingConfig().model


class TokenCounter(Protocol):
    name: str
    max_tokens: int  # the most content tokens one input may have (special tokens excluded)

    def count(self, text: str) -> int: ...

    def count_batch(self, texts: Sequence[str]) -> list[int]: ...

    def token_starts(self, text: str) -> list[int]: ...

    def unknown_share(self, text: str) -> float: ...


_SEGMENT = 1024  # measured: 1024 is ~1.8x faster than whole-text encode on 2 cores
_WS_RE = re.compile(r"\s")


class HFTokenCounter:
    """Counts with a Hugging Face ``tokenizer.json`` (the sentence-transformers model's)."""

    def __init__(self, tokenizer_json: Path, *, name: str, max_seq_length: int) -> None:
        from tokenizers import Tokenizer

        try:
            tok = Tokenizer.from_file(str(tokenizer_json))
        except Exception as exc:  # tokenizers raises a bare Exception
            raise ModelError(f"cannot load tokenizer {tokenizer_json}: {exc}") from exc
        tok.no_truncation()
        tok.no_padding()
        self._tok = tok
        self.name = name
        # The special tokens ([CLS]/[SEP], <s>/</s>) take some of the model's positions.
        self.specials = len(tok.encode("", add_special_tokens=True).ids)
        self.max_tokens = max_seq_length - self.specials
        unk = next((t for t in ("[UNK]", "<unk>") if tok.token_to_id(t) is not None), None)
        self.unknown_id = tok.token_to_id(unk) if unk else None

    def count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        encs = self._tok.encode_batch(list(texts), add_special_tokens=False)
        return [len(e.ids) for e in encs]

    def unknown_share(self, text: str) -> float:
        """Share of ``text``'s tokens the model does not know (``[UNK]``): an English-only
        model reads most Chinese characters so, and its vector for them means nothing."""
        if self.unknown_id is None:
            return 0.0
        ids = self._tok.encode(text, add_special_tokens=False).ids
        return sum(1 for i in ids if i == self.unknown_id) / len(ids) if ids else 0.0

    def token_starts(self, text: str) -> list[int]:
        """The start offset of every token of ``text``, in order (one entry per token, so
        the tokens starting in ``[a, b)`` are counted with two binary searches).

        Long texts are cut at whitespace into segments of about ``_SEGMENT`` characters and
        encoded with ``encode_batch``, which runs on every core. Pre-tokenizers split at
        whitespace (and the cut keeps the whitespace at the start of the next segment, where
        byte-level and metaspace tokenizers attach it), so the tokens are the same as for
        the whole text; ``tests/chunking/test_tokens.py`` checks it on real documents.
        """
        n = len(text)
        if n <= _SEGMENT:
            return [s for s, _ in self._tok.encode(text, add_special_tokens=False).offsets]
        cuts = [0]
        search = _WS_RE.search
        pos = _SEGMENT
        while pos < n:
            m = search(text, pos)
            if m is None:
                break
            cuts.append(m.start())
            pos = m.start() + _SEGMENT
        cuts.append(n)
        bounds = list(pairwise(cuts))
        encs = self._tok.encode_batch([text[a:b] for a, b in bounds], add_special_tokens=False)
        starts: list[int] = []
        extend = starts.extend
        for (a, _), enc in zip(bounds, encs, strict=True):
            extend([a + s for s, _ in enc.offsets] if a else [s for s, _ in enc.offsets])
        return starts


class EstimateTokenCounter:
    """A conservative token estimate for a model whose tokenizer is not on this machine
    (a remote endpoint's): every CJK character is one token, every run of letters and
    digits one token per started 3 characters, every other visible character one token.

    Measured on 500-character windows of the benchmark corpora it counts at least as many
    tokens as e5's SentencePiece for 99.8 % (English) and 100 % (Chinese) of them, and is never
    more than 6 % under WordPiece (MiniLM) or e5 (``tests/embedding/test_models.py``); it
    overcounts English by about a third, so chunks sized by it fit those models. Byte-level BPE tokenizers can need two tokens for
    one rare Chinese character: for such a model name its tokenizer (``embedding.tokenizer``)
    or lower ``embedding.max_tokens``.
    """

    unknown_id = None

    def __init__(self, *, name: str, max_tokens: int) -> None:
        self.name = name
        self.max_tokens = max_tokens

    def token_starts(self, text: str) -> list[int]:
        starts: list[int] = []
        for m in _ESTIMATE_RE.finditer(text):
            if m.lastgroup == "word":
                starts.extend(range(m.start(), m.end(), _CHARS_PER_WORD_TOKEN))
            else:
                starts.append(m.start())
        return starts

    def count(self, text: str) -> int:
        return len(self.token_starts(text))

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        return [self.count(t) for t in texts]

    def unknown_share(self, text: str) -> float:
        return 0.0


_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
_ESTIMATE_RE = re.compile(f"(?P<cjk>[{_CJK}])|(?P<word>[^\\W_{_CJK}]+)|(?P<other>\\S)")
_CHARS_PER_WORD_TOKEN = 3
#: The window assumed for a remote model whose window is neither written nor known.
DEFAULT_REMOTE_WINDOW = 512


def resolve_model_path(model: str) -> Path | None:
    """A local folder for ``model`` (packaged, a path, a cached hub model), else None."""
    from corpus_pipeline.embedding.models import model_folder

    return model_folder(model)


def _tokenizer_source(cfg: EmbeddingConfig) -> tuple[Path | None, str]:
    """Where the tokenizer of ``cfg``'s model is: (tokenizer.json or None, what it is)."""
    from corpus_pipeline.embedding.models import model_folder, packaged

    name = cfg.tokenizer
    if name == ESTIMATE:
        return None, ESTIMATE
    if name is None and cfg.remote and packaged(cfg.model) is None and not Path(cfg.model).expanduser().is_dir():
        return None, ESTIMATE  # a remote model of unknown tokenizer
    source = name or cfg.model
    path = Path(source).expanduser()
    if path.is_file():
        return path, source
    folder = model_folder(source)
    if folder is None:
        what = "embedding.tokenizer" if name else "embedding.model"
        raise ModelError(
            f"{what} = {source!r}: no such model or tokenizer on this machine, so its tokens cannot be counted. "
            f"Name a local model folder, a tokenizer.json, a packaged model, or {ESTIMATE!r}."
        )
    tj = folder / "tokenizer.json"
    if not tj.exists():
        raise ModelError(f"model folder {folder} has no tokenizer.json; cannot count tokens (set embedding.tokenizer)")
    return tj, source


@functools.lru_cache(maxsize=16)
def _counter(cfg: EmbeddingConfig) -> TokenCounter:
    from corpus_pipeline.embedding.models import model_folder, model_prefixes, window_of

    tj, source = _tokenizer_source(cfg)
    folder = tj.parent if tj is not None else None
    window = cfg.max_tokens or (window_of(folder) if folder is not None else None)
    if window is None:
        window = DEFAULT_REMOTE_WINDOW
    local_folder = model_folder(cfg.model) if not cfg.remote else folder
    _, passage = model_prefixes(cfg.model, local_folder, query=cfg.query_prefix, passage=cfg.passage_prefix)
    if tj is None:
        est = EstimateTokenCounter(name=f"{cfg.model} ({ESTIMATE})", max_tokens=window)
        est.max_tokens = window - 2 - est.count(passage)
        return est
    counter = HFTokenCounter(tj, name=source, max_seq_length=window)
    # The passage prefix is embedded with every chunk: it takes its tokens from the window.
    counter.max_tokens -= counter.count(passage)
    if counter.max_tokens < 8:
        raise ModelError(
            f"embedding model {cfg.model!r}: a window of {window} tokens leaves {counter.max_tokens} for the text "
            f"after the special tokens and the passage prefix {passage!r}; raise embedding.max_tokens."
        )
    return counter


def token_counter_for(embedding: EmbeddingConfig | str | None = None) -> TokenCounter:
    """The token counter of a KB's embedding model: ``embedding`` is kb.yaml's section (or a
    bare model name, or None for the default). ``max_tokens`` is what one chunk may have:
    the model's window less its special tokens and the passage prefix."""
    return _counter(embedding_config(embedding))
