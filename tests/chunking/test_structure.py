"""STRUCTURE and its line classifier: eight heading forms, heading stack, code fences, blocks."""

from __future__ import annotations

import pytest

from chunking.helpers import ctx_for, split
from corpus_pipeline.chunking.headings import classify_line, find_headings
from corpus_pipeline.models import Block


def sections(doc: str, **kw: object) -> list[tuple[str, str]]:
    return [(p.section_path, p.text) for p in split("STRUCTURE", doc, **kw)]


@pytest.mark.parametrize(
    ("line", "kind", "form", "title"),
    [
        ("## 用户管理", "heading", "markdown", "用户管理"),
        ("# Title #", "heading", "markdown", "Title"),
        ("## 历史 { #history }", "heading", "markdown", "历史"),
        ("#hashtag", "body", "body", ""),
        ("    # indented code", "body", "body", ""),
        ("附录 A 术语表", "heading", "appendix", "附录 A 术语表"),
        ("Appendix B", "heading", "appendix", "Appendix B"),
        ("第 1 步：安装依赖", "list_item", "step", "第 1 步：安装依赖"),
        ("步骤 2 配置", "list_item", "step", "步骤 2 配置"),
        ("第三章 系统设计", "heading", "chapter", "第三章 系统设计"),
        ("第五条 用人单位应当依法建立和完善劳动规章制度，保障劳动者享有劳动权利。", "heading", "chapter", "第五条"),
        ("2.3.1 接口定义", "heading", "multi_digit", "2.3.1 接口定义"),
        ("3.14 is pi", "body", "body", ""),
        ("一、项目背景", "heading", "outline", "一、项目背景"),
        (
            "一、本项目旨在解决交易延迟过高的问题，并提供监控。",
            "list_item",
            "outline",
            "一、本项目旨在解决交易延迟过高的问题，并提供监控。",
        ),
        ("（二）问题", "heading", "paren_outline", "（二）问题"),
        ("1、概述", "heading", "digit", "1、概述"),
        ("1. Overview", "heading", "digit", "1. Overview"),
        ("1. Install the package using pip.", "list_item", "digit", "1. Install the package using pip."),
        ("- 支持批量导入", "list_item", "bullet", "- 支持批量导入"),
        ("* [ ] todo", "list_item", "bullet", "* [ ] todo"),
        ("Plain body text.", "body", "body", ""),
    ],
)
def test_line_classifier_knows_the_eight_forms(line: str, kind: str, form: str, title: str) -> None:
    c = classify_line(line)
    assert (c.kind, c.form, c.title) == (kind, form, title)


def test_seed_example_gives_four_sections_with_paths() -> None:
    doc = (
        "## 用户管理\n用户管理模块负责用户的增删改查。\n支持批量导入和导出功能。\n\n"
        "### 用户注册\n注册时需要验证手机号和邮箱。\n\n"
        "### 用户登录\n支持账号密码登录和第三方登录。\n\n"
        "## 权限管理\n权限管理基于 RBAC 模型实现。\n"
    )
    assert sections(doc) == [
        ("用户管理", "## 用户管理\n用户管理模块负责用户的增删改查。\n支持批量导入和导出功能。"),
        ("用户管理 > 用户注册", "### 用户注册\n注册时需要验证手机号和邮箱。"),
        ("用户管理 > 用户登录", "### 用户登录\n支持账号密码登录和第三方登录。"),
        ("权限管理", "## 权限管理\n权限管理基于 RBAC 模型实现。"),
    ]


def test_hash_lines_inside_code_fences_are_not_headings() -> None:
    doc = "# Setup\nRun this:\n```bash\n# install deps\npip install x\n```\n~~~\n## also code\n~~~\nDone.\n"
    assert sections(doc) == [("Setup", doc.strip())]


def test_a_fence_at_the_start_of_a_span_still_hides_its_hash_lines() -> None:
    # A child pipeline runs STRUCTURE over a parent's span, which can begin at a fence.
    text = "intro\n```\n# not a heading\n```\n# Real\n"
    start = text.index("```")
    assert [h.title for h in find_headings(text, start)] == ["Real"]


def test_front_matter_is_not_a_heading() -> None:
    doc = "---\ntitle: x\n---\n# Real\nBody.\n"
    assert [p for p, _ in sections(doc)] == ["", "Real"]


