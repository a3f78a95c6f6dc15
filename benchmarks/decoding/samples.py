"""The samples of the decoding benchmark, built at run time from text read elsewhere (nothing
is copied into the repository), the same on every run on a given machine.

Real text comes from three places:

- ``../shared/corpora/markdown-5mb`` (English and Chinese Markdown) and
  ``../shared/benchmarks/cmrc2018-trial-zh/docs`` (Chinese Wikipedia paragraphs);
- the repository's sample KBs, ``data/kbs/*/*.md|txt`` (Chinese and English);
- the system's gettext catalogs, ``/usr/share/locale/<lang>/LC_MESSAGES/*.mo``: the
  translated messages of coreutils, apt, git, PostgreSQL... in French, German, Spanish,
  Italian, Portuguese, Russian, Polish, Czech, Japanese, Korean, simplified and traditional
  Chinese. The shared corpora
  hold no Japanese, Korean, Russian or Western European prose; these catalogs are the only
  native text in those languages on the machine. Where a language has no catalogs, its
  categories are empty and the results say so.

A legacy sample is a document encoded in one code page (messages or lines the code page cannot
hold are left out, so the expected text is known). A corrupted sample is UTF-8 damaged in one
of the ways invalid UTF-8 happens; no decoding of it is right, it must be refused.
"""

from __future__ import annotations

import gettext
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SHARED = REPO.parent / "shared"
LOCALE = Path("/usr/share/locale")

#: Sizes a sample is cut to (at a line end), in characters: short files are where guessing is
#: hardest, so a spread of sizes is drawn.
SIZES = (300, 1000, 3000, 8000)
PER_CATEGORY = 60
#: Mixed into every category's random seed (``--seed``): another draw of the same samples' kinds.
SEED = ""
#: Stray bytes in ASCII are where a legacy reading is most tempting: more samples.
STRAY_SAMPLES = 1000
WESTERN = ("fr", "de", "es", "it", "pt_BR")


@dataclass(frozen=True)
class Sample:
    category: str
    name: str
    raw: bytes
    #: the right text; None when every decoding is wrong (the sample must be refused)
    expected: str | None


# --- sources -------------------------------------------------------------------------------


def _files(*globs: tuple[Path, str]) -> list[Path]:
    out: list[Path] = []
    for root, pattern in globs:
        out += sorted(p for p in root.glob(pattern) if p.is_file())
    return out


def english_files() -> list[Path]:
    corpus = SHARED / "corpora" / "markdown-5mb" / "en"
    return _files(
        (corpus, "**/*.md"),
        (SHARED / "benchmarks" / "covid-qa-en" / "docs", "*.txt"),
        (REPO / "data" / "kbs" / "product-manual-en", "*.md"),
        (REPO / "data" / "kbs" / "product-manual-en", "*.txt"),
    )


def chinese_files() -> list[Path]:
    return _files(
        (SHARED / "corpora" / "markdown-5mb" / "zh", "**/*.md"),
        (SHARED / "benchmarks" / "cmrc2018-trial-zh" / "docs", "*.txt"),
        (REPO / "data" / "kbs" / "ops-runbook-zh", "*.md"),
        (REPO / "data" / "kbs" / "ops-runbook-zh", "*.txt"),
    )


def catalog_counts() -> dict[str, int]:
    """How many gettext catalogs each language the samples use has on this machine."""
    langs = ("zh_CN", "zh_TW", "ja", "ko", *WESTERN, "ru", "pl", "cs")
    return {lang: len(list((LOCALE / lang / "LC_MESSAGES").glob("*.mo"))) for lang in langs}


def catalog_texts(lang: str) -> list[tuple[str, str]]:
    """(name, text) for each gettext catalog of ``lang``: its translated messages, one after
    the other."""
    out = []
    for mo in sorted((LOCALE / lang / "LC_MESSAGES").glob("*.mo")):
        try:
            with mo.open("rb") as f:
                catalog = gettext.GNUTranslations(f)._catalog  # type: ignore[attr-defined]
        except (OSError, ValueError):  # unreadable, or a catalog not in UTF-8: left out
            continue
        messages = [str(v).strip("\n") for k, v in catalog.items() if k and str(v).strip()]
        out.append((f"{lang}/{mo.name}", "\n".join(messages) + "\n"))
    return out


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace").replace("\ufffd", "")


