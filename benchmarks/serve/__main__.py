"""Search latency as an application meets it: `corpus search` per query (the model loaded
each time) against one warm process, in process (`corpus_pipeline.open_kb`) and over HTTP
(`corpus serve`: POST /search and Dify's POST /retrieval), on the bundled sample KBs.

    .venv/bin/python -m benchmarks.serve [--home DIR] [--rounds 3] [--cli-queries 3]
                                         [--clients 1,4,16] [--load-seconds 20]
                                         [--workers 1,2] [--reindex] [--load-only]

Indexes the two bundled KBs into ``--home`` (a temporary folder by default; an existing
one with both KBs indexed is reused), then asks each KB's ``questions.jsonl`` ``--rounds``
times. Then the load: ``corpus serve`` started as users start it (its own process), and
``--clients`` concurrent clients (each its own keep-alive connection, in threads of this
process) asking the English KB's questions in turn for ``--load-seconds`` each (after 2 s
not counted): requests/s, p50,
p95, errors per level, for each ``--workers`` count, and the issue's targets (4 clients at least 1.8x the requests/s of
one; 16 clients' p95 at most 4x one client's p50). Prints JSON; RESULTS.md holds the latest
figures. ``--reindex`` adds a level: the most clients while a document is edited and
``corpus index`` publishes a new version (no request may fail).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CORPUS = str(Path(sys.executable).with_name("corpus"))
KBS = ("product-manual-en", "ops-runbook-zh")


def _questions(home: Path, kb: str) -> list[str]:
    lines = (home / "kbs" / kb / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["question"] for line in lines if line.strip()]


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 1)


def _summary(ms: list[float]) -> dict[str, Any]:
    return {"n": len(ms), "p50_ms": _pct(ms, 0.5), "p95_ms": _pct(ms, 0.95), "mean_ms": round(statistics.mean(ms), 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cli-queries", type=int, default=3)
    ap.add_argument("--clients", default="1,4,16", help="concurrency levels of the load, comma-separated")
    ap.add_argument("--load-seconds", type=float, default=20.0, help="seconds of load per level (0: no load)")
    ap.add_argument("--workers", default="1", help="`corpus serve --workers` counts to load in turn, comma-separated")
    ap.add_argument(
        "--reindex", action="store_true", help="one more level: the most clients while a re-index publishes a version"
    )
    ap.add_argument("--load-only", action="store_true", help="skip the per-process, in-process and one-client parts")
    args = ap.parse_args()
    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="bench-serve-")) / "corpus"
    env = {**os.environ, "CORPUS_HOME": str(home), "DAGSTER_HOME": str(home / "dagster"), "HF_HUB_OFFLINE": "1"}
    for kb in KBS:
        if not (home / "kbs" / kb).is_dir():
            shutil.copytree(REPO / "data" / "kbs" / kb, home / "kbs" / kb)
    t0 = time.monotonic()
    r = subprocess.run([CORPUS, "index", "--json"], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"corpus index failed: {r.stderr[-2000:]}")
    index_s = time.monotonic() - t0
    out: dict[str, Any] = {
        "machine": {
            "cpu": _cpu(),
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_start": os.getloadavg(),
        },
        "index_seconds": round(index_s, 1),
    }

    if not args.load_only:
        _latencies(args, home, env, out)
    if args.load_seconds > 0:
        levels = [int(c) for c in args.clients.split(",")]
        out["load"] = {
            f"workers={w}": _load_test(home, env, levels, args.load_seconds, int(w), args.reindex)
            for w in args.workers.split(",")
        }
    out["machine"]["load_avg_end"] = os.getloadavg()
    print(json.dumps(out, indent=2))


def _latencies(args: argparse.Namespace, home: Path, env: dict[str, str], out: dict[str, Any]) -> None:
    # 1. `corpus search --json` per query: a process, the model and the tables each time.
    cli: list[float] = []
    for kb in KBS:
        for q in _questions(home, kb)[: args.cli_queries]:
            t = time.perf_counter()
            subprocess.run([CORPUS, "search", q, "--kb", kb, "--json"], env=env, capture_output=True, check=True)
            cli.append((time.perf_counter() - t) * 1e3)
    out["cli_per_query"] = _summary(cli)

    # 2. In process: one KB handle per KB, warm (first query of each KB not counted).
    os.environ.update(env)
    import corpus_pipeline

    handles = {kb: corpus_pipeline.open_kb(kb, home=home) for kb in KBS}
    for kb, h in handles.items():
        h.search(_questions(home, kb)[0])
    inproc: dict[str, list[float]] = {kb: [] for kb in KBS}
    for _ in range(args.rounds):
        for kb, h in handles.items():
            for q in _questions(home, kb):
                t = time.perf_counter()
                h.search(q)
                inproc[kb].append((time.perf_counter() - t) * 1e3)
    out["in_process"] = {kb: _summary(v) for kb, v in inproc.items()}
    for h in handles.values():
        h.close()

    # 3. Over HTTP: the app of `corpus serve` under uvicorn, warm.
    import httpx
    import uvicorn

    from corpus_pipeline.serve.app import create_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(home, api_keys=[], rate_per_s=0), port=port, log_level="error"))
    th = threading.Thread(target=server.run, daemon=True)
    th.start()
    while not server.started:
        time.sleep(0.05)
    url = f"http://127.0.0.1:{port}"
    http: dict[str, list[float]] = {kb: [] for kb in KBS}
    dify: list[float] = []
    with httpx.Client(timeout=120) as c:
        for kb in KBS:
            c.post(f"{url}/search", json={"query": _questions(home, kb)[0], "kb": kb})
        for _ in range(args.rounds):
            for kb in KBS:
                for q in _questions(home, kb):
                    t = time.perf_counter()
                    c.post(f"{url}/search", json={"query": q, "kb": kb}).raise_for_status()
                    http[kb].append((time.perf_counter() - t) * 1e3)
                    t = time.perf_counter()
                    body = {"knowledge_id": kb, "query": q, "retrieval_setting": {"top_k": 5, "score_threshold": 0}}
                    c.post(f"{url}/retrieval", json=body).raise_for_status()
                    dify.append((time.perf_counter() - t) * 1e3)
    server.should_exit = True
    th.join(10)
    out["http_search"] = {kb: _summary(v) for kb, v in http.items()}
    out["http_dify_retrieval"] = _summary(dify)
    out["cli_over_http_p50_ratio"] = round(
        out["cli_per_query"]["p50_ms"] / statistics.median([x for v in http.values() for x in v]), 1
    )


def _load_test(
    home: Path, env: dict[str, str], levels: list[int], seconds: float, workers: int, reindex: bool
) -> dict[str, Any]:
    """``corpus serve --workers`` in its own process, loaded by ``levels`` concurrent clients
    in turn; with ``reindex``, the last level again while ``corpus index`` publishes a new
    version of the KB searched."""
    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [CORPUS, "serve", "--port", str(port), "--rate", "0", "--key-rate", "0", "--workers", str(workers)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    asks = [(KBS[0], q) for q in _questions(home, KBS[0])]  # (one KB: what its searches share)
    try:
        t0 = time.monotonic()
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:  # (every worker loaded)
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() - t0 > 120:
                sys.exit(f"corpus serve did not start: {proc.stderr.read() if proc.stderr else ''}")
            time.sleep(0.2)
        out: dict[str, Any] = {"workers": workers}
        for n in levels:
            out[str(n)] = _level(url, asks, n, seconds)
        if reindex:
            out[f"{levels[-1]} during a re-index"] = _during_reindex(home, env, url, asks, levels[-1], seconds)
        one, four, sixteen = out.get("1"), out.get("4"), out.get("16")
        if one and four:
            out["rps_4_over_1"] = round(four["rps"] / one["rps"], 2)
        if one and sixteen:
            out["p95_16_over_p50_1"] = round(sixteen["p95_ms"] / one["p50_ms"], 2)
        return out
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


WARM_S = 2.0


def _during_reindex(
    home: Path, env: dict[str, str], url: str, asks: list[tuple[str, str]], clients: int, seconds: float
) -> dict[str, Any]:
    """``clients`` searching while a document of the KB is edited and ``corpus index``
    publishes the new version: no request may fail while the version is switched."""
    kb = asks[0][0]
    doc = next(p for p in sorted((home / "kbs" / kb).rglob("*.md")) if p.name != "README.md")
    original = doc.read_text(encoding="utf-8")
    done: dict[str, Any] = {}

    def reindex() -> None:
        time.sleep(WARM_S + 1)
        doc.write_text(original + "\n\nEdited for the serving benchmark's re-index level.\n", encoding="utf-8")
        t = time.monotonic()
        r = subprocess.run([CORPUS, "index", "--kb", kb], env=env, capture_output=True, text=True)
        done.update(rc=r.returncode, seconds=round(time.monotonic() - t, 1))

    th = threading.Thread(target=reindex)
    th.start()
    try:
        level = _level(url, asks, clients, seconds)
    finally:
        th.join(600)
        doc.write_text(original, encoding="utf-8")  # (the next run of the benchmark indexes it back)
    return {**level, "reindex": done}


def _level(url: str, asks: list[tuple[str, str]], clients: int, seconds: float) -> dict[str, Any]:
    import httpx

    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors = [0] * clients
    start = threading.Barrier(clients + 1)
    stop = threading.Event()

    def client(i: int) -> None:
        with httpx.Client(timeout=120) as c:
            start.wait()
            j = i
            while not stop.is_set():
                kb, q = asks[j % len(asks)]
                j += clients
                t = time.perf_counter()
                try:
                    ok = c.post(f"{url}/search", json={"query": q, "kb": kb}).status_code == 200
                except httpx.HTTPError:
                    ok = False
                if ok:
                    latencies[i].append((time.perf_counter() - t) * 1e3)
                else:
                    errors[i] += 1

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    start.wait()
    time.sleep(WARM_S)  # (not counted: the level's first requests)
    for lat, i in zip(latencies, range(clients), strict=True):
        lat.clear()
        errors[i] = 0
    t0 = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join(120)
    wall = time.perf_counter() - t0
    every = [x for lat in latencies for x in lat]
    return {"clients": clients, "requests": len(every), "rps": round(len(every) / wall, 1),
            **{k: v for k, v in _summary(every).items() if k != "n"}, "errors": sum(errors)}  # fmt: skip


def _cpu() -> str:
    from benchmarks.machine import cpu_model

    return cpu_model()


if __name__ == "__main__":
    main()
