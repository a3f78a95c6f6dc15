"""Building ordered blocks: heading stack -> section paths, and the joined canonical text.

Two ways to give blocks offsets:

* ``SourceBlocks`` (markdown, text): spans are found in the file's own text; each block's
  ``text`` is exactly ``source[start_offset:end_offset]``.
* ``JoinedBlocks`` (HTML, DOCX, PDF): the canonical text is built here, the blocks' texts
  joined by a blank line in reading order, so offsets are exact by construction. An IMAGE
  block with no caption adds no text: its span is empty, at the position of the image.
"""

from __future__ import annotations

from typing import Any

from corpus_pipeline.models import Block, BlockType

SECTION_SEPARATOR = " > "
BLOCK_SEPARATOR = "\n\n"


class SectionStack:
    """The headings above the current position; a heading pops those at its level or deeper."""

    def __init__(self) -> None:
        self._heads: list[tuple[int, str]] = []

    def push(self, level: int, title: str) -> None:
        title = " ".join(title.split())
        self._heads = [h for h in self._heads if h[0] < level] + [(level, title)]

    @property
    def path(self) -> str:
        return SECTION_SEPARATOR.join(t for _, t in self._heads if t)


class _Collector:
    def __init__(self, doc_id: str) -> None:
        self.doc_id = doc_id
        self.blocks: list[Block] = []
        self.sections = SectionStack()

    def _append(
        self,
        kind: BlockType,
        text: str,
        start: int,
        end: int,
        *,
        level: int | None,
        page: int | None,
        image_id: str | None,
        title: str | None,
        meta: dict[str, Any],
    ) -> Block:
        if kind == BlockType.TITLE:
            level = max(1, min(level or 1, 9))
            self.sections.push(level, title if title is not None else text)
        block = Block(
            doc_id=self.doc_id,
            block_index=len(self.blocks),
            block_type=kind.value,
            text=text,
            start_offset=start,
            end_offset=end,
            level=level if kind == BlockType.TITLE else None,
            page_num=page,
            section_path=self.sections.path,
            image_id=image_id,
            metadata=meta,
        )
        self.blocks.append(block)
        return block


class SourceBlocks(_Collector):
    """Blocks whose spans are slices of an existing text (markdown, plain text)."""

    def __init__(self, doc_id: str, source: str) -> None:
        super().__init__(doc_id)
        self.source = source

    def add(
        self,
        kind: BlockType,
        start: int,
        end: int,
        *,
        level: int | None = None,
        title: str | None = None,
        image_id: str | None = None,
        allow_empty: bool = False,
        **meta: Any,
    ) -> Block | None:
        """Add the block ``source[start:end]`` trimmed of surrounding whitespace."""
        seg = self.source[start:end]
        s = start + (len(seg) - len(seg.lstrip()))
        e = max(s, end - (len(seg) - len(seg.rstrip())))
        if e <= s and not allow_empty:
            return None
        return self._append(
            kind, self.source[s:e], s, e, level=level, page=None, image_id=image_id, title=title, meta=meta
        )


class JoinedBlocks(_Collector):
    """Blocks whose texts make the canonical text, joined by blank lines in reading order."""

    def __init__(self, doc_id: str) -> None:
        super().__init__(doc_id)
        self._parts: list[str] = []
        self._pos = 0

    def add(
        self,
        kind: BlockType,
        text: str,
        *,
        level: int | None = None,
        page: int | None = None,
        image_id: str | None = None,
        **meta: Any,
    ) -> Block | None:
        text = text.strip()
        if not text and kind != BlockType.IMAGE:
            return None
        if text and self._parts:
            self._parts.append(BLOCK_SEPARATOR)
            self._pos += len(BLOCK_SEPARATOR)
        start = self._pos
        if text:
            self._parts.append(text)
            self._pos += len(text)
        return self._append(
            kind, text, start, self._pos, level=level, page=page, image_id=image_id, title=None, meta=meta
        )

    @property
    def text(self) -> str:
        return "".join(self._parts)