def _cut(text: str, size: int) -> str:
    """The first ``size`` characters or so of ``text``, ending at a line end."""
    if len(text) <= size:
        return text
    end = text.rfind("\n", 0, size)
    return text[: end + 1] if end > size // 2 else text[:size]


def _encodable(text: str, encoding: str) -> str:
    """``text`` without the lines ``encoding`` cannot hold."""
    keep = []
    for line in text.splitlines(keepends=True):
        try:
            line.encode(encoding)
        except UnicodeEncodeError:
            continue
        keep.append(line)
    return "".join(keep)


def _pick(rng: random.Random, items: list[Sample], n: int = PER_CATEGORY) -> list[Sample]:
    return items if len(items) <= n else sorted(rng.sample(items, n), key=lambda s: s.name)


# --- legacy encodings: must decode to the text --------------------------------------------


def legacy(category: str, encoding: str, texts: list[tuple[str, str]]) -> list[Sample]:
    rng = random.Random(SEED + category)
    out = []
    for name, text in texts:
        text = _cut(_encodable(text, encoding), rng.choice(SIZES))
        if not text.strip() or text.isascii():  # pure ASCII is UTF-8: nothing to decode
            continue
        out.append(Sample(category, name, text.encode(encoding), text))
    return _pick(rng, out)


def _as_named(paths: list[Path]) -> list[tuple[str, str]]:
    return [(str(p.relative_to(p.parents[2])), _read(p)) for p in paths]


def legacy_samples() -> Iterator[Sample]:
    zh = _as_named(chinese_files())
    western = [t for lang in WESTERN for t in catalog_texts(lang)]
    yield from legacy("GB18030 (zh: shared corpora, KB)", "gb18030", zh)
    yield from legacy("GBK (zh: shared corpora, KB)", "gbk", zh)
    yield from legacy("GBK (zh_CN catalogs)", "gbk", catalog_texts("zh_CN"))
    yield from legacy("Big5 (zh_TW catalogs)", "big5", catalog_texts("zh_TW"))
    yield from legacy("Shift-JIS (ja catalogs)", "shift_jis", catalog_texts("ja"))
    yield from legacy("EUC-KR (ko catalogs)", "euc_kr", catalog_texts("ko"))
    yield from legacy("cp1252 (fr/de/es/it/pt catalogs)", "cp1252", western)
    yield from legacy("latin-1 (fr/de/es/it/pt catalogs)", "latin_1", western)
    yield from legacy("cp1252 (en: shared corpora, KB)", "cp1252", _as_named(english_files()))
    yield from legacy("cp1251 (ru catalogs)", "cp1251", catalog_texts("ru"))
    yield from legacy("cp1250 (pl/cs catalogs)", "cp1250", [t for lang in ("pl", "cs") for t in catalog_texts(lang)])


# --- corrupted UTF-8: must be refused -----------------------------------------------------