def test_levels_that_skip_pop_back_to_the_right_parent() -> None:
    doc = "# A\na\n### C\nc\n## B\nb\n# D\nd\n"
    assert [p for p, _ in sections(doc)] == ["A", "A > C", "A > B", "D"]


def test_a_heading_without_body_stays_with_the_next_section() -> None:
    doc = "# Guide\n## Install\nRun the installer.\n"
    assert sections(doc) == [("Guide > Install", "# Guide\n## Install\nRun the installer.")]
    assert len(sections(doc, merge_heading_only=False)) == 2


def test_chinese_outline_levels_rank_by_first_appearance_and_lists_are_not_headings() -> None:
    doc = (
        "一、项目背景\n本项目旨在……。\n（一）现状\n现状描述。\n（二）问题\n1. 安装依赖\n2. 配置环境\n问题描述。\n"
        "二、总体设计\n设计内容。\n附录 A 术语表\n术语。\n"
    )
    assert [p for p, _ in sections(doc)] == [
        "一、项目背景",
        "一、项目背景 > （一）现状",
        "一、项目背景 > （二）问题",
        "二、总体设计",
        "附录 A 术语表",
    ]


def test_numbered_headings_nest_by_depth() -> None:
    doc = "1 Intro\n\n1. Overview\ntext\n1.1 Scope\nscope\n1.1.1 Detail\nd\n1.2 Terms\nt\n2. Design\nx\n"
    assert [p for p, _ in sections(doc)][1:] == [
        "1. Overview",
        "1. Overview > 1.1 Scope",
        "1. Overview > 1.1 Scope > 1.1.1 Detail",
        "1. Overview > 1.2 Terms",
        "2. Design",
    ]


def test_setext_headings_are_headings() -> None:
    doc = "Title\n=====\n\nIntro text.\n\nSub\n---\n\nMore text.\n"
    assert [p for p, _ in sections(doc)] == ["Title", "Title > Sub"]


def test_markdown_numbered_lines_under_markdown_headings_are_list_items() -> None:
    doc = "# Install\n1. Download\n2. Run\n# Use\nStart it.\n"
    assert [p for p, _ in sections(doc)] == ["Install", "Use"]


def test_parsed_title_blocks_are_headings_even_when_the_line_is_not_one() -> None:
    doc = "Overview of the system\nThe system does things.\nDetails here\nMore details."
    blocks = [
        Block("d", 0, "TITLE", "Overview of the system", 0, 22, level=1),
        Block("d", 2, "TITLE", "Details here", 47, 59, level=2),
    ]
    pieces = split("STRUCTURE", doc, ctx_for(doc, blocks=blocks))
    assert [(p.section_path, p.text) for p in pieces] == [
        ("Overview of the system", "Overview of the system\nThe system does things."),
        ("Overview of the system > Details here", "Details here\nMore details."),
    ]
    assert find_headings(doc) == []  # the line classifier alone finds none


def test_no_heading_falls_back_to_recursive_and_says_so() -> None:
    doc = "Just a paragraph. " * 100
    pieces = split("STRUCTURE", doc)
    assert len(pieces) > 1
    assert pieces[0].metadata == {
        "fallback_from": "STRUCTURE",
        "fallback_to": "RECURSIVE",
        "fallback_reason": "no heading found",
    }


def test_section_paths_extend_the_input_piece_path() -> None:
    from corpus_pipeline.chunking.structure import Structure
    from corpus_pipeline.models import Piece

    doc = "intro\n## Sub\nbody\n"
    out = Structure().split(Piece(doc, 0, len(doc), section_path="Book"), ctx_for(doc))
    assert [p.section_path for p in out] == ["Book", "Book > Sub"]


@pytest.mark.parametrize(
    ("doc", "titles"),
    [
        # a fence on the first line, closed by a longer fence of the same character
        ("```\n````\n# Real\n", ["Real"]),
        # a closing line must hold only the fence (and whitespace): "``` x" does not close
        ("```\n``` x\n# Hidden\n```  \n# Real\n", ["Real"]),
        # a ~~~ line does not close a ``` fence; an unclosed fence hides the rest
        ("# A\n```\n~~~\n# Hidden\n", ["A"]),
        # four spaces make an indented line, not a fence
        ("# A\n    ```\n# B\n", ["A", "B"]),
        # a fence opened inside front matter does not hide what follows it
        ("---\nx: |\n  ```\n---\n# Real\n", ["Real"]),
        ("\t```\n````\n第三章 系统设计\n", ["第三章 系统设计"]),
    ],
)
def test_fenced_blocks_hide_exactly_their_own_lines(doc: str, titles: list[str]) -> None:
    assert [h.title for h in find_headings(doc)] == titles


