"""``corpus preview`` with an LLM from the environment (OPENAI_BASE_URL, OPENAI_API_KEY,
CORPUS_LLM_MODEL): the real console script against the local server, answers cached under
$CORPUS_HOME so a repeated preview makes no call, and the key never printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.openai_server import OpenAIServer, Reply

from llm.conftest import KEY

DOC = (
    "# Harbor\n\nHarbor keeps encrypted copies of your servers. The web console listens on port 8443.\n\n"
    "Daily snapshots are kept for 30 days and monthly\nsnapshots for 12 months.\n"
)
CORPUS = str(Path(sys.executable).with_name("corpus"))


def preview(server: OpenAIServer, home: Path, path: Path, *args: str, env_extra: dict[str, str] | None = None):
    env = {
        **os.environ,
        "CORPUS_HOME": str(home),
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": KEY,
        "CORPUS_LLM_MODEL": "preview-model",
        **(env_extra or {}),
    }
    r = subprocess.run(
        [CORPUS, "preview", str(path), *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert KEY not in r.stdout and KEY not in r.stderr
    return r


@pytest.fixture
def doc(tmp_path: Path) -> Path:
    path = tmp_path / "harbor.md"
    path.write_text(DOC, encoding="utf-8")
    return path


def test_llm_split_preview_gives_exact_spans_and_a_repeat_makes_no_call(
    model_server: OpenAIServer, doc: Path, tmp_path: Path
) -> None:
    args = ("--strategy", "LLM", "--config", '{"llm_enabled": true}', "--json")
    r = preview(model_server, tmp_path / "home", doc, *args)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [c["text"] for c in out["chunks"]] == [
        "# Harbor",
        "Harbor keeps encrypted copies of your servers. The web console listens on port 8443.",
        "Daily snapshots are kept for 30 days and monthly\nsnapshots for 12 months.",
    ]
    assert all(DOC[c["start_offset"] : c["end_offset"]] == c["text"] and not c["derived"] for c in out["chunks"])
    assert {c["metadata"]["llm_model"] for c in out["chunks"]} == {"preview-model"}
    assert (out["llm"]["calls"], out["llm"]["cache_hits"]) == (1, 0)
    (call,) = model_server.calls()
    assert call.model == "preview-model" and call.headers["authorization"] == f"Bearer {KEY}"
    assert list((tmp_path / "home" / "warehouse" / "cache" / "llm").rglob("*.json"))

    again = json.loads(preview(model_server, tmp_path / "home", doc, *args).stdout)
    assert again["chunks"] == out["chunks"] and (again["llm"]["calls"], again["llm"]["cache_hits"]) == (0, 1)
    assert len(model_server.calls()) == 1


def test_proposition_preview_shows_propositions_and_their_metadata(
    model_server: OpenAIServer, doc: Path, tmp_path: Path
) -> None:
    r = preview(model_server, tmp_path / "home", doc, "--strategy", "PROPOSITION", "--json")
    assert r.returncode == 0, r.stderr
    chunks = json.loads(r.stdout)["chunks"]
    assert chunks and all(c["chunk_type"] == "PROPOSITION" and c["derived"] for c in chunks)
    assert "The web console listens on port 8443." in chunks[0]["text"].split("\n")
    assert chunks[0]["metadata"]["proposition_range"].startswith("0-")
    assert sum(c["metadata"]["proposition_count"] for c in chunks) == 3


def test_a_broken_endpoint_falls_back_without_failing_the_preview(
    openai_server: OpenAIServer, doc: Path, tmp_path: Path
) -> None:
    openai_server.default = Reply.error(500, f"upstream failed for key {KEY}")
    r = preview(
        openai_server,
        tmp_path / "home",
        doc,
        "--strategy",
        "LLM",
        "--config",
        '{"llm_enabled": true}',
        env_extra={"NO_COLOR": "1"},
    )
    assert r.returncode == 0, r.stderr
    assert "fallback_from=LLM" in r.stdout and "InternalServerError" in r.stdout
    assert "1 calls (1 failed)" in r.stdout


def test_without_a_model_in_the_environment_the_preview_falls_back(
    openai_server: OpenAIServer, doc: Path, tmp_path: Path
) -> None:
    r = preview(
        openai_server, tmp_path / "home", doc, "--strategy", "PROPOSITION", "--json", env_extra={"CORPUS_LLM_MODEL": ""}
    )
    out = json.loads(r.stdout)
    assert "llm" not in out and openai_server.calls() == []
    assert {c["metadata"]["fallback_reason"] for c in out["chunks"]} == {"no LLM configured"}
