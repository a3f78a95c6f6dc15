"""Finding headings in plain and Markdown text (seed 002's ``DocumentLineClassifier``).

``classify_line`` sorts one line into heading / list item / body by the seed's eight forms,
in the seed's order of priority:

    1 markdown      ``## 用户管理``                      heading, level = number of ``#``
    2 appendix      ``附录 A 术语表`` / ``Appendix B``    heading
    3 step          ``第 1 步：安装`` / ``步骤 2`` / ``Step 3``   list item
    4 chapter       ``第三章 系统设计`` / ``第二节`` / ``第五条``  heading
    5 multi_digit   ``2.3.1 接口定义``                    heading, depth = numbers
    6 outline       ``一、项目背景`` / ``（一）范围``       heading or list item
    7 digit         ``1、概述`` / ``1. Overview``         heading or list item
    8 bullet        ``- 支持批量导入`` / ``* [ ] todo``     list item

``find_headings`` applies it to a whole span and fixes what the seed admits or misses:

- lines inside fenced code (```` ``` ```` / ``~~~``) and YAML front matter are never
  headings (seed 001's pitfall: ``# comment`` in a bash block);
- setext headings (a line underlined with ``===`` / ``---``) are headings;
- the parser's TITLE blocks (DOCX / HTML / Markdown), when given, are headings with the
  parser's level even where the line classifier would not call them one;
- heading vs list item (forms 6 and 7): the content must look like a title (short, no
  sentence punctuation: the seed's rule, with a longer limit for Latin text), and numbered
  lines that sit next to each other without text between them are a list, not headings;
  in a document that uses Markdown headings, ``1.`` / ``1.2`` lines are list items;
- levels: Markdown, setext and TITLE-block levels are absolute; the other forms nest under
  the last of those and rank among themselves by first appearance (a document's first
  numbering style is its top level), so ``一、`` > ``（一）`` > ``1.`` comes out right;
  the seed's stack logic assumed contiguous levels and nested siblings otherwise.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from itertools import compress, repeat
from operator import attrgetter, eq
from typing import NamedTuple

from corpus_pipeline.chunking.text import _CJK_RE
from corpus_pipeline.models import Block

_CN_NUM = "一二三四五六七八九十百千零〇两"
_MARKDOWN = re.compile(r"(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_APPENDIX = re.compile(
    r"(?:附录|附件|Appendix|APPENDIX|Annex|ANNEX)(?:\s*[A-Z0-9" + _CN_NUM + r"]{1,3})?(?:$|[\s:：.、\-—].*$)"
)
_STEP = re.compile(
    r"(?:第\s*[0-9" + _CN_NUM + r"]+\s*步|步骤\s*[0-9" + _CN_NUM + r"]+|(?:Step|STEP)\s+\d+)(?:$|[\s:：.、)）].*$)"
)
_CHAPTER = re.compile(r"第\s*[0-9" + _CN_NUM + r"]+\s*([篇部编卷章节条款])(?:$|[\s:：、.](.*)$|(.+)$)")
_CHAPTER_DEPTH = {"篇": 0, "部": 0, "编": 0, "卷": 0, "章": 1, "节": 2, "条": 3, "款": 4}
_MULTI_DIGIT = re.compile(r"(\d{1,2}(?:\.\d{1,3})+)\.?[ \t]+(\S.*)$")
_OUTLINE = re.compile(r"([" + _CN_NUM + r"]{1,3})、\s*(\S.*)$")
_PAREN_OUTLINE = re.compile(r"[（(]([" + _CN_NUM + r"]{1,3})[）)]\s*(\S.*)$")
_DIGIT = re.compile(r"(\d{1,2})(?:、\s*|[.．][ \t]+)(\S.*)$")
_CLOSING = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_AMBIGUOUS = frozenset({"outline", "paren_outline", "digit"})
_LISTISH = _AMBIGUOUS | {"multi_digit"}
_new = tuple.__new__  # NamedTuple records built without their Python-level __new__
_ATTRS = re.compile(r"\s*\{[^{}]*[#.][^{}]*\}\s*$")  # "Title { #anchor }" (attr_list)
_BULLET = re.compile(r"[-*+•·][ \t]")
_SENTENCE_END = tuple("。！？；.!?;，,：:")
_INNER_PUNCT = ("，", "；", "。", "：")

# Lines worth classifying: anything else is body.
_CANDIDATE_BODY = (
    r"[ \t]{0,3}(?:#|附录|附件|Appendix|APPENDIX|Annex|ANNEX|第|步骤|Step|STEP|["
    + _CN_NUM
    + r"]{1,3}、|[（(]["
    + _CN_NUM
    + r"]{1,3}[）)]|\d{1,2}(?:\.\d{1,3})*[.．、 \t]|(?:=+|-+)[ \t]*\r?$)"
)


def _fenced_block(mark: str, name: str) -> str:
    """A whole fenced code block, opening line to closing line (or to the end: an unclosed
    fence runs on, as in CommonMark). The closing line is the same character at least as
    many times, at most three spaces in, then only whitespace. Between the two, the scan
    jumps from one ``mark`` character to the next (possessively: no backtracking state is
    kept) and asks only there whether a closing line starts."""
    at_line_start = r"(?:(?<=\n)|(?<=\n[ \t])|(?<=\n[ \t]{2})|(?<=\n[ \t]{3}))"
    close = at_line_start + "(?P=" + name + ")" + mark + r"*[^\S\n]*(?:\n|\Z)"
    return (
        "(?P<"
        + name
        + ">"
        + mark
        + "{3,})[^\n]*+"  # the opening line
        + "(?:[^"
        + mark
        + "]++|(?!"
        + close
        + ")"
        + mark
        + ")*+"  # up to the closing line
        + "(?:(?P="
        + name
        + ")"
        + mark
        + r"*[^\S\n]*+)?"  # the closing line, without its newline
    )


_LINE_SCAN_BODY = (
    r"[ \t]{0,3}(?:(?P<hashes>#{1,6})[ \t]+(?P<title>[^\n]*)"  # an ATX heading and its title
    + "|"
    + _fenced_block("`", "backticks")  # a ``` block, whole
    + "|"
    + _fenced_block("~", "tildes")  # a ~~~ block, whole
    # a line to classify (the empty group marks it)
    + r"|(?P<other>)(?=[附AaS步第"
    + _CN_NUM
    + r"（(0-9=\-])(?="
    + _CANDIDATE_BODY
    + r"))"
)
# One scan per document visits only the lines that can matter. "\n" first, so the regex
# engine jumps from line to line (a "^" pattern in MULTILINE mode is tried at every
# character), and a lookahead on the line's first character (what any alternative can start
# with) drops most lines after one character-class test. A fenced block is one match, so
# the "#" lines inside it are never seen; ``lastindex`` tells the alternatives apart.
_LINE_SCAN = re.compile(r"\n(?=[ \t#`~附AaS步第" + _CN_NUM + r"（(0-9=\-])" + _LINE_SCAN_BODY, re.M)
_LINE_SCAN_FIRST = re.compile(_LINE_SCAN_BODY, re.M)  # the span's first line, matched on its own
_ATX, _OTHER = _LINE_SCAN.groupindex["title"], _LINE_SCAN.groupindex["other"]  # their lastindex
_LASTINDEX = attrgetter("lastindex")
_FRONT_MATTER_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*\r?$", re.M)
_SETEXT = re.compile(r"[ \t]{0,3}(=+|-{2,})[ \t]*\r?$")
_NOT_PARAGRAPH = re.compile(r"[ \t]*(?:[-*+>|#]|\d{1,3}[.)、]|```|~~~)")

HEADING, LIST_ITEM, BODY = "heading", "list_item", "body"
EXPLICIT_FORMS = frozenset({"markdown", "setext", "title_block"})


class LineClass(NamedTuple):
    """What one line is (a NamedTuple: thousands are made per document, cheaply)."""

    kind: str  # HEADING, LIST_ITEM or BODY
    form: str  # markdown, appendix, step, chapter, multi_digit, outline, paren_outline, digit, bullet, body
    depth: int = 1  # level for markdown; depth inside its numbering form otherwise
    title: str = ""


_BODY_LINE = LineClass(BODY, "body")
_BULLET_START = frozenset("-*+•·")


def looks_like_heading(content: str) -> bool:
    """The seed's ``looksLikeHeadingContent``: short, not a sentence, no inner punctuation.
    Latin text may be longer (60 characters) than Chinese (24)."""
    c = content.strip()
    if not c or c.endswith(_SENTENCE_END):
        return False
    n = len(c)
    if n > 60:
        return False
    if n > 24 and len(_CJK_RE.findall(c)) * 10 > 3 * n:  # mostly Chinese: the seed's 24
        return False
    return not any(p in c for p in _INNER_PUNCT)


def classify_line(line: str) -> LineClass:
    """Classify one line (without its newline) by the eight forms, in the seed's order.
    Dispatches on the first character so that most lines cost one comparison."""
    raw = line.rstrip("\r")
    s = raw.strip()
    if not s or len(raw) - len(raw.lstrip(" \t")) > 3:
        return _BODY_LINE
    c0 = s[0]
    if c0 == "#":
        m = _MARKDOWN.match(s)
        if m:
            title = _ATTRS.sub("", (m.group(2) or "")).strip()
            if title:
                return LineClass(HEADING, "markdown", len(m.group(1)), title)
        return _BODY_LINE
    if c0 in _BULLET_START:
        return LineClass(LIST_ITEM, "bullet", 1, s) if _BULLET.match(s) else _BODY_LINE
    if c0 in "附AaS步第":
        if _APPENDIX.match(s) and looks_like_heading(s):
            return LineClass(HEADING, "appendix", 1, s)
        if _STEP.match(s):
            return LineClass(LIST_ITEM, "step", 1, s)
        m = _CHAPTER.match(s)
        if m:
            depth = _CHAPTER_DEPTH[m.group(1)]
            rest = (m.group(2) or m.group(3) or "").strip()
            if not rest or looks_like_heading(rest):
                return LineClass(HEADING, "chapter", depth, s)
            # "第五条 用人单位应当……。": an article with its text on the same line; the
            # marker alone is the title.
            return LineClass(HEADING, "chapter", depth, s[: m.end(1)])
        return _BODY_LINE
    if c0.isdigit():
        m = _MULTI_DIGIT.match(s)
        if m:
            content = m.group(2)
            # "3.14 is pi" / "1.5 GHz": a number starting a sentence or a quantity, not a
            # section number.
            if (
                looks_like_heading(content)
                and not content[0].isdigit()
                and not content[0].islower()
                and not _UNIT.match(content)
            ):
                return LineClass(HEADING, "multi_digit", m.group(1).count(".") + 1, s)
            return _BODY_LINE
        m = _DIGIT.match(s)
        if m:
            return LineClass(HEADING if looks_like_heading(m.group(2)) else LIST_ITEM, "digit", 1, s)
        return _BODY_LINE
    if c0 in _CN_NUM:
        m = _OUTLINE.match(s)
        if m:
            return LineClass(HEADING if looks_like_heading(m.group(2)) else LIST_ITEM, "outline", 1, s)
        return _BODY_LINE
    if c0 in "（(":
        m = _PAREN_OUTLINE.match(s)
        if m:
            return LineClass(HEADING if looks_like_heading(m.group(2)) else LIST_ITEM, "paren_outline", 1, s)
    return _BODY_LINE


# a quantity's unit after the number ("1.5 GHz", "2.5 GB/s", "3.3 V"), not a title
_UNIT = re.compile(r"(?:[kKMGTP]i?)?(?:Hz|B|b|bps|Bps|V|W|A|mA|ms|s|m|km|cm|mm|kg|g|°C|%)(?:/s)?(?:\s|$)")
_NUMBER_SPACE = re.compile(r"(\d{1,2})[ \t\u3000]+(\S.*)$")
# forms that are headings wherever they stand alone (a Markdown list marker, "1." / "1)",
# is not among them: that line is a list item)
_STANDALONE_FORMS = frozenset({"chapter", "appendix", "outline", "paren_outline", "multi_digit"})


def numbered_heading(line: str) -> LineClass | None:
    """The line as a numbered heading, or None: what a line standing alone is when it looks
    like a heading (short, no sentence-ending punctuation, no inner punctuation) and is
    numbered like one: ``第一章 总则``, ``附录 A``, ``一、背景``, ``（一）范围``, ``2.3.1 堆内存溢出``,
    ``1、概述``, ``1 适用场景`` (form ``number``). A Markdown list marker (``1. x``, ``1) x``)
    is no heading. The parsers (text and Markdown TITLE blocks) and STRUCTURE (numbered lines
    in documents that have explicit headings) both ask this function."""
    lc = classify_line(line)
    if lc.kind == HEADING:
        if lc.form in _STANDALONE_FORMS:
            return lc
        if lc.form == "digit" and "、" in lc.title[:4]:
            return lc
        return None
    if lc.kind == BODY:
        s = line.strip()
        m = _NUMBER_SPACE.match(s)
        if m:
            content = m.group(2)
            if looks_like_heading(content) and not content[0].isdigit() and not content[0].islower():
                return LineClass(HEADING, "number", 1, s)
    return None


def heading_level(lc: LineClass) -> int:
    """An absolute level (2..6) for a numbered heading found by ``numbered_heading``, for the
    parsers' section stacks (the document's title is 1): chapters and outlines 2, sections
    and parenthesised outlines 3, ``1.2.3`` by its depth."""
    if lc.form == "chapter":
        return 3 if lc.depth >= 2 else 2  # 节 / 条 / 款 under 章 / 篇
    if lc.form in ("outline", "appendix"):
        return 2
    if lc.form == "paren_outline":
        return 3
    return min(lc.depth + 1, 6) if lc.form == "multi_digit" else 2


class Heading(NamedTuple):
    """A heading found in the text: ``[start, body_start)`` is its line (two for setext)."""

    start: int
    body_start: int
    level: int
    title: str
    form: str


def _line_end(text: str, pos: int, end: int) -> int:
    nl = text.find("\n", pos, end)
    return end if nl < 0 else nl


def _front_matter_end(text: str, start: int, end: int) -> int:
    """End of YAML front matter (``---`` ... ``---``) at the very start of the text, or 0."""
    if start == 0 and text.startswith("---") and text[3:4] in ("\n", "\r"):
        close = _FRONT_MATTER_CLOSE.search(text, 4, end)
        if close:
            return close.end()
    return 0


def find_headings(text: str, start: int = 0, end: int | None = None, blocks: Sequence[Block] = ()) -> list[Heading]:
    """The headings of ``text[start:end]``, in order, with their resolved levels and
    stripped titles."""
    return [_new(Heading, h[:5]) for h in heading_tuples(text, start, end, blocks)]


# (line start, body start, level, title, form, kind): a heading or a list item
HeadingTuple = tuple[int, int, int, str, str, str]


def heading_tuples(
    text: str, start: int = 0, end: int | None = None, blocks: Sequence[Block] = ()
) -> list[HeadingTuple]:
    """``find_headings`` as plain ``(start, body_start, level, title, form, kind)`` tuples,
    kind always ``heading`` (what STRUCTURE reads; thousands per document, so no NamedTuple
    is made for them, and the usual Markdown document's are returned as they are found).

    One regex pass visits only the lines that can matter (ATX headings, whole fenced
    blocks, lines starting like one of the other forms); a fenced block is one match, so a
    ``#`` line inside one is never looked at.
    """
    end = len(text) if end is None else end
    # Items are HeadingTuples, with the depth inside their form as level until the end.
    titled: dict[int, HeadingTuple] = {}  # the parser's TITLE blocks
    list_items: list[tuple[int, int]] = []  # the parser's LIST_ITEM spans: never headings
    for b in blocks:
        if not start <= b.start_offset < end:
            continue
        if b.block_type == "LIST_ITEM":
            list_items.append((b.start_offset, b.end_offset))
        # A TITLE the parser inferred from a numbered line is classified here like any
        # numbered line (same rule, relative levels), so with and without blocks agree.
        if b.block_type == "TITLE" and not (b.metadata or {}).get("inferred"):
            ls = max(start, text.rfind("\n", start, b.start_offset) + 1)
            le = _line_end(text, ls, end)
            title = " ".join(b.text.split()) or text[ls:le].strip()
            titled[ls] = (ls, le + 1 if le < end else end, b.level or 1, title, "title_block", HEADING)
    fm_end = _front_matter_end(text, start, end)
    lim = max(start, fm_end)
    # Front matter is skipped by starting after it (a fence inside it must not open).
    if lim == 0:  # the first line has no "\n" before it: matched on its own
        m0 = _LINE_SCAN_FIRST.match(text, 0, end)
        matches = list(_LINE_SCAN.finditer(text, m0.end() if m0 else 0, end))
        if m0:
            matches.insert(0, m0)
    else:  # (from lim - 1, the scan sees the line starting at lim)
        matches = list(_LINE_SCAN.finditer(text, lim - 1, end))
    kinds = list(map(_LASTINDEX, matches))  # fenced blocks are dropped in C: never looked at

    # ATX headings, in order.
    items: list[HeadingTuple] = []
    append = items.append
    for m in compress(matches, map(eq, kinds, repeat(_ATX))):
        ms = m.start()
        ls = ms + 1 if text[ms] == "\n" else ms
        if titled and ls in titled:
            continue
        title = m[_ATX].strip()
        # Without its closing "#"s and its "{ #anchor }" attribute (_ATTRS: braces at the end
        # holding a "#" or "." and no other brace; string methods, not a regex: FastAPI-style
        # docs put one on every heading).
        if title.endswith("#"):
            title = _CLOSING.sub("", title)
        i = title.rfind("{")
        if i >= 0:
            tail = title[i + 1 :].rstrip()
            if tail.endswith("}") and "}" not in tail[:-1] and ("#" in tail or "." in tail):
                title = title[:i]
            title = title.strip()
        if title:
            le = m.end()
            append((ls, le + 1 if le < end else end, len(m[1]), title, "markdown", HEADING))
    # Where explicit headings exist (Markdown, setext, the parser's), a numbered line is a
    # heading only when it stands alone as one (``numbered_heading``); else a list item.
    has_markdown = bool(items) or bool(titled)

    # The other candidate lines: setext underlines and the line classifier's forms.
    found: list[HeadingTuple] = []
    add_found = found.append
    last_ls = -1  # line start of the last one found (setext looks at the line above)
    numbered: list[tuple[int, int, str]] = []  # lines starting with a digit, classified at the end
    for m in compress(matches, map(eq, kinds, repeat(_OTHER))):
        ms = m.start()
        ls = ms + 1 if text[ms] == "\n" else ms
        if titled and ls in titled:
            continue
        le = text.find("\n", ls, end)
        if le < 0:
            le = end
        line = text[ls:le]
        first = line.lstrip(" \t")[:1]
        if first in ("=", "-") and text[ms - 1 : ms] == "\n":
            continue  # a rule or underline after a blank line: no paragraph above it
        if first.isdigit():
            # "1. Install" / "2.3 Design": list items wherever Markdown headings exist,
            # which is known only at the end (and is the usual case: no work for them then).
            numbered.append((ls, le, line))
            continue
        if first in ("=", "-") and _SETEXT.match(line):
            # "Title\n=====": the line above is the heading (a one-line paragraph).
            if ls <= start + 1:
                continue
            ps = max(start, text.rfind("\n", start, ls - 1) + 1)
            prev = text[ps : ls - 1].rstrip("\r")
            if not prev.strip() or _NOT_PARAGRAPH.match(prev) or ps == last_ls or ps in titled or ps < fm_end:
                continue
            if numbered and numbered[-1][0] == ps and classify_line(numbered[-1][2]).kind != BODY:
                continue  # the line above is a numbered heading or list item itself
            if ps > start:  # only a one-paragraph line: the line above it must be blank
                pls = max(start, text.rfind("\n", start, ps - 1) + 1)
                if text[pls : ps - 1].strip():
                    continue
            add_found(
                (ps, le + 1 if le < end else end, 1 if line.strip()[0] == "=" else 2, prev.strip(), "setext", HEADING)
            )
            last_ls = ps
            has_markdown = True
            continue
        if first == "#":
            continue
        lc = classify_line(line)
        if lc.kind != BODY:
            add_found((ls, le + 1 if le < end else end, lc.depth, lc.title, lc.form, lc.kind))
            last_ls = ls
    if numbered and not has_markdown:
        for ls, le, line in numbered:
            lc = classify_line(line)
            if lc.kind != BODY:
                add_found((ls, le + 1 if le < end else end, lc.depth, lc.title, lc.form, lc.kind))
    elif numbered:
        list_items.sort()
        for ls, le, line in numbered:
            if _in_spans(ls, list_items) or not _stands_alone(text, ls, le, start, end):
                continue
            nh = numbered_heading(line)
            if nh is not None:
                # (form "numbered": not forced to a list item as "digit" lines are here)
                add_found((ls, le + 1 if le < end else end, nh.depth, nh.title, "numbered", HEADING))
    only_explicit = all(f[4] == "setext" for f in found)  # levels are the depths
    if found:
        items = sorted(items + found)
    if titled:
        items = sorted([*titled.values(), *items])
    return items if only_explicit else _resolve_levels(items)  # (the usual Markdown / DOCX / HTML case first)


def _in_spans(pos: int, spans: list[tuple[int, int]]) -> bool:
    i = bisect_right(spans, (pos, 1 << 62)) - 1
    return i >= 0 and spans[i][0] <= pos < spans[i][1]


def _stands_alone(text: str, ls: int, le: int, start: int, end: int) -> bool:
    """Whether the line ``[ls, le)`` is a paragraph of its own: the line before it is blank,
    the start of the span or an ATX heading; the line after it blank, the end, an ATX
    heading or a fence (what ends a Markdown paragraph)."""
    if ls > start:
        ps = max(start, text.rfind("\n", start, ls - 1) + 1)
        prev = text[ps : ls - 1].strip()
        if prev and not prev.startswith("#"):
            return False
    if le < end:
        ne = _line_end(text, le + 1, end)
        nxt = text[le + 1 : ne].strip()
        if nxt and not nxt.startswith(("#", "```", "~~~")):
            return False
    return True


def _resolve_levels(items: list[HeadingTuple]) -> list[HeadingTuple]:
    """Heading vs list item for the numbered forms, then levels for all (the headings only)."""
    forms = {it[4] for it in items}
    has_markdown = "markdown" in forms or "setext" in forms
    ambiguous_seen = not forms.isdisjoint(_AMBIGUOUS)

    # Heading vs list item: numbered lines next to each other (the body of one is the
    # other's line) form a list.
    kinds = [it[5] for it in items]
    # (only digit, multi_digit and the ambiguous forms can change kind)
    if (ambiguous_seen or has_markdown) and not forms.isdisjoint(_LISTISH):
        for i, (ls, body, _, _, form, kind) in enumerate(items):
            if kind != HEADING:
                continue
            if has_markdown and form in ("digit", "multi_digit"):
                kinds[i] = LIST_ITEM
                continue
            if form not in _AMBIGUOUS:
                continue
            for j in (i - 1, i + 1):
                if 0 <= j < len(items):
                    ols, obody, _, _, oform, _ = items[j]
                    adjacent = obody == ls if j < i else body == ols
                    if adjacent and oform == form:
                        kinds[i] = LIST_ITEM
                        break

    # Levels: explicit forms are absolute; the others nest under the last explicit heading,
    # ranked by the order in which their numbering style first appears.
    rank: dict[str, int] = {}
    anchor = 0
    out: list[HeadingTuple] = []
    for (ls, body, depth, title, form, _), kind in zip(items, kinds, strict=True):
        if kind != HEADING:
            continue
        if form in EXPLICIT_FORMS:
            level = anchor = depth
        elif form == "appendix":
            level = anchor + 1
        else:
            family = "digit" if form in ("digit", "multi_digit", "numbered") else form
            if family not in rank:
                rank[family] = len(rank) + 1
            base = anchor + rank[family] * 10  # room for depths inside a family
            level = base + (depth - 1 if family != "chapter" else depth)
        out.append((ls, body, level, title, form, HEADING))
    return out
