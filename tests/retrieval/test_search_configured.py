"""A KB configured as a user would: kb.yaml names an LLM (sub-questions) and a rerank
endpoint (TEI's API), both the local test server over real HTTP; indexed with `corpus
index`, searched with `corpus search --json` in a subprocess. A compound question is split,
each part retrieved, the parents reranked; a reranker that fails leaves the fused order and
the result says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.openai_server import OpenAIServer, Reply, Request

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]

DOCS = {
    "pumps.md": "# Pumps\n\nThe feed pump P-204 runs at a maximum pressure of 16 bar.\n",
    "valves.md": "# Valves\n\nValve V-17 isolates the basin; close it before maintenance of the feed line.\n",
    "shifts.md": "# Shifts\n\nThe night shift starts at 22:00 and hands over at 06:00 with a written log.\n",
    "pump-service.md": "# Pump service\n\nPumps of line 3 (P-310, P-311) are serviced yearly; their pressure is 10 bar.\n",
    "tower.md": "# Cooling tower\n\nValve V-20 isolates the cooling tower from the basin pumps.\n",
}
PARTS = ["What is the maximum pressure of pump P-204?", "Which valve isolates the basin?"]
COMPOUND = "What is the maximum pressure of pump P-204, and which valve isolates the basin?"


def _corpus(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "corpus"), *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=600)


def _handler(rerank_ok: bool):
    def handle(request: Request) -> Reply:
        if request.path.endswith("/rerank"):
            if not rerank_ok:
                return Reply.error(503, "reranker is warming up")
            texts = request.body["texts"]  # the shifts document first: visibly not the fused order
            scores = [1.0 if "night shift" in t else 0.5 if "V-17" in t else 0.1 for t in texts]
            return Reply.json([{"index": i, "score": s} for i, s in enumerate(scores)])
        return Reply.chat(json.dumps({"sub_questions": PARTS}))

    return handle


def test_sub_questions_and_rerank_configured_in_kb_yaml(corpus_home):
    kb = corpus_home / "kbs" / "plant"
    kb.mkdir(parents=True)
    for name, text in DOCS.items():
        (kb / name).write_text(text, encoding="utf-8")
    env = {**os.environ, "CORPUS_HOME": str(corpus_home)}
    with OpenAIServer() as server:
        (kb / "kb.yaml").write_text(
            f"llm: {{base_url: '{server.base_url}', model: test-llm, max_retries: 0}}\n"
            f"rerank: {{url: '{server.base_url.removesuffix('/v1')}/rerank', api: tei, max_retries: 0}}\n",
            encoding="utf-8",
        )
        r = _corpus("index", "--kb", "plant", "--json", env=env)
        assert r.returncode == 0, r.stderr

        server.handler = _handler(rerank_ok=True)
        r = _corpus("search", COMPOUND, "--kb", "plant", "--json", env=env)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["sub_questions"] == {"questions": PARTS, "source": "llm"}
        docs = [x["doc_path"] for x in out["results"]]
        assert {"pumps.md", "valves.md"} <= set(docs) and len(docs) == len(set(docs))
        assert {x["sub_question"] for x in out["results"]} >= {0, 1}
        assert out["rerank"] and all(o["status"] == "reranked" for o in out["rerank"])
        assert all(x["rerank_score"] is not None for x in out["results"])
        assert "16 bar" in next(x["evidence"] for x in out["results"] if x["doc_path"] == "pumps.md")
        [llm_call] = server.calls("/v1/chat/completions")
        assert COMPOUND in json.dumps(llm_call.messages)

        server.handler = _handler(rerank_ok=False)
        r = _corpus("search", COMPOUND, "--kb", "plant", "--json", env=env)  # the split is cached now
        assert r.returncode == 0, r.stderr
        failed = json.loads(r.stdout)
        assert len(server.calls("/v1/chat/completions")) == 1
        assert failed["rerank"] and all(o["status"] == "failed" for o in failed["rerank"])
        assert "503" in json.dumps(failed["rerank"])
        assert {x["doc_path"] for x in failed["results"]} >= {"pumps.md", "valves.md"}
        assert all(x["rerank_score"] is None for x in failed["results"])
