"""``corpus serve`` at its door, as an attacker meets it (issue 40): a real server process on
127.0.0.1. No header resets a client's rate limit unless the operator named the proxy that
sets it (``--forwarded-allow-ips``; uvicorn trusts X-Forwarded-For from 127.0.0.1 by default,
so 100 of 100 requests with a rotating header went through a limit of 20/s)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from support.served import free_port

CORPUS = str(Path(sys.executable).with_name("corpus"))


def _serve(home: Path, *extra: str, keys: str = "") -> tuple[subprocess.Popen[str], int]:
    port = free_port()
    env = {**os.environ, "CORPUS_HOME": str(home), "HF_HUB_OFFLINE": "1", "CORPUS_API_KEYS": keys}
    proc = subprocess.Popen([CORPUS, "serve", "--port", str(port), "--rate", "0.5", *extra], env=env,
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


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    proc.communicate(timeout=60)


def _trickle(port: int, data: bytes, every: float, budget: float) -> tuple[float, bytes]:
    """Send ``data`` a byte every ``every`` seconds (for at most ``budget`` seconds); return
    when the server answered or closed, and what it answered."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.settimeout(every)
        t0 = time.monotonic()
        for b in data:
            if time.monotonic() - t0 > budget:
                break
            try:
                s.sendall(bytes([b]))
                answer = s.recv(4096)
                return time.monotonic() - t0, answer
            except TimeoutError:
                continue  # (nothing yet: go on trickling)
            except OSError:
                return time.monotonic() - t0, b""
        return time.monotonic() - t0, b"(still open)"


def test_slow_clients_are_cut_off_headers_and_body(tmp_path: Path) -> None:
    """Each byte reset uvicorn's keep-alive timer: a client trickling its headers or body held
    its connection for as long as it liked."""
    home = tmp_path / "corpus"
    (home / "kbs").mkdir(parents=True)
    proc, port = _serve(home, "--client-timeout", "2")
    try:
        took, answer = _trickle(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"X-Pad: a\r\n" * 20, 0.5, 12)
        assert took < 6 and answer.startswith(b"HTTP/1.1 408"), (took, answer[:200])
        head = b"POST /search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n"
        took, answer = _trickle(port, head + b"{" + b" " * 390, 0.02, 12)
        assert took < 6 and b" 408 " in answer.split(b"\r\n")[0] and b"request_timeout" in answer, (took, answer[:300])
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code in (200, 429)  # (still serving)
    finally:
        _stop(proc)


def test_json_bodies_are_bounded_in_depth_and_values(tmp_path: Path) -> None:
    home = tmp_path / "corpus"
    (home / "kbs" / "docs").mkdir(parents=True)
    proc, port = _serve(home, "--rate", "0")
    try:
        url = f"http://127.0.0.1:{port}/search"
        deep = '{"query": "x", "kb": "docs", "filters": {"path": ' + "[" * 40 + "]" * 40 + "}}"
        r = httpx.post(url, content=deep, headers={"content-type": "application/json"}, timeout=10)
        assert r.status_code == 400 and "nested deeper than 32" in r.json()["error"]["message"], r.text
        wide = '{"query": "x", "kb": "docs", "filters": {"format": [' + ",".join(['"md"'] * 5000) + "]}}"
        r = httpx.post(url, content=wide, headers={"content-type": "application/json"}, timeout=10)
        assert r.status_code == 400 and "more than 4096 values" in r.json()["error"]["message"], r.text
        brackets_in_strings = {"query": "[" * 100 + "{" * 100, "kb": "docs"}  # (text, not nesting)
        assert httpx.post(url, json=brackets_in_strings, timeout=30).status_code != 400
        dify = (
            '{"knowledge_id": "docs", "query": "x", "retrieval_setting": {"top_k": 2}, '
            '"metadata_condition": {"conditions": ' + "[" * 40 + "]" * 40 + "}}"
        )
        r = httpx.post(
            f"http://127.0.0.1:{port}/retrieval", content=dify, headers={"content-type": "application/json"}, timeout=10
        )
        assert r.status_code == 400 and "nested deeper" in r.json()["error_msg"], r.text  # (Dify's error shape)
    finally:
        _stop(proc)


def test_a_key_has_its_own_limit_whatever_address_it_comes_from(tmp_path: Path) -> None:
    """With the proxy named, each forwarded client has its own bucket: a key used from many
    addresses (a leaked key, a client rotating X-Forwarded-For) was bounded by nothing."""
    home = tmp_path / "corpus"
    (home / "kbs").mkdir(parents=True)
    proc, port = _serve(home, "--key-rate", "0.5", "--forwarded-allow-ips", "127.0.0.1", keys="key-one,key-two")
    try:
        url = f"http://127.0.0.1:{port}/kbs"
        codes = []
        with httpx.Client(timeout=5) as c:
            for i in range(60):
                headers = {"Authorization": "Bearer key-one", "X-Forwarded-For": f"10.1.{i // 250}.{i % 250 + 1}"}
                codes.append(c.get(url, headers=headers).status_code)
            other = c.get(url, headers={"Authorization": "Bearer key-two", "X-Forwarded-For": "10.9.9.9"})
        assert codes.count(429) >= 50 and codes.count(200) <= 10, codes
        assert other.status_code == 200  # (another key's bucket is its own)
    finally:
        _stop(proc)
