"""Text analysis for the keyword channel: CJK bigrams; identifiers kept whole and in parts.

Chinese has no spaces, and dictionary segmentation (ICU, jieba) splits the same phrase
differently in a question and in a document ("连接跟踪表满" vs "连接跟踪表满了怎么处理"),
so a keyword index on its words misses or drowns exact phrases. Overlapping character
bigrams, the approach of Lucene's CJK analyzer, need no dictionary and match any phrase
of two or more characters the question shares with the text, the rarer the stronger.

Runbooks and manuals are full of identifiers (``3.4.1``, ``gfs-7-4-12``, ``KV-E2107``,
``nf_conntrack_max``, ``/etc/keelvault``). A tokenizer that splits on punctuation turns
``3.4.1`` into three digits found everywhere; one that keeps it whole cannot match
``conntrack`` alone. So a compound is emitted whole *and* as its parts (like Lucene's
word-delimiter filter with ``preserve_original``): the whole is rare and scores high
when the question names it, the parts still match looser questions.

    keyword_text("连接跟踪表满，执行 sysctl -w nf_conntrack_max=1048576")
      -> "连接 接跟 跟踪 踪表 表满 执行 sysctl w nf_conntrack_max nf conntrack max 1048576"

Text is NFKC-normalised first (full-width letters and digits become ASCII). The full-text
index (whitespace tokenizer) then lower-cases, stems English and drops English stop
words. The same function analyses documents (the ``keyword_text`` column) and queries,
which is what makes them match.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Any

# Han (with extension A and compatibility ideographs), kana, Hangul syllables.
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
_CJK_RUN = re.compile(f"[{_CJK}]+")
# A word of letters/digits (not CJK), or a compound of such words joined by . _ - / :
_PART = f"[^\\W_{_CJK}]+"
_WORD = re.compile(f"{_PART}(?:[._\\-/:]{_PART})*")
_SPLIT = re.compile(f"{_PART}")


def cjk_bigrams(run: str) -> list[str]:
    """Overlapping bigrams of a run of CJK characters; a lone character stays a unigram."""
    if len(run) < 2:
        return [run] if run else []
    return [run[i : i + 2] for i in range(len(run) - 1)]


def _words(segment: str) -> list[str]:
    out: list[str] = []
    for m in _WORD.finditer(segment):
        word = m.group(0)
        out.append(word)
        parts = _SPLIT.findall(word)
        if len(parts) > 1:
            out.extend(parts)
    return out


#: How runs of CJK text become terms: "bigrams" (overlapping character bigrams), "jieba"
#: (jieba's search-mode words), "both" (the bigrams and jieba's words of two or more
#: characters). Chosen by measurement: benchmarks/retrieval/RESULTS.md.
CJK_ANALYSIS = "bigrams"


@functools.lru_cache(maxsize=1)
def _jieba() -> Any:
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def cjk_terms(run: str, mode: str) -> list[str]:
    """The terms of a run of CJK characters under ``mode`` (see ``CJK_ANALYSIS``)."""
    if mode == "bigrams":
        return cjk_bigrams(run)
    words = [w for w in _jieba().cut_for_search(run) if w.strip()]
    if mode == "jieba":
        return words
    return cjk_bigrams(run) + [w for w in words if len(w) >= 2]


def keyword_terms(text: str, cjk: str | None = None) -> list[str]:
    """The terms of ``text`` in order: CJK terms (``CJK_ANALYSIS``), words, compounds and
    their parts."""
    mode = cjk or CJK_ANALYSIS
    norm = unicodedata.normalize("NFKC", text)
    terms: list[str] = []
    pos = 0
    for m in _CJK_RUN.finditer(norm):
        terms.extend(_words(norm[pos : m.start()]))
        terms.extend(cjk_terms(m.group(0), mode))
        pos = m.end()
    terms.extend(_words(norm[pos:]))
    return terms


def keyword_text(text: str, cjk: str | None = None) -> str:
    """``text`` as the keyword index sees it: its terms separated by spaces."""
    return " ".join(keyword_terms(text, cjk))
