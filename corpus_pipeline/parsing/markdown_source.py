"""A markdown file's canonical text: its decoded text less what is not content (issue 41).

    prepared = prepare_markdown(source, mdx=path.suffix == ".mdx")
    prepared.text        the canonical text: what blocks, chunks and offsets refer to
    prepared.metadata    {"title", "description", "tags"} from the front matter (those present)

What is cut (the rest of the file stays, character for character):

* front matter at the top: YAML between ``---`` lines (closed by ``---`` or ``...``) or TOML
  between ``+++`` lines; blank lines may come before it, when it then reads as a mapping.
  Its ``title``, ``description`` and ``tags`` (or ``keywords``) become document metadata;
* heading attributes at the end of a heading (``## Install { #install }``, ``{#id .class}``);
* in ``.mdx`` files only: ``import`` / ``export`` statements (up to the next blank line, as
  MDX reads them), lines that are only JSX component tags (``<Tabs>``, ``<Tab title="x">``,
  ``</Tab>``, ``<Note />``, a tag spread over several lines) and ``{/* comments */}``.
  A cut line leaves its line break, so the blocks around it stay apart.

Nothing inside a code fence (or indented code in ``.md``) is ever cut. Because the parser
then reads only the canonical text, every offset is exact into it by construction.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from typing import Any

import yaml
from markdown_it import MarkdownIt

#: How many lines a front matter block may take before its opening line is not taken for one.
MAX_FRONT_MATTER_LINES = 1000

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n|$)")
_HEADING_ATTRS = re.compile(r"[ \t]*\{[ \t]*[#.][^{}\r\n]*\}[ \t]*$")
_ESM = re.compile(
    r"import\s*(?:['\"{*]|[\w$]+\s*(?:,|from\b))|export\s+(?:const|let|var|function|class|async|default)\b|export\s*[{*]"
)
_JSX_TAG = r"</?[A-Z][\w.]*(?:\s+[^<>]*?)?\s*/?>|<>|</>"
_JSX_LINE = re.compile(rf"[ \t]*(?:(?:{_JSX_TAG})[ \t]*)+$")
_JSX_OPEN = re.compile(r"[ \t]*<[A-Z][\w.]*(?:\s[^<>]*)?$")  # a tag whose ``>`` is on a later line
_JSX_COMMENT = re.compile(r"[ \t]*\{/\*.*?\*/\}[ \t]*$")


@dataclass(frozen=True)
class PreparedMarkdown:
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


def _lines(source: str) -> list[tuple[int, str, str]]:
    """(start, content, line break) of every line."""
    out: list[tuple[int, str, str]] = []
    for m in _LINE.finditer(source):
        if m.start() == len(source) and out:
            break
        raw = m.group(0)
        body = raw.rstrip("\r\n")
        out.append((m.start(), body, raw[len(body) :]))
    return out


def _mapping(kind: str, body: str) -> dict[str, Any] | None:
    try:
        data = yaml.safe_load(body) if kind == "yaml" else tomllib.loads(body)
    except (yaml.YAMLError, tomllib.TOMLDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _front_matter(lines: list[tuple[int, str, str]]) -> tuple[int, dict[str, Any]]:
    """(how many lines the front matter takes, blank lines before it included; its mapping)."""
    first = 0
    while first < len(lines) and not lines[first][1].strip() and lines[first][2]:
        first += 1
    if first >= len(lines):
        return 0, {}
    opening = lines[first][1].lstrip("\ufeff").rstrip()
    if opening not in ("---", "+++"):
        return 0, {}
    kind = "yaml" if opening == "---" else "toml"
    closing = ("---", "...") if kind == "yaml" else ("+++",)
    for i in range(first + 1, min(len(lines), first + MAX_FRONT_MATTER_LINES)):
        if lines[i][1].rstrip() in closing:
            data = _mapping(kind, "\n".join(line[1] for line in lines[first + 1 : i]))
            if data is None and first > 0:
                return 0, {}  # after blank lines, only what reads as front matter is taken
            return i + 1, data or {}
    return 0, {}


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [t.strip() for t in value.split(",") if t.strip()]
    if isinstance(value, list | tuple):
        return [str(t).strip() for t in value if str(t).strip()]
    return []


def front_matter_metadata(data: dict[str, Any]) -> dict[str, Any]:
    """The document metadata a front matter gives: title, description, tags (those present)."""
    out: dict[str, Any] = {}
    for key in ("title", "description"):
        value = data.get(key)
        if isinstance(value, str | int | float) and not isinstance(value, bool) and str(value).strip():
            out[key] = " ".join(str(value).split())
    tags = _strings(data.get("tags")) or _strings(data.get("keywords"))
    if tags:
        out["tags"] = tags
    return out


def _parser(mdx: bool) -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": True})
    return md.disable("code") if mdx else md


def _structure(source: str, mdx: bool) -> tuple[set[int], set[int]]:
    """(the lines inside code: fenced, and indented outside MDX, which has no indented code;
    the line of each heading's text: ATX its line, setext the line above the underline)."""
    code: set[int] = set()
    headings: set[int] = set()
    for tok in _parser(mdx).parse(source):
        if tok.type in ("fence", "code_block") and tok.map:
            code.update(range(tok.map[0], tok.map[1]))
        elif tok.type == "heading_open" and tok.map:
            headings.add(tok.map[0] if tok.markup.startswith("#") else tok.map[1] - 2)
    return code, headings


def _without_mdx(lines: list[tuple[str, str]], code: set[int]) -> list[tuple[str, str]]:
    """``lines`` with MDX's ESM statements, JSX-only lines and comments blanked (line breaks kept)."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(lines):
        text, nl = lines[i]
        if i in code:
            out.append((text, nl))
        elif _ESM.match(text) or _JSX_COMMENT.match(text):
            while i < len(lines) and lines[i][0].strip() and i not in code:  # up to a blank line
                out.append(("", lines[i][1]))
                i += 1
            continue
        elif _JSX_LINE.match(text):
            out.append(("", nl))
        elif _JSX_OPEN.match(text):
            end = next((j for j in range(i + 1, min(len(lines), i + 30)) if lines[j][0].rstrip().endswith(">")), None)
            if end is None:
                out.append((text, nl))
            else:
                out.extend(("", line[1]) for line in lines[i : end + 1])
                i = end + 1
                continue
        else:
            out.append((text, nl))
        i += 1
    return out


def prepare_markdown(source: str, *, mdx: bool = False) -> PreparedMarkdown:
    """The canonical text of a markdown (``mdx``: MDX) file and its front matter's metadata."""
    all_lines = _lines(source)
    skip, data = _front_matter(all_lines)
    lines = [(text, nl) for _, text, nl in all_lines[skip:]]
    if mdx:
        lines = _without_mdx(lines, _structure("".join(t + nl for t, nl in lines), mdx)[0])
    code, headings = _structure("".join(t + nl for t, nl in lines), mdx)
    for i in headings - code:
        if 0 <= i < len(lines):
            lines[i] = (_HEADING_ATTRS.sub("", lines[i][0]), lines[i][1])
    return PreparedMarkdown("".join(t + nl for t, nl in lines), front_matter_metadata(data))
