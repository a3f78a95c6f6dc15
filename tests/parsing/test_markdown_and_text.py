"""Markdown and plain text: the canonical text is the file itself (less a markdown file's front
matter), offsets exact, structure right."""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest

from parsing.builders import png
from parsing.conftest import Parse

MD = """\
---
title: front matter is not content
---
# Guide

Intro paragraph
over two lines.

## Install *fast*

- step one
- step two
  - nested step

```bash
# not a heading
echo hi
```

| a | b |
|---|---|
| 1 | 2 |

Setext heading
--------------

![Topology diagram](img/topo.png)

Text with ![inline](img/topo.png) inside.

> quoted text
"""


def kinds(parsed):  # type: ignore[no-untyped-def]
    return [(b.block_type, b.text) for b in parsed.blocks]


def test_markdown_blocks_types_levels_and_exact_spans(kb_dir: Path, parse: Parse) -> None:
    (kb_dir / "img").mkdir()
    (kb_dir / "img" / "topo.png").write_bytes(png("TOPO"))
    (kb_dir / "guide.md").write_text(MD, encoding="utf-8")
    parsed = parse("guide.md")
    assert parsed.status == "OK" and parsed.text == MD.split("---\n", 2)[2]
    assert parsed.title == "front matter is not content"
    assert kinds(parsed) == [
        ("TITLE", "Guide"),
        ("TEXT", "Intro paragraph\nover two lines."),
        ("TITLE", "Install *fast*"),
        ("LIST_ITEM", "step one"),
        ("LIST_ITEM", "step two"),
        ("LIST_ITEM", "nested step"),
        ("CODE", "```bash\n# not a heading\necho hi\n```"),
        ("TABLE", "| a | b |\n|---|---|\n| 1 | 2 |"),
        ("TITLE", "Setext heading"),
        ("IMAGE", "![Topology diagram](img/topo.png)"),
        ("TEXT", "Text with ![inline](img/topo.png) inside."),
        ("IMAGE", "![inline](img/topo.png)"),
        ("TEXT", "quoted text"),
    ]
    titles = [(b.level, b.section_path) for b in parsed.blocks if b.block_type == "TITLE"]
    assert titles == [(1, "Guide"), (2, "Guide > Install fast"), (2, "Guide > Setext heading")]
    nested = parsed.blocks[5]
    assert nested.metadata["depth"] == 2 and nested.section_path == "Guide > Install fast"


def test_markdown_images_are_stored_once_with_context(kb_dir: Path, parse: Parse, images_dir: Path) -> None:
    (kb_dir / "img").mkdir()
    data = png("TOPO")
    (kb_dir / "img" / "topo.png").write_bytes(data)
    (kb_dir / "guide.md").write_text(MD, encoding="utf-8")
    parsed = parse("guide.md")
    assert [(im.block_index, im.source_ref) for im in parsed.images] == [(9, "img/topo.png"), (11, "img/topo.png")]
    first = parsed.images[0]
    assert first.image_id == parsed.blocks[9].image_id and first.mime_type == "image/png"
    assert Path(first.path).read_bytes() == data
    assert Path(first.path).parent.parent == images_dir and Path(first.path).name.startswith(first.image_id)
    assert "Setext heading" in first.context_before and first.context_after.startswith("Text with")
    assert len({im.path for im in parsed.images}) == 1  # content-addressed: stored once


@pytest.mark.parametrize(
    ("ref", "reason"),
    [
        ("https://example.com/a.png", "not fetched"),
        ("//cdn.example.com/a.png", "not fetched"),
        ("../outside.png", "escapes the KB folder"),
        ("missing.png", "not found"),
    ],
)
def test_markdown_image_refs_never_fetched_nor_escaping(kb_dir: Path, parse: Parse, ref: str, reason: str) -> None:
    (kb_dir.parent / "outside.png").write_bytes(png("X"))
    (kb_dir / "a.md").write_text(f"# A\n\n![x]({ref})\n", encoding="utf-8")
    parsed = parse("a.md")
    image = parsed.blocks[1]
    assert image.block_type == "IMAGE" and image.image_id is None
    assert reason in image.metadata["image_error"]
    assert parsed.images == ()


def test_symlink_escaping_the_kb_is_refused(kb_dir: Path, parse: Parse) -> None:
    (kb_dir.parent / "secret.png").write_bytes(png("S"))
    (kb_dir / "link.png").symlink_to(kb_dir.parent / "secret.png")
    (kb_dir / "a.md").write_text("![x](link.png)\n", encoding="utf-8")
    assert "escapes" in parse("a.md").blocks[0].metadata["image_error"]