ZH_MIXED = (
    "# 交易系统运维手册\n\n"
    "## 2.3 内存问题\n\n"
    "内存问题的总体说明。\n\n"
    "2.3.1 堆内存溢出\n\n"
    "出现 OutOfMemoryError 时先导出堆快照。\n\n"
    "处理步骤：\n\n"
    "1. 导出堆快照\n"
    "2. 分析大对象\n\n"
    "2.3.2 元空间溢出\n\n"
    "检查类加载器是否泄漏。\n"
)
EN_MIXED = (
    "# Operations guide\n\n"
    "## 4 Storage\n\n"
    "Storage overview.\n\n"
    "4.1 Disk layout\n\n"
    "The appliance keeps snapshots on the data volume.\n\n"
    "1. Stop the service\n\n"
    "2.1. The next step restarts every node in the cluster.\n\n"
    "4.2 Retention\n\n"
    "Snapshots are kept for 30 days.\n"
)


@pytest.mark.parametrize("with_blocks", [False, True], ids=["text alone", "with parsed blocks"])
def test_numbered_headings_standing_alone_in_markdown_are_headings(with_blocks: bool) -> None:
    from corpus_pipeline.parsing.markdown_blocks import markdown_blocks

    for doc, expected in (
        (
            ZH_MIXED,
            [
                "交易系统运维手册 > 2.3 内存问题",
                "交易系统运维手册 > 2.3 内存问题 > 2.3.1 堆内存溢出",
                "交易系统运维手册 > 2.3 内存问题 > 2.3.2 元空间溢出",
            ],
        ),
        (
            EN_MIXED,
            [
                "Operations guide > 4 Storage",
                "Operations guide > 4 Storage > 4.1 Disk layout",
                "Operations guide > 4 Storage > 4.2 Retention",
            ],
        ),
    ):
        blocks = markdown_blocks("d", doc) if with_blocks else ()
        got = [p.section_path for p in split("STRUCTURE", doc, ctx_for(doc, blocks=blocks))]
        assert got == expected
        # the numbered list items (Markdown's "1." and a sentence numbered "2.1.") stay in their section
        texts = [p.text for p in split("STRUCTURE", doc, ctx_for(doc, blocks=blocks))]
        assert any("1. 导出堆快照" in t or "1. Stop the service" in t for t in texts)


@pytest.mark.parametrize(
    ("doc", "headings"),
    [
        # a numbered line inside a paragraph (text right after it) is no heading
        ("# A\n\n2.3.1 堆内存溢出\n这一行紧跟在编号行后面。\n", ["A"]),
        # a sentence is no heading: it ends with punctuation
        ("# A\n\n2.3.1 检查堆内存是否溢出。\n\nbody\n", ["A"]),
        # a Markdown list item, alone or not, is a list item
        ("# Install\n\n1. Download the package\n\nThen run it.\n", ["Install"]),
        ("# Install\n\n1) Download\n\nThen run it.\n", ["Install"]),
        # too long to be a title
        ("# A\n\n3.2 " + "很长的一行" * 8 + "\n\nbody\n", ["A"]),
        # numbers that are values, not section numbers
        ("# Specs\n\n1.5 GHz\n\n3.14 is pi\n", ["Specs"]),
        # stands alone after a heading line, before another
        ("# A\n2.1 范围\n## B\n", ["A", "2.1 范围", "B"]),
    ],
)
def test_numbered_lines_that_do_not_stand_alone_as_headings_are_not_headings(doc: str, headings: list[str]) -> None:
    from corpus_pipeline.parsing.markdown_blocks import markdown_blocks

    assert [h.title for h in find_headings(doc)] == headings
    # the markdown parser's TITLE blocks say the same
    assert [h.title for h in find_headings(doc, blocks=markdown_blocks("d", doc))] == headings
