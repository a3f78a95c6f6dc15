"""``corpus search`` asks a running ``corpus serve`` of the same home (issue 41: a search
took ~10 s and 1.3 GB a call, loading the model): the same JSON and the same text as a
search in the CLI's own process, and a quiet fall-back when no server is there (none
started, one stopped, a stale ``serve.json`` of a dead process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from support.served import free_port

from corpus_pipeline.serve.local import server_file
from corpus_pipeline.store.layout import Layout

pytestmark = pytest.mark.slow
CORPUS = str(Path(sys.executable).with_name("corpus"))
QUERY = "which port does the web console listen on"


def _corpus(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CORPUS, *args], capture_output=True, text=True, timeout=300, env=os.environ.copy())


def _without_timings(out: str) -> dict[str, object]:
    answer = json.loads(out)
    answer.pop("timings_ms")
    return answer


def test_corpus_search_is_answered_by_the_running_server_with_the_same_output(tiny_kb: Path) -> None:
    home = tiny_kb.parents[1]
    assert _corpus("index", "--kb", "tiny").returncode == 0
    local_json = _corpus("search", QUERY, "--kb", "tiny", "--json")
    local_text = _corpus("search", QUERY, "--kb", "tiny")
    assert "answered by corpus serve" not in local_json.stderr  # (no server yet: in process)
    assert "8443" in local_text.stdout.split("\n↳")[0]  # (the matched passage is shown first)

    port = free_port()
    server = subprocess.Popen([CORPUS, "serve", "--port", str(port)], env=os.environ.copy(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        t0 = time.monotonic()
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None and time.monotonic() - t0 < 120
            time.sleep(0.2)
        assert server_file(Layout(home)).is_file()
        served_json = _corpus("search", QUERY, "--kb", "tiny", "--json")
        served_text = _corpus("search", QUERY, "--kb", "tiny")
        assert served_json.returncode == 0 and served_text.returncode == 0, served_json.stderr
        assert f"answered by corpus serve at http://127.0.0.1:{port}" in served_json.stderr
        assert _without_timings(served_json.stdout) == _without_timings(local_json.stdout)
        assert served_text.stdout == local_text.stdout
        forced = _corpus("search", QUERY, "--kb", "tiny", "--json", "--local")
        assert "answered by" not in forced.stderr
        assert _without_timings(forced.stdout) == _without_timings(local_json.stdout)
    finally:
        server.terminate()
        server.communicate(timeout=60)
    assert not server_file(Layout(home)).exists()  # (withdrawn when the server stopped)

    # A stale file (its process gone): the CLI searches itself, quietly.
    server_file(Layout(home)).write_text(json.dumps({"url": f"http://127.0.0.1:{port}", "pid": 2**22 + 12345}))
    stale = _corpus("search", QUERY, "--kb", "tiny", "--json")
    assert stale.returncode == 0 and "answered by" not in stale.stderr
    assert _without_timings(stale.stdout) == _without_timings(local_json.stdout)
