"""HTML through unstructured, offline: headings with levels, lists, tables, code, images."""

from __future__ import annotations

from pathlib import Path

from parsing.builders import png
from parsing.conftest import Parse

HTML = """<!DOCTYPE html><html><head><title>t</title><script>var x = 1;</script></head><body>
<nav><a href="/">Home</a></nav>
<h1>Storage Targets</h1>
<p>Keelvault writes backups to one or more targets.</p>
<h2>S3 目标</h2>
<p>对象存储需要开启版本控制。</p>
<ul><li>Create a bucket</li><li>Enable <b>Object Lock</b></li></ul>
<pre><code>kvctl target add s3</code></pre>
<table><tr><th>Key</th><th>Default</th></tr><tr><td>region</td><td>us-east-1</td></tr></table>
<p><img src="img/s3.png" alt="S3 flow"></p>
<img src="https://example.com/remote.png" alt="remote">
<h3>Limits</h3>
<div>At most 8 targets.</div>
</body></html>"""


def test_html_blocks_from_unstructured_offline(kb_dir: Path, parse: Parse) -> None:
    (kb_dir / "img").mkdir()
    (kb_dir / "img" / "s3.png").write_bytes(png("S3"))
    (kb_dir / "targets.html").write_text(HTML, encoding="utf-8")
    parsed = parse("targets.html")
    assert parsed.status == "OK", parsed.error
    got = [(b.block_type, b.level, b.text) for b in parsed.blocks]
    assert got == [
        ("TITLE", 1, "Storage Targets"),
        ("TEXT", None, "Keelvault writes backups to one or more targets."),
        ("TITLE", 2, "S3 目标"),
        ("TEXT", None, "对象存储需要开启版本控制。"),
        ("LIST_ITEM", None, "Create a bucket"),
        ("LIST_ITEM", None, "Enable Object Lock"),
        ("CODE", None, "kvctl target add s3"),
        ("TABLE", None, "Key | Default\nregion | us-east-1"),
        ("IMAGE", None, "S3 flow"),
        ("IMAGE", None, "remote"),
        ("TITLE", 3, "Limits"),
        ("TEXT", None, "At most 8 targets."),
    ]
    assert parsed.blocks[-1].section_path == "Storage Targets > S3 目标 > Limits"
    assert parsed.blocks[3].section_path == "Storage Targets > S3 目标"
    assert [im.block_index for im in parsed.images] == [8]
    assert "not fetched" in parsed.blocks[9].metadata["image_error"]
    # canonical text: the blocks joined by blank lines, in reading order
    assert parsed.text.startswith("Storage Targets\n\nKeelvault writes backups")


def test_unstructured_uses_the_blank_offline_pipeline(kb_dir: Path, parse: Parse) -> None:
    import unstructured.nlp.tokenize as tokenize

    (kb_dir / "a.html").write_text("<h1>T</h1><p>Short line</p>", encoding="utf-8")
    assert [b.block_type for b in parse("a.html").blocks] == ["TITLE", "TEXT"]  # no verb, still not a title
    assert tokenize._get_nlp.__module__ == "corpus_pipeline.parsing.offline"
    assert tokenize._get_nlp().pipe_names == ["sentencizer", "corpus_pipeline_verb_tagger"]
