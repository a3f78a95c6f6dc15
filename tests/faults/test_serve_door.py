"""``corpus serve`` at its door, as an attacker meets it (issue 40): a real server process on
127.0.0.1. No header resets a client's rate limit unless the operator named the proxy that
sets it (``--forwarded-allow-ips``; uvicorn trusts X-Forwarded-For from 127.0.0.1 by default,
so 100 of 100 requests with a rotating header went through a limit of 20/s)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
from support.served import free_port

CORPUS = str(Path(sys.executable).with_name("corpus"))


def _serve(home: Path, *extra: str) -> tuple[subprocess.Popen[str], int]:
    port = free_port()
    proc = subprocess.Popen([CORPUS, "serve", "--port", str(port), "--rate", "0.5", *extra], env={**os.environ, "CORPUS_HOME": str(home), "HF_HUB_OFFLINE": "1"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    t0 = time.monotonic()
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code in (200, 429):
                return proc, port
        except httpx.TransportError:
            pass
        assert proc.poll() is None and time.monotonic() - t0 < 60, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.2)


def _limited(port: int, forwarded: bool) -> int:
    """How many of 60 requests from this address were refused 429 (each one claiming another
    client in X-Forwarded-For when ``forwarded``)."""
    codes = []
    with httpx.Client(timeout=5) as c:
        for i in range(60):
            headers = {"X-Forwarded-For": f"10.0.{i // 250}.{i % 250 + 1}"} if forwarded else {}
            codes.append(c.get(f"http://127.0.0.1:{port}/healthz", headers=headers).status_code)
    return codes.count(429)


def test_a_forwarded_header_resets_no_rate_limit_unless_its_proxy_is_named(tmp_path: Path) -> None:
    home = tmp_path / "corpus"
    (home / "kbs").mkdir(parents=True)
    proc, port = _serve(home)
    try:  # no proxy named: X-Forwarded-For is ignored, the bucket is the connection's
        assert _limited(port, forwarded=True) >= 15
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    proc, port = _serve(home, "--forwarded-allow-ips", "127.0.0.1")
    try:  # 127.0.0.1 named as the proxy: each forwarded client has its own bucket
        assert _limited(port, forwarded=True) == 0 and _limited(port, forwarded=False) >= 15
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
