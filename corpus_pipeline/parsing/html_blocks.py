"""HTML into blocks with ``unstructured.partition.html`` (run offline, see ``offline.py``).

unstructured serves HTML well: it drops navigation and scripts, gives ``h1``-``h6`` as
Title elements with ``category_depth`` (level = depth + 1), list items, tables (also as
HTML, from which rows are rebuilt as ``a | b`` lines), ``<pre>`` as CodeSnippet and
``<img>`` as Image elements with their ``src``. Importing this module applies the offline
patch; ``corpus_pipeline.parsing.parse`` imports it lazily, at the first HTML document, so
light commands do not pay unstructured's ~5 s import.
"""

from __future__ import annotations

import html as html_lib
import re
from collections.abc import Callable
from typing import Any

from corpus_pipeline.errors import DocumentError
from corpus_pipeline.models import BlockType
from corpus_pipeline.parsing.blocks import JoinedBlocks
from corpus_pipeline.parsing.offline import ensure_offline

ensure_offline()

from unstructured.partition.html import partition_html  # noqa: E402  (after the offline patch)

#: ``on_image(src, alt, block_index) -> (image_id or None, error or None)``
ImageHook = Callable[[str, str, int], tuple[str | None, str | None]]

_ROW = re.compile(r"<tr\b.*?</tr>", re.S | re.I)
_CELL = re.compile(r"<t[hd]\b[^>]*>(.*?)</t[hd]>", re.S | re.I)
_TAG = re.compile(r"<[^>]+>")


def table_rows(text_as_html: str | None, fallback: str) -> str:
    """A table as one ``cell | cell`` line per row (rows keep their meaning for chunking)."""
    if not text_as_html:
        return fallback
    rows = []
    for row in _ROW.findall(text_as_html):
        cells = [" ".join(html_lib.unescape(_TAG.sub(" ", c)).split()) for c in _CELL.findall(row)]
        if any(cells):
            rows.append(" | ".join(cells))
    return "\n".join(rows) or fallback


#: libxml2's HTML parser (under unstructured) stops at this nesting depth and drops what is below.
MAX_HTML_DEPTH = 255


def check_depth(markup: str) -> None:
    """Refuse HTML nested deeper than the parser's limit: its deeper text would be lost
    silently (the document would be indexed with part of its text missing)."""
    import lxml.etree as etree  # type: ignore[import-untyped]

    parser = etree.HTMLParser()
    try:
        etree.fromstring(markup, parser)
    except (etree.LxmlError, ValueError):
        return  # unstructured reports what it cannot parse
    for entry in parser.error_log:
        if "Excessive depth" in entry.message:
            raise DocumentError(
                f"HTML nested deeper than {MAX_HTML_DEPTH} levels (line {entry.line}), the HTML parser's limit: "
                "the text below that depth would be lost; flatten the markup (or save the page as text)"
            )


def _languages(text: str) -> list[str]:
    # unstructured labels Chinese as English unless told; the label only goes to metadata.
    return ["zho", "eng"] if re.search(r"[\u4e00-\u9fff]", text) else ["eng"]


def html_blocks(doc_id: str, markup: str, on_image: ImageHook | None = None) -> JoinedBlocks:
    """Blocks of an HTML document; the canonical text is their texts joined in order."""
    check_depth(markup)
    try:
        elements = partition_html(text=markup, languages=_languages(markup))
    except Exception as exc:  # unstructured raises many kinds; the document is what failed
        raise DocumentError(f"HTML could not be parsed: {type(exc).__name__}: {exc}") from exc
    out = JoinedBlocks(doc_id)
    for el in elements:
        category = type(el).__name__
        text = el.text or ""
        md: Any = el.metadata
        if category == "Title":
            depth = md.category_depth if md.category_depth is not None else 0
            out.add(BlockType.TITLE, text, level=depth + 1)
        elif category == "ListItem":
            out.add(BlockType.LIST_ITEM, text, depth=md.category_depth)
        elif category == "Table":
            out.add(BlockType.TABLE, table_rows(md.text_as_html, text), html=md.text_as_html)
        elif category in ("CodeSnippet", "Formula"):
            out.add(BlockType.CODE, text)
        elif category == "Image":
            src = getattr(md, "image_url", None) or ""
            index = len(out.blocks)
            image_id, error = on_image(src, text, index) if on_image else (None, None)
            meta: dict[str, Any] = {"src": src, "alt": text}
            if error:
                meta["image_error"] = error
            out.add(BlockType.IMAGE, text, image_id=image_id, **meta)
        elif category in ("PageBreak",):
            continue
        else:  # NarrativeText, Text, UncategorizedText, Address, EmailAddress, Header, Footer...
            out.add(BlockType.TEXT, text, element=category)
    return out
