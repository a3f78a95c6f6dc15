"""``corpus strategies | preview | recommend``: JSON shapes, stdin, errors on stderr."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from corpus_pipeline.chunking import registry
from corpus_pipeline.cli import chunking as cli


def run(argv: list[str], stdin: str = "") -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="corpus")
    cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    out, err = io.StringIO(), io.StringIO()
    old = sys.stdout, sys.stderr, sys.stdin
    sys.stdout, sys.stderr = out, err
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode()))
    try:
        code = args.func(args)
    finally:
        sys.stdout, sys.stderr, sys.stdin = old
    return code, out.getvalue(), err.getvalue()


DOC = "# Guide\n\nIntro text here.\n\n## Install\n\nRun the installer. It takes a minute.\n"


def test_strategies_json_lists_name_code_description_version_defaults() -> None:
    code, out, _ = run(["strategies", "--json"])
    data = json.loads(out)
    assert code == 0
    assert [d["name"] for d in data][:4] == ["STRUCTURE", "RECURSIVE", "SEMANTIC", "LLM"]
    assert data[1]["default_config"]["max_chars"] == 800
    assert {"name", "code", "description", "version", "default_config"} <= set(data[0])


def test_preview_of_stdin_with_a_strategy(tmp_path: Path) -> None:
    code, out, _ = run(["preview", "-", "--strategy", "STRUCTURE", "--json"], stdin=DOC)
    data = json.loads(out)
    assert code == 0
    assert (data["plan"], data["strategy_versions"], data["total_chunks"], data["total_chars"]) == (
        "CHILD:STRUCTURE",
        {"STRUCTURE": registry.get("STRUCTURE").version},
        2,
        len(DOC),
    )
    assert data["kb"] == "preview" and data["strategy_version"].startswith("c1-")
    first = data["chunks"][0]
    assert set(first) >= {
        "chunk_id",
        "parent_id",
        "chunk_index",
        "text",
        "char_count",
        "token_count",
        "start_offset",
        "end_offset",
        "chunk_type",
        "section_path",
        "metadata",
    }
    assert [c["section_path"] for c in data["chunks"]] == ["Guide", "Guide > Install"]
    assert all(DOC[c["start_offset"] : c["end_offset"]] == c["text"] for c in data["chunks"])


def test_preview_of_a_file_with_a_plan_nests_children_in_parents(tmp_path: Path) -> None:
    f = tmp_path / "guide.md"
    f.write_text(DOC, encoding="utf-8")
    code, out, _ = run(["preview", str(f), "--plan", "PARENT:1;CHILD:3,2", "--json"])
    data = json.loads(out)
    assert code == 0 and data["plan"] == "PARENT:STRUCTURE;CHILD:SEMANTIC,RECURSIVE"
    assert [len(p["children"]) for p in data["parents"]] == [1, 1]
    assert data["parents"][1]["children"][0]["chunk_index"] == 1
    assert data["parents"][1]["children"][0]["parent_id"] == data["parents"][1]["parent_id"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["preview", "-", "--strategy", "RECURSIVE", "--config", '{"overlap_chars": 500}'],
            "overlap_chars = 500 is more than half of max_chars = 800",
        ),
        (["preview", "-", "--strategy", "NOPE"], "unknown strategy 'NOPE'; valid strategies"),
        (["preview", "-", "--strategy", "RECURSIVE", "--config", "{bad"], "--config is not valid JSON"),
        (["preview", "-", "--plan", "PARENT:1"], "has no CHILD pipeline"),
        (["preview", "/no/such/file.md", "--strategy", "RECURSIVE"], "no such file"),
    ],
)
def test_invalid_input_exits_2_with_the_reason_on_stderr(argv: list[str], message: str) -> None:
    code, out, err = run(argv, stdin="text")
    assert code == 2 and out == ""
    assert message in err


def test_recommend_json(tmp_path: Path) -> None:
    f = tmp_path / "a.md"
    f.write_text(DOC, encoding="utf-8")
    code, out, _ = run(["recommend", str(f), "--json"])
    data = json.loads(out)
    assert code == 0 and data["plan"] == "PARENT:STRUCTURE;CHILD:RECURSIVE" and data["reasons"]


def test_preview_strategies_and_search_load_neither_torch_nor_dagster_nor_great_expectations() -> None:
    code = (
        "import sys, argparse\n"
        "from corpus_pipeline.cli import chunking as c\n"
        "p = argparse.ArgumentParser(); c.register(p.add_subparsers())\n"
        "a = p.parse_args(['preview', '-', '--plan', 'PARENT:1;CHILD:3,2', '--json'])\n"
        "assert a.func(a) == 0\n"
        "a = p.parse_args(['strategies', '--json'])\n"
        "assert a.func(a) == 0\n"
        "import corpus_pipeline.cli.search, corpus_pipeline.retrieval.search\n"
        "heavy = ('torch', 'dagster', 'sentence_transformers', 'great_expectations')\n"
        "bad = [m for m in heavy if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    r = subprocess.run([sys.executable, "-c", code], input=DOC.encode(), capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
