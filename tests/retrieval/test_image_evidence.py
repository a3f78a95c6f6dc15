"""The answer inside an image reaches the caller: a KB whose pump label is an image, described
by a vision model (the local server, real HTTP), indexed through Dagster; the question finds
the image chunk and the returned parent holds the description in place of ``![...](...)``."""

from __future__ import annotations

import json

import pytest
from dagster import instance_for_test
from PIL import Image
from support.openai_server import OpenAIServer, Reply

from assets.definitions import build_definitions
from assets.runner import index_kb
from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.retrieval import Searcher
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.versions import register_version

pytestmark = pytest.mark.slow

PUMPS = """# Pump station

The feed pump of line 2 is P-204. It moves cooling water from the basin to the heat exchanger.

![pump label](pressure_label.png)

Service P-204 every twelve months and replace its seals every two years.
"""
VALVES = """# Valves

Valve V-17 isolates the basin. Close it before any maintenance of the feed line.
"""
LABEL = {
    "description": "Name plate of pump P-204: maximum pressure 16 bar, 2900 rpm.",
    "keywords": ["P-204", "16 bar"],
    "image_type": "IMAGE",
    "embedding_text": "[image] Pump P-204 name plate: max pressure 16 bar, 2900 rpm",
}


def test_the_image_description_stands_in_the_returned_parent(corpus_home):
    kb_dir = corpus_home / "kbs" / "plant"
    kb_dir.mkdir()
    (kb_dir / "pumps.md").write_text(PUMPS, encoding="utf-8")
    (kb_dir / "valves.md").write_text(VALVES, encoding="utf-8")
    Image.new("RGB", (120, 40), "white").save(kb_dir / "pressure_label.png")
    layout = Layout(corpus_home)
    with OpenAIServer() as server, instance_for_test() as instance:
        server.handler = lambda request: Reply.chat(json.dumps(LABEL))
        (kb_dir / "kb.yaml").write_text(
            "chunking:\n"
            "  plan: PARENT:STRUCTURE;CHILD:RECURSIVE\n"
            "  child: {RECURSIVE: {max_chars: 120, overlap_chars: 0}}\n"
            f"vision: {{base_url: '{server.base_url}', model: vlm-test, ocr: false, max_retries: 0}}\n",
            encoding="utf-8",
        )
        kb = resolve_kb(kb_dir)
        version = register_version(layout, kb)
        summary = index_kb(build_definitions(str(corpus_home)), instance, layout, kb, version, say=lambda s: None)
        assert summary.status == "ok", summary.error
        searcher = Searcher.open(layout, kb, version)
        res = searcher.search("What is the maximum pressure of pump P-204?")
        searcher.close()
    top = res.results[0]
    assert top.doc_path == "pumps.md" and any(h.chunk_type == "IMAGE" for h in top.hits)
    assert "max pressure 16 bar" in top.text and "![pump label]" not in top.text and top.images == 1
    assert top.evidence.startswith(top.text) and "Matched child passages:\nchild#" in top.evidence
    assert "Service P-204" in top.text  # the text around the image is still there
    assert res.evidence_chars == sum(len(r.evidence) for r in res.results) <= 5200
