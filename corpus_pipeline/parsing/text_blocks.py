"""Plain text into blocks, with offsets into the file's own text.

A paragraph is a run of non-blank lines. Inside it, lines are classified conservatively:

* TITLE: the first line of the file when it stands alone and is short; a line underlined
  with ``===`` (level 1) or ``---`` (level 2); a short numbered heading standing alone or
  opening its paragraph (``1 Scope``, ``2.1 确定范围``, ``一、告警规则``, ``第三章 …``,
  ``（一）…``: level = numbering depth + 1); a short ALL-CAPS line (level 2); ``# x``.
  A heading never ends with sentence punctuation.
* LIST_ITEM: a bulleted or numbered line, with its continuation lines.
* TEXT: the other lines, consecutive ones together.

The STRUCTURE strategy's own line classifier still runs over the text; these TITLE blocks
give section paths to every other consumer.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from corpus_pipeline.chunking.headings import heading_level, numbered_heading
from corpus_pipeline.models import Block, BlockType
from corpus_pipeline.parsing.blocks import SourceBlocks

_CN_NUM = "一二三四五六七八九十百零〇两"
_UNDERLINE = re.compile(r"^\s*(=+|-+)\s*$")
_SENTENCE_END = tuple("。．.!?！？;；:：,，、")
_NUMBERED_HEAD = re.compile(r"^\s*(\d+(?:\.\d+)*)\.?[ \t\u3000]+\S")
_CN_CHAPTER = re.compile(rf"^\s*第[{_CN_NUM}\d]+([章篇部节条])")
_CN_ORDINAL = re.compile(rf"^\s*[{_CN_NUM}]+[、．.]\s*\S")
_CN_PAREN = re.compile(rf"^\s*[（(][{_CN_NUM}]+[）)]\s*\S")
_HASH_HEAD = re.compile(r"^\s*(#{1,6})\s+\S")
_HASH_LINE = re.compile(r"^\s*(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_LIST = re.compile(r"^\s*(?:[-*+•·▪◦●○■□–]\s+|\d+(?:\.\d+)*[.)、]?\s+|[a-zA-Z][.)]\s+|[（(]\d+[）)]\s*|[①-⑳]\s*)")
_BULLET = re.compile(r"^\s*[-*+•·▪◦●○■□–]\s+")
_MAX_HEADING_CHARS = 60


def _marker_kind(text: str) -> str | None:
    """The kind of list/heading marker a line opens with (bullet, number, CJK ordinal...)."""
    if _BULLET.match(text):
        return "bullet"
    if _NUMBERED_HEAD.match(text) or re.match(r"^\s*\d+[.)、]", text):
        return "number"
    if _CN_ORDINAL.match(text) or _CN_PAREN.match(text) or _CN_CHAPTER.match(text):
        return "cjk"
    if _LIST.match(text):
        return "other"
    return None


def _same_marker(line: str, nxt: str) -> bool:
    """Is ``nxt`` the next item of a list that ``line`` opens (so ``line`` is no heading)?"""
    kind = _marker_kind(nxt)
    return kind is not None and kind == _marker_kind(line)


class _Line(NamedTuple):
    start: int
    end: int  # without the line break
    text: str


def _lines(source: str) -> list[_Line]:
    out = []
    pos = 0
    for m in re.finditer(r"\r\n|\r|\n", source):
        out.append(_Line(pos, m.start(), source[pos : m.start()]))
        pos = m.end()
    if pos < len(source):
        out.append(_Line(pos, len(source), source[pos:]))
    return out


def numbered_heading_level(text: str) -> int | None:
    """The level of a short line numbered like a heading (``2.1 确定范围``, ``第一章 总则``,
    ``一、…``, ``（一）…``, ``1 适用场景``), else None: STRUCTURE's own classifier
    (``chunking.headings.numbered_heading``), so parsed TITLE blocks and STRUCTURE agree.
    Also used for markdown written without ``#``."""
    s = text.strip()
    if not s or len(s) > _MAX_HEADING_CHARS:
        return None
    found = numbered_heading(s)
    return heading_level(found) if found is not None else None


