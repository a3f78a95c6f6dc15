"""A running ``corpus serve`` of this home, found by the CLI: ``corpus search`` asks it
instead of loading the model and the tables itself (~10 s and 1.3 GB a call otherwise).

``corpus serve`` writes ``<home>/warehouse/serve.json`` (its URL and pid; never a key) when
it starts and removes it when it stops (a file left by a killed server names a dead pid and
is ignored). ``ask_server`` posts one search to it when the
file names a live process that answers ``/healthz`` within a second, and returns None
otherwise (no server, a stale file, another error): the caller then searches in process.
Where the server needs a key, the first of ``CORPUS_API_KEYS`` is sent.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
from pathlib import Path
from typing import Any

from corpus_pipeline.store.layout import Layout

FILE = "serve.json"


def server_file(layout: Layout) -> Path:
    return layout.local / FILE


def announce(layout: Layout, host: str, port: int) -> None:
    """Record this process as the home's server (removed at exit)."""
    address = "127.0.0.1" if host in ("0.0.0.0", "", "localhost") else "[::1]" if host == "::" else host
    path = server_file(layout)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{FILE}.{os.getpid()}")
    tmp.write_text(json.dumps({"url": f"http://{address}:{port}", "pid": os.getpid()}), encoding="utf-8")
    os.replace(tmp, path)
    atexit.register(withdraw, layout)  # (the supervisor of --workers exits normally)


def withdraw(layout: Layout) -> None:
    """Remove the file if this process wrote it: at exit, and when the app stops (uvicorn
    ends a single process by re-raising SIGTERM, which skips ``atexit``)."""
    path = server_file(layout)
    with contextlib.suppress(OSError, ValueError, AttributeError):
        if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():
            path.unlink()


def running_server(layout: Layout) -> str | None:
    """The URL of this home's live ``corpus serve`` (None: none)."""
    import psutil

    try:
        info = json.loads(server_file(layout).read_text(encoding="utf-8"))
        url, pid = str(info["url"]), int(info["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not url.startswith("http://") or not psutil.pid_exists(pid):
        return None
    return url


def ask_server(layout: Layout, payload: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    """``POST /search`` of ``payload`` to this home's server: (its JSON answer, its URL), or
    None when there is none or it did not answer 200 (the caller searches in process)."""
    import httpx

    url = running_server(layout)
    if url is None:
        return None
    keys = [k.strip() for k in os.environ.get("CORPUS_API_KEYS", "").split(",") if k.strip()]
    headers = {"Authorization": f"Bearer {keys[0]}"} if keys else {}
    try:
        with httpx.Client(timeout=httpx.Timeout(60.0, connect=1.0), headers=headers) as client:
            if client.get(f"{url}/healthz", timeout=1.0).status_code != 200:
                return None
            r = client.post(f"{url}/search", json=payload)
    except httpx.HTTPError:
        return None
    if r.status_code != 200:
        return None
    answer: dict[str, Any] = r.json()
    return answer, url
