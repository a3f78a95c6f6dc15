"""Markdown into blocks with markdown-it-py, offsets into the file's own text.

markdown-it gives each block token its source lines (``token.map``); the exact span is
found inside those lines from the token's content, so ``source[b.start_offset:b.end_offset]
== b.text`` for every block, including CRLF files and content inside lists and quotes.

* headings (ATX and setext) -> TITLE, level 1-6, span = the heading's content;
* paragraphs -> TEXT (LIST_ITEM inside a list item, with ``ordered`` and ``depth``);
* fenced and indented code -> CODE, span including the fences;
* GFM tables -> TABLE, span = the table's lines;
* images: a paragraph that is only images gives IMAGE blocks; an image inside a paragraph
  gives an IMAGE block right after the paragraph, whose span is the image's markup;
  ``<img src>`` in HTML blocks too;
* a single-line paragraph numbered like a heading (``2.1 范围``, ``第一章 总则``) -> TITLE
  with ``metadata["inferred"]`` (many Chinese documents number headings without ``#``);
* front matter, heading attributes and MDX markup are not in the text this reads
  (``markdown_source``); a ``#`` inside a code fence is never a heading (seed 001's pitfall) because markdown-it
  knows fences.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

from corpus_pipeline.models import Block, BlockType
from corpus_pipeline.parsing.blocks import SourceBlocks
from corpus_pipeline.parsing.text_blocks import numbered_heading_level

_IMAGE_MARKUP = re.compile(r"!\[(?:[^\[\]\\]|\\.|\[[^\]]*\])*\](?:\([^()\s]*(?:\([^)]*\))?[^()]*\)|\[[^\]]*\])?")
_HTML_IMG = re.compile(r"<img\b[^>]*?\bsrc\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s>]+))[^>]*>", re.I)
_HTML_ALT = re.compile(r"\balt\s*=\s*(?:\"([^\"]*)\"|'([^']*)')", re.I)
_TAG = re.compile(r"<[^>]+>|<!--.*?-->", re.S)

#: ``on_image(src, alt, block_index) -> (image_id or None, error or None)``
ImageHook = Callable[[str, str, int], tuple[str | None, str | None]]


def _parser(mdx: bool = False) -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    return md.disable("code") if mdx else md  # (MDX has no indented code)


class _Lines:
    """Line starts/ends of the original text, split the way markdown-it splits."""

    def __init__(self, source: str) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        pos = 0
        for m in re.finditer(r"\r\n|\r|\n", source):
            self.starts.append(pos)
            self.ends.append(m.start())
            pos = m.end()
        self.starts.append(pos)
        self.ends.append(len(source))
        self.source = source

    def text(self, i: int) -> str:
        return self.source[self.starts[i] : self.ends[i]]

    def span(self, line_map: list[int] | None, content: str | None = None) -> tuple[int, int]:
        """The exact span of ``content`` within the lines ``line_map``; the lines if not found."""
        assert line_map is not None
        first_line, stop = line_map[0], min(line_map[1], len(self.starts))
        start, end = self.starts[first_line], self.ends[max(first_line, stop - 1)]
        if not content:
            return start, end
        parts = content.split("\n")
        head, tail = parts[0].strip(), parts[-1].strip()
        for i in range(first_line, stop):
            k = self.text(i).find(head)
            if head and k >= 0:
                start = self.starts[i] + k
                break
        for i in range(stop - 1, first_line - 1, -1):
            k = self.text(i).rfind(tail)
            if tail and k >= 0:
                end = max(start, self.starts[i] + k + len(tail))
                break
        return start, end


def _plain(inline: Token) -> str:
    """The visible text of an inline token (markup removed), for titles and section paths."""
    out: list[str] = []
    for child in inline.children or []:
        if child.type in ("text", "code_inline"):
            out.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            out.append(" ")
        elif child.type == "image":
            out.append(child.content)
    return " ".join("".join(out).split())


def markdown_blocks(doc_id: str, source: str, on_image: ImageHook | None = None, *, mdx: bool = False) -> list[Block]:
    """Blocks of a markdown file's canonical text (``markdown_source.prepare_markdown``: no
    front matter, no heading attributes, no MDX markup); ``on_image`` reads and stores each
    referenced image; ``mdx``: the text is MDX's (no indented code)."""
    tokens = _parser(mdx).parse(source)
    lines = _Lines(source)
    out = SourceBlocks(doc_id, source)

    def image(start: int, end: int, src: str, alt: str, **meta: Any) -> None:
        index = len(out.blocks)
        image_id, error = on_image(src, alt, index) if on_image else (None, None)
        extra: dict[str, Any] = {"src": src, "alt": alt, **meta}
        if error:
            extra["image_error"] = error
        out.add(BlockType.IMAGE, start, end, image_id=image_id, allow_empty=True, **extra)

    list_stack: list[bool] = []  # ordered? per open list
    item_depth = 0
    quote_depth = 0
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        kind = tok.type
        if kind in ("bullet_list_open", "ordered_list_open"):
            list_stack.append(kind == "ordered_list_open")
        elif kind in ("bullet_list_close", "ordered_list_close"):
            list_stack.pop()
        elif kind == "list_item_open":
            item_depth += 1
        elif kind == "list_item_close":
            item_depth -= 1
        elif kind == "blockquote_open":
            quote_depth += 1
        elif kind == "blockquote_close":
            quote_depth -= 1
        elif kind == "heading_open":
            inline = tokens[i + 1]
            s, e = lines.span(inline.map or tok.map, inline.content)
            out.add(BlockType.TITLE, s, e, level=int(tok.tag[1]), title=_plain(inline) or inline.content)
            i += 3
            continue
        elif kind == "paragraph_open":
            inline = tokens[i + 1]
            s, e = lines.span(tok.map, inline.content)
            images = [c for c in inline.children or [] if c.type == "image"]
            rest = [
                c
                for c in inline.children or []
                if c.type not in ("image", "softbreak", "hardbreak")
                and not (c.type == "text" and not c.content.strip())
            ]
            marks = list(_IMAGE_MARKUP.finditer(source, s, e))
            spans = [(m.start(), m.end()) for m in marks] if len(marks) == len(images) else [(s, e)] * len(images)
            if images and not rest and item_depth == 0:
                for img, (a, b) in zip(images, spans, strict=True):
                    image(a, b, str(img.attrs.get("src", "") or ""), img.content, title=img.attrs.get("title"))
            else:
                level = None
                if not item_depth and quote_depth == 0 and "\n" not in inline.content:
                    level = numbered_heading_level(inline.content)
                if item_depth:
                    out.add(BlockType.LIST_ITEM, s, e, ordered=bool(list_stack and list_stack[-1]), depth=item_depth)
                elif level is not None and not images:
                    # a numbered heading written as a plain line (``2.1 范围``, ``第一章 总则``)
                    out.add(BlockType.TITLE, s, e, level=level, title=_plain(inline), inferred=True)
                else:
                    out.add(BlockType.TEXT, s, e)
                for img, (a, b) in zip(images, spans, strict=True):
                    image(
                        a,
                        b,
                        str(img.attrs.get("src", "") or ""),
                        img.content,
                        inline=True,
                        title=img.attrs.get("title"),
                    )
                _inline_html_images(inline, source, s, e, image)
            i += 3
            continue
        elif kind in ("fence", "code_block"):
            s, e = lines.span(tok.map)
            if kind == "code_block":
                s, e = lines.span(tok.map, tok.content.rstrip("\n"))
            out.add(BlockType.CODE, s, e, language=(tok.info or "").strip().split(" ")[0] or None)
        elif kind == "table_open":
            s, e = lines.span(tok.map)
            out.add(BlockType.TABLE, s, e)
            while i < len(tokens) and tokens[i].type != "table_close":
                i += 1
        elif kind == "html_block":
            s, e = lines.span(tok.map)
            found = list(_HTML_IMG.finditer(source, s, e))
            visible = html.unescape(_TAG.sub(" ", tok.content)).strip()
            if visible:
                out.add(BlockType.LIST_ITEM if item_depth else BlockType.TEXT, s, e, html=True)
            for m in found:
                alt = _HTML_ALT.search(m.group(0))
                image(
                    m.start(),
                    m.end(),
                    next(g for g in m.groups() if g is not None),
                    html.unescape(next((g for g in alt.groups() if g is not None), "")) if alt else "",
                    html=True,
                )
        i += 1
    return out.blocks


def _inline_html_images(inline: Token, source: str, s: int, e: int, image: Callable[..., None]) -> None:
    if not any(c.type == "html_inline" and _HTML_IMG.search(c.content) for c in inline.children or []):
        return
    for m in _HTML_IMG.finditer(source, s, e):
        image(m.start(), m.end(), next(g for g in m.groups() if g is not None), "", inline=True, html=True)