def _heading_level(text: str) -> int | None:
    """The level of a line that looks like a numbered / marked heading, else None."""
    s = text.strip()
    if not s or len(s) > _MAX_HEADING_CHARS or s.endswith(_SENTENCE_END):
        return None
    if m := _HASH_HEAD.match(s):
        return len(m.group(1))
    if (level := numbered_heading_level(s)) is not None:
        return level
    letters = [c for c in s if c.isalpha()]
    if len(letters) >= 3 and all(c.isupper() for c in letters if c.isascii()) and all(c.isascii() for c in letters):
        return 2
    return None


def text_blocks(doc_id: str, source: str) -> list[Block]:
    """Blocks of a plain-text file; ``source[b.start_offset:b.end_offset] == b.text``."""
    out = SourceBlocks(doc_id, source)
    lines = _lines(source)
    paragraphs: list[list[_Line]] = []
    current: list[_Line] = []
    for line in lines:
        if line.text.strip():
            current.append(line)
        elif current:
            paragraphs.append(current)
            current = []
    if current:
        paragraphs.append(current)

    for p_no, para in enumerate(paragraphs):
        _paragraph(out, source, para, p_no)
    return out.blocks


def _paragraph(out: SourceBlocks, source: str, para: list[_Line], p_no: int) -> None:
    """The blocks of one paragraph (a run of non-blank lines); ``p_no`` 0 is the file's first."""
    i = 0
    run_start: int | None = None  # start of a TEXT run
    run_end = 0
    item: tuple[int, int, int] | None = None  # (start, end, indent) of the open list item

    def flush_run() -> None:
        nonlocal run_start, run_end
        if run_start is not None:  # (run_end is read when called: the run being closed)
            out.add(BlockType.TEXT, run_start, run_end)
            run_start = None

    def flush_item() -> None:
        nonlocal item
        if item is not None:
            out.add(BlockType.LIST_ITEM, item[0], item[1])
            item = None

    while i < len(para):
        line = para[i]
        nxt = para[i + 1] if i + 1 < len(para) else None
        stripped = line.text.strip()
        # setext-style underline: the line above is a heading
        if nxt is not None and _UNDERLINE.match(nxt.text) and len(stripped) <= 2 * _MAX_HEADING_CHARS:
            flush_run()
            flush_item()
            out.add(BlockType.TITLE, line.start, line.end, level=1 if nxt.text.strip()[0] == "=" else 2, title=stripped)
            i += 2
            continue
        level: int | None = _heading_level(line.text)
        alone_or_first = i == 0 and (nxt is None or not _same_marker(line.text, nxt.text))
        if (
            p_no == 0
            and i == 0
            and nxt is None
            and level is None
            and len(stripped) <= 2 * _MAX_HEADING_CHARS
            and not stripped.endswith(_SENTENCE_END)
        ):
            level = 1  # the document's title line
        if level is not None and alone_or_first:
            if p_no == 0:
                level = 1  # the heading that opens the file is the document's title
            flush_run()
            flush_item()
            start, end = line.start, line.end
            if m := _HASH_LINE.match(line.text):  # "# Title #": the block is the title, as in markdown
                start, end = line.start + m.start(2), line.start + m.end(2)
            out.add(BlockType.TITLE, start, end, level=level, title=source[start:end].strip())
            i += 1
            continue
        indent = len(line.text) - len(line.text.lstrip())
        if item is not None and indent > item[2] and not _BULLET.match(line.text):
            item = (item[0], line.end, item[2])  # continuation of the list item
        elif _LIST.match(line.text):
            flush_run()
            flush_item()
            item = (line.start, line.end, indent)
        else:
            flush_item()
            if run_start is None:
                run_start = line.start
            run_end = line.end
        i += 1
    flush_run()
    flush_item()