def _corrupt(
    category: str,
    texts: list[tuple[str, str]],
    damage: Callable[[random.Random, str], bytes | None],
    n: int = PER_CATEGORY,
) -> list[Sample]:
    """``n`` damaged samples; a text gives several (each with its own damage) when there are
    fewer texts than that."""
    rng = random.Random(SEED + category)
    out = []
    for name, text in texts * -(-n // max(len(texts), 1)):
        raw = damage(rng, _cut(text, rng.choice(SIZES)))
        if raw is None:
            continue
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            out.append(Sample(category, name, raw, None))
    return _pick(rng, out, n)


def _ascii_text(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if line.isascii())


def stray_bytes(k: int, *, replace: bool = False) -> Callable[[random.Random, str], bytes | None]:
    """``k`` bytes drawn from 0x80-0xFF put at random places in ASCII text (or in place of
    ``k`` of its bytes, as bit flips and bad copies leave them)."""

    def damage(rng: random.Random, text: str) -> bytes | None:
        raw = bytearray(text.encode())
        if len(raw) < 100:
            return None
        for _ in range(k):
            if replace:
                raw[rng.randrange(len(raw))] = rng.randrange(0x80, 0x100)
            else:
                raw.insert(rng.randrange(len(raw) + 1), rng.randrange(0x80, 0x100))
        return bytes(raw)

    return damage


def _multibyte_starts(raw: bytes) -> list[int]:
    return [i for i, b in enumerate(raw) if b >= 0xC0]


def _char_len(lead: int) -> int:
    return 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4


def cut_sequence(rng: random.Random, text: str) -> bytes | None:
    """One multibyte character in the middle loses its last byte(s), as a bad splice leaves it."""
    raw = text.encode()
    starts = [i for i in _multibyte_starts(raw) if len(raw) // 4 < i < 3 * len(raw) // 4]
    if not starts:
        return None
    i = rng.choice(starts)
    n = _char_len(raw[i])
    return raw[: i + rng.randrange(1, n)] + raw[i + n :]


def truncated_end(rng: random.Random, text: str) -> bytes | None:
    """The file ends inside a multibyte character (a copy or download cut short)."""
    raw = text.encode()
    starts = [i for i in _multibyte_starts(raw) if i > len(raw) // 2]
    if not starts:
        return None
    i = rng.choice(starts)
    return raw[: i + rng.randrange(1, _char_len(raw[i]))]


def pasted_cp1252(fragments: list[str], lines: int = 1) -> Callable[[random.Random, str], bytes | None]:
    """``lines`` lines of cp1252 (Western messages with accents) pasted between two lines of
    UTF-8 text that has non-ASCII characters of its own."""

    def damage(rng: random.Random, text: str) -> bytes | None:
        if text.isascii():
            return None
        own = text.splitlines(keepends=True)
        at = rng.randrange(len(own) + 1)
        pasted = "".join(rng.choice(fragments) + "\n" for _ in range(lines)).encode("cp1252")
        return "".join(own[:at]).encode() + pasted + "".join(own[at:]).encode()

    return damage


#: Used when the machine has no Western catalogs.
FALLBACK_FRAGMENTS = [
    "Le résumé de la réunion a été envoyé à François.",
    "Die Größe der Datei überschreitet das Maximum für Müller’s Konto.",
    "El niño pidió una canción más – otra vez.",
]


def corrupted_samples() -> Iterator[Sample]:
    en = _as_named(english_files())
    en_ascii = [(n, _ascii_text(t)) for n, t in en]
    zh = _as_named(chinese_files())
    fragments = [
        line
        for _, text in [t for lang in WESTERN for t in catalog_texts(lang)]
        for line in _encodable(text, "cp1252").splitlines()
        if 20 < len(line) < 120 and not line.isascii()
    ] or FALLBACK_FRAGMENTS
    for k in (1, 2, 3, 4, 5, 10):
        yield from _corrupt(f"ASCII + {k} stray byte(s) (en)", en_ascii, stray_bytes(k), STRAY_SAMPLES)
    for k in (3, 4, 5):
        yield from _corrupt(
            f"ASCII, {k} byte(s) replaced by stray ones (en)", en_ascii, stray_bytes(k, replace=True), STRAY_SAMPLES
        )
    yield from _corrupt("UTF-8, a character cut mid-text (zh)", zh, cut_sequence)
    yield from _corrupt("UTF-8, a character cut mid-text (en)", en, cut_sequence)
    yield from _corrupt("UTF-8 + a pasted cp1252 line (zh)", zh, pasted_cp1252(fragments))
    yield from _corrupt("UTF-8 + a pasted cp1252 line (en)", en, pasted_cp1252(fragments))
    yield from _corrupt("UTF-8 + 8 pasted cp1252 lines (en)", en, pasted_cp1252(fragments, 8))
    yield from _corrupt("UTF-8 truncated mid-character (zh)", zh, truncated_end)
    yield from _corrupt("UTF-8 truncated mid-character (en)", en, truncated_end)
