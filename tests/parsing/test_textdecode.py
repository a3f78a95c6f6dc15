"""Invalid UTF-8 (issue 40): refused with where it is, unless a legacy encoding reads every
non-ASCII character where such a character sits in real text. The rule's edges, on literal
bytes; its rates on real files are in ``benchmarks/decoding/RESULTS.md``."""

from __future__ import annotations

import pytest

from corpus_pipeline.errors import DocumentError
from corpus_pipeline.parsing.plausible import reads_as_text, reads_as_text_strictly
from corpus_pipeline.parsing.textdecode import decode_text

ASCII = b"Restores start from the console. A single file is back in under a minute.\n" * 6  # 444 bytes


@pytest.mark.parametrize(
    ("text", "encoding"),
    [
        ("Café au lait, naïve résumé.\n", "cp1252"),
        ("Herr Müller, Frau Bäcker and Mr Søren went to the café on Straße 5.\n", "cp1252"),
        ("She said “don’t” and left – twice.\n", "cp1252"),  # typography alone: quotes in pairs, a dash
        ("Le résumé de la réunion a été envoyé à François et à Hélène.\n" * 4, "cp1252"),
        ("El niño pidió una canción más. ¿Qué hora es? Son las cinco.\n", "latin_1"),
        ("def main():\n    # Привет мир\n    return 0\n", "cp1251"),  # Cyrillic words in code
    ],
)
def test_decode_genuine_legacy_text_with_accents_between_letters(text: str, encoding: str) -> None:
    assert decode_text(text.encode(encoding)) == text


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        (ASCII[:200] + b"\xff\xfe" + ASCII[200:], "at byte 200 (line 3): 0xFF 0xFE;"),  # a stray BOM
        (ASCII[:200] + b"\x80" + ASCII[200:], "at byte 200 (line 3)"),
        (ASCII + b"\x81\x8d", "at byte 444 (line 7): 0x81 0x8D;"),  # bytes cp1252 does not even define
        (ASCII[:100] + b"\xc3" + ASCII[100:], "at byte 100 (line 2)"),  # half of an é
        # letters in words the text has elsewhere: th\xe4e, cons\xf3ole, mi\xe9nute, fr\xf2om
        (
            b"the cat and the console: one minute from here.\nth\xe4e cons\xf3ole, mi\xe9nute fr\xf2om\n",
            "at byte 49 (line 2): 0xE4;",
        ),
    ],
    ids=["fffe", "x80", "undefined", "half-e-acute", "letters-in-known-words"],
)
def test_decode_refuses_stray_bytes_in_ascii_naming_the_byte(raw: bytes, where: str) -> None:
    with pytest.raises(DocumentError, match=r"^not valid UTF-8: invalid byte") as err:
        decode_text(raw)
    assert where in str(err.value) and "Re-save it as UTF-8" in str(err.value)


def test_decode_refuses_a_single_accented_letter_too_little_evidence_of_an_encoding() -> None:
    raw = "The café opens at nine; the menu lists coffee and tea.\n".encode("cp1252")
    with pytest.raises(DocumentError, match=r"not valid UTF-8: invalid byte\(s\) in ASCII text, the first at byte 7"):
        decode_text(raw)


@pytest.mark.parametrize(
    "raw",
    [
        ("正常的 UTF-8 文本，第二行。\n" * 3).encode()[:-2],
        "It’s the end of the “file”: 世界".encode()[:-1],
        "Ends with an accent: é".encode()[:-1],  # only the lead byte of é is left
    ],
    ids=["zh", "en-with-utf8-quotes", "en"],
)
def test_decode_refuses_utf8_cut_short_at_the_end(raw: bytes) -> None:
    with pytest.raises(DocumentError, match=r"^not valid UTF-8"):
        decode_text(raw)


def test_decode_names_the_offset_where_a_utf8_text_is_cut_short() -> None:
    raw = ("正常的 UTF-8 文本，第二行。\n" * 3).encode()[:-2]
    with pytest.raises(DocumentError, match=r"ends inside a multibyte character at byte 110 \(line 3\)"):
        decode_text(raw)


def test_decode_refuses_a_cp1252_piece_pasted_into_utf8() -> None:
    raw = (
        "We’ll restore it — quickly.\n".encode()
        + ASCII
        + "Le résumé a été envoyé à François.\n".encode("cp1252") * 8  # 56 accents: more than the UTF-8
    )
    with pytest.raises(DocumentError, match=r"^not valid UTF-8: 56 invalid byte sequence\(s\)|^cannot"):
        decode_text(raw)


@pytest.mark.parametrize(
    ("text", "strictly"),
    [
        ("Café au lait, naïve résumé.", True),
        ("don’t and “quoted”", True),  # three unmistakable marks
        ("the café", False),  # one letter: no evidence
        ("Hello ÿþ world, more text here", False),  # rare letters, glued together
        ("wo€rd, ch©ap, x½y, a¿b", False),  # symbols inside words
        ("naïve, naïve, naïve, naïve and naive", True),  # its own base letter gives a known word: fine
        ("the thäe then tähen", False),  # without it, a word the text has: a stray byte
        ("ÔàéëÔàéë óæå ïðèâåò", False),  # Russian read as cp1252: words of accented letters only
    ],
)
def test_plausible_characters_sit_where_real_text_puts_them(text: str, strictly: bool) -> None:
    assert reads_as_text_strictly(text) is strictly


def test_a_long_text_tolerates_a_few_odd_characters_but_not_many() -> None:
    french = "Le résumé de la réunion a été envoyé à François. " * 10  # 60 accents
    assert reads_as_text(french + "¤ ¦")
    assert not reads_as_text(french + "¤¦¨¯´¸¬" * 2)