def test_crlf_markdown_offsets_point_into_the_real_file(kb_dir: Path, parse: Parse) -> None:
    src = "# Title\r\n\r\nLine one\r\nline two\r\n\r\n- item\r\n"
    (kb_dir / "crlf.md").write_bytes(src.encode())
    parsed = parse("crlf.md")
    assert parsed.text == src
    assert kinds(parsed) == [("TITLE", "Title"), ("TEXT", "Line one\r\nline two"), ("LIST_ITEM", "item")]


@pytest.mark.parametrize(
    "encode",
    [
        lambda s: s.encode("utf-8"),
        lambda s: codecs.BOM_UTF8 + s.encode("utf-8"),
        lambda s: s.encode("utf-16"),  # with BOM
        lambda s: s.encode("gb18030"),
    ],
    ids=["utf8", "utf8-bom", "utf16", "gb18030"],
)
def test_text_encodings_decode_to_the_same_canonical_text(kb_dir: Path, parse: Parse, encode) -> None:  # type: ignore[no-untyped-def]
    src = "磁盘告警手册\n\n一、告警规则\n\n使用率超过 80% 时预警。\n"
    (kb_dir / "zh.txt").write_bytes(encode(src))
    parsed = parse("zh.txt")
    assert parsed.status == "OK" and parsed.text == src


def test_text_headings_lists_and_section_paths(kb_dir: Path, parse: Parse) -> None:
    src = (
        "网络延迟排查\n\n"
        "1 适用场景\n\n"
        "1.1 order-gateway 调用延迟上升到 10 ms 以上。\n"
        "1.2 探测丢包超过 0.1%。\n\n"
        "2 排查步骤\n\n"
        "2.1 确定范围\n\n"
        "先看是单台主机还是全部主机。\n"
        "  - 单台：查网卡\n"
        "  - 全部：查交换机\n\n"
        "Release Notes\n"
        "=============\n"
    )
    (kb_dir / "net.txt").write_text(src, encoding="utf-8")
    parsed = parse("net.txt")
    got = [(b.block_type, b.level, b.text) for b in parsed.blocks]
    assert got == [
        ("TITLE", 1, "网络延迟排查"),
        ("TITLE", 2, "1 适用场景"),
        ("LIST_ITEM", None, "1.1 order-gateway 调用延迟上升到 10 ms 以上。"),
        ("LIST_ITEM", None, "1.2 探测丢包超过 0.1%。"),
        ("TITLE", 2, "2 排查步骤"),
        ("TITLE", 3, "2.1 确定范围"),
        ("TEXT", None, "先看是单台主机还是全部主机。"),
        ("LIST_ITEM", None, "  - 单台：查网卡".strip()),
        ("LIST_ITEM", None, "  - 全部：查交换机".strip()),
        ("TITLE", 1, "Release Notes"),
    ]
    assert parsed.blocks[6].section_path == "网络延迟排查 > 2 排查步骤 > 2.1 确定范围"


def test_markdown_hash_inside_code_fence_is_not_a_heading(kb_dir: Path, parse: Parse) -> None:
    (kb_dir / "c.md").write_text("# Real\n\n```\n# fake\n```\n\ntext\n", encoding="utf-8")
    parsed = parse("c.md")
    assert [b.block_type for b in parsed.blocks] == ["TITLE", "CODE", "TEXT"]
    assert parsed.blocks[2].section_path == "Real"


def test_markdown_numbered_plain_headings_are_titles(kb_dir: Path, parse: Parse) -> None:
    src = "# 告警制度\n\n第一章 总则\n\n1.1 目的\n\n统一告警的分级标准。\n\n1. 先恢复、后定位。\n"
    (kb_dir / "zh.md").write_text(src, encoding="utf-8")
    got = [(b.block_type, b.level, b.section_path) for b in parse("zh.md").blocks]
    assert got == [
        ("TITLE", 1, "告警制度"),
        ("TITLE", 2, "告警制度 > 第一章 总则"),
        ("TITLE", 3, "告警制度 > 第一章 总则 > 1.1 目的"),
        ("TEXT", None, "告警制度 > 第一章 总则 > 1.1 目的"),
        ("LIST_ITEM", None, "告警制度 > 第一章 总则 > 1.1 目的"),
    ]
