"""Markdown as authors write it (issue 41): front matter (YAML, TOML) is document metadata, not
text; heading attributes and MDX markup stay out of the text, the section paths and so the
evidence; a document's title is its metadata's, else its first heading, else its file name."""

from __future__ import annotations

from pathlib import Path

import pytest
from chunking.helpers import chunk, ctx_for

from corpus_pipeline.parsing.markdown_source import prepare_markdown
from parsing.conftest import Parse

YAML_MDX = """\
---
title: Install the agent
description: How to install it on a server
tags: [setup, ops]
sidebar_position: 2
---

import Tabs from '@theme/Tabs';
import TabItem from '@theme/TabItem';
export const meta = { draft: false };

# Installing { #installing }

<Tabs>
  <TabItem value="pip" label="pip">

    Run pip install agent.

  </TabItem>
  <TabItem
    value="conda"
    label="conda">

Run conda install agent.

  </TabItem>
</Tabs>

{/* a comment for editors */}

## Ports {#ports .wide}

The agent listens on <Code>8080</Code>.

```jsx
import Tabs from '@theme/Tabs';
<Tabs>
## not a heading {#x}
```
"""

TOML_MD = """\
+++
title = "配置"
tags = ["config"]
+++

## 配置文件 {#config-file}

内容在这里。
"""


def test_yaml_front_matter_and_mdx_markup_are_not_text(kb_dir: Path, parse: Parse) -> None:
    (kb_dir / "install.mdx").write_text(YAML_MDX, encoding="utf-8")
    parsed = parse("install.mdx")
    assert parsed.status == "OK"
    for gone in ("sidebar_position", "description:", "import TabItem", "export const", "<Tabs>", "</TabItem>",
                 'label="conda"', "a comment for editors", "{ #installing }", "{#ports"):  # fmt: skip
        assert gone not in parsed.text.split("```jsx")[0], gone
    # a code fence keeps everything, markup or not
    assert "import Tabs from '@theme/Tabs';\n<Tabs>\n## not a heading {#x}\n```" in parsed.text
    assert "Run pip install agent." in parsed.text and "Run conda install agent." in parsed.text
    assert parsed.title == "Install the agent"
    assert parsed.metadata == {"description": "How to install it on a server", "tags": ["setup", "ops"]}
    titles = [(b.text, b.section_path) for b in parsed.blocks if b.block_type == "TITLE"]
    assert titles == [("Installing", "Installing"), ("Ports", "Installing > Ports")]
    # MDX has no indented code: the indented line inside a tab is a paragraph
    assert [b.block_type for b in parsed.blocks if "pip install" in b.text] == ["TEXT"]
    assert any(b.text == "The agent listens on <Code>8080</Code>." for b in parsed.blocks)  # inline: kept


def test_toml_front_matter_and_heading_attributes_in_markdown(kb_dir: Path, parse: Parse) -> None:
    (kb_dir / "config.md").write_text(TOML_MD, encoding="utf-8")
    parsed = parse("config.md")
    assert parsed.text == "\n## 配置文件\n\n内容在这里。\n"
    assert parsed.title == "配置" and parsed.metadata == {"tags": ["config"]}
    assert [b.section_path for b in parsed.blocks] == ["配置文件", "配置文件"]


def test_front_matter_after_blank_lines_only_when_it_reads_as_one() -> None:
    assert prepare_markdown("\n\n---\ntitle: T\n---\nBody\n").text == "Body\n"
    assert prepare_markdown("\n\n---\ntitle: T\n---\nBody\n").metadata == {"title": "T"}
    # a thematic break pair around prose is content
    prose = "\nIntro\n\n---\n\nMiddle, not YAML: [a\n\n---\n"
    assert prepare_markdown(prose).text == prose
    # ``.md`` keeps JSX-looking lines (markdown's own HTML) and indented code
    md = "<Tabs>\n\n    import x from 'y'\n"
    assert prepare_markdown(md).text == md


@pytest.mark.parametrize(
    ("name", "source", "title"),
    [
        ("guide/setup.md", "Intro.\n\n## First heading {#first}\n\nText.\n", "First heading"),
        ("guide/setup.md", "---\ntitle: From front matter\n---\n# Heading\n", "From front matter"),
        ("guide/notes.md", "Just text, no heading.\n", "notes.md"),
        ("guide/notes.txt", "just text, no heading, in lower case.\nand more.\n", "notes.txt"),
    ],
)
def test_document_title(kb_dir: Path, parse: Parse, name: str, source: str, title: str) -> None:
    (kb_dir / "guide").mkdir(exist_ok=True)
    (kb_dir / name).write_text(source, encoding="utf-8")
    assert parse(name).title == title


def test_front_matter_never_reaches_a_chunk(kb_dir: Path, parse: Parse) -> None:
    (kb_dir / "install.mdx").write_text(YAML_MDX, encoding="utf-8")
    parsed = parse("install.mdx")
    chunks = chunk("PARENT:STRUCTURE;CHILD:RECURSIVE", parsed.text, ctx_for(parsed.text, parsed.blocks)).children
    assert chunks and all(parsed.text[c.start_offset : c.end_offset] == c.text for c in chunks)
    first = chunks[0]
    assert "sidebar_position" not in first.text and "import" not in first.text
    assert {c.section_path for c in chunks} <= {"Installing", "Installing > Ports"}


def test_crlf_front_matter_and_attributes_keep_the_line_breaks() -> None:
    prepared = prepare_markdown("---\r\ntitle: T\r\ntags: a, b\r\n---\r\n# Head {#h}\r\n\r\nText\r\n")
    assert prepared.text == "# Head\r\n\r\nText\r\n"
    assert prepared.metadata == {"title": "T", "tags": ["a", "b"]}


def test_setext_heading_attributes_and_unclosed_front_matter() -> None:
    assert prepare_markdown("Install {#install}\n=======\n\nText\n").text == "Install\n=======\n\nText\n"
    unclosed = "---\ntitle: T\n\n# Heading\n"
    assert prepare_markdown(unclosed).text == unclosed  # (no closing line: not front matter)


def test_mdx_prose_starting_with_import_or_export_is_kept() -> None:
    text = "Import the data first.\n\nexport your settings before upgrading.\n"
    assert prepare_markdown(text, mdx=True).text == text


def test_the_texts_table_stores_title_and_metadata(kb_dir: Path, parse: Parse) -> None:
    from corpus_pipeline.indexing.parse import parsed_rows
    from corpus_pipeline.models import Document, DocumentText
    from corpus_pipeline.store import schemas

    (kb_dir / "install.mdx").write_text(YAML_MDX, encoding="utf-8")
    parsed = parse("install.mdx")
    doc = Document("kb", parsed.doc_id, "install.mdx", "markdown", 1, "h", "plan")
    [row] = schemas.from_table(parsed_rows([doc], [parsed])["texts"], DocumentText)
    assert row.title == "Install the agent" and row.parser_version == "3"
    assert row.metadata == {"description": "How to install it on a server", "tags": ["setup", "ops"]}
    assert "sidebar_position" not in row.text
