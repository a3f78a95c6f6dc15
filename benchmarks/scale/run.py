"""Scale benchmark (issue 16): how indexing grows with the KB, serially and with workers.

    python -m benchmarks.scale                          # 1,000 / 5,000 / 20,000 documents
    python -m benchmarks.scale --sizes 100,300 --write  # a quick look, written to RESULTS.md
    python -m benchmarks.scale --sizes 2000 --against a49abff   # this code and that commit's, side by side

For each size, a KB is generated from the shared markdown corpus (``benchmarks.incremental``'s
generator: Markdown and plain text, English and Chinese, 2–6 KB each; every paragraph gets a
short unique mark, ``¶<doc>.<n>``, so no chunk text repeats and the embedding cache never
answers for a text the index has not embedded). Then, as users run it, in a subprocess:

1. ``corpus index --workers 1`` in a fresh home (cold: no cache), and ``--workers W`` in
   another fresh home: wall time, wall time per document, and peak memory (of the process
   and its children, sampled every 0.2 s: the sum of their RSS, which counts a page shared
   by several processes once in each, and of their PSS, which splits it among them: the
   memory the tree actually holds); of the serial run, also each step's peak RSS and the
   RSS it started from (the samples cut at each finished step's line as it is printed);
   ``--workers 1`` runs the serial index only;
2. one document edited (a paragraph inserted) and ``corpus index`` again in the serial
   home: its wall time against the full index's;
3. search latency: p50 / p95 of ``KB.search`` (the Python API ``corpus serve`` calls) in a
   warm process, over 20 questions drawn from the KB's own sentences.

Figures go to ``RESULTS.md`` with the machine and its load (``--write``).

``--against REF`` runs every size a second time with the code of git commit ``REF`` (checked
out beside the runs, first on ``PYTHONPATH``; the venv is shared), one after the other on
the same generated KB: a before/after in one run, on one machine in one state, which figures
from different days are not (this machine's speed varies by 2x between days).

``--model-server`` replaces the embedding model by a local OpenAI-compatible endpoint in
this process (``embedding.provider: openai``; 384-d vectors hashed from each text's words
and CJK bigrams, no model): what it measures is the pipeline itself (discovery, parsing,
chunking, the writes, the Dagster runs), at sizes where multilingual-e5-small on a 2-core
machine would take hours (~17 chunks/s: 20,000 documents are ~200,000 chunks). The model's
own cost is ``benchmarks/embedders``'s. Without the model a full index is cheaper, so the
one-document edit's share of it is a harder test, not an easier one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.steps import step_label, step_seconds

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO.parent / "shared" / "corpora" / "markdown-5mb"
KB = "scale"
RESULTS = Path(__file__).with_name("RESULTS.md")


@dataclass
class Row:
    docs: int
    workers: int
    code: str = ""
    seconds: float = 0.0
    per_doc_ms: float = 0.0
    peak_rss_mb: float = 0.0
    peak_pss_mb: float = 0.0
    chunks: int = 0
    edit_seconds: float | None = None
    edit_share: float | None = None
    search_p50_ms: float | None = None
    search_p95_ms: float | None = None
    # with --model-server: the full index as it would be with the bundled model, projected
    # (this run's wall time + the chunks at the model's chunks/s, measured on this KB's chunks)
    with_model_s: float | None = None
    notes: list[str] = field(default_factory=list)


def make_kb(home: Path, n_docs: int, seed: int, model_server: str | None = None) -> None:
    from benchmarks.incremental.corpus import generate_kb

    kb = home / "kbs" / KB
    generate_kb(kb, CORPUS, n_docs, seed)
    if model_server:
        (kb / "kb.yaml").write_text(
            "embedding:\n  provider: openai\n"
            f"  base_url: {model_server}\n  model: hashed-384\n  api_key_env: SCALE_BENCH_KEY\n"
            "  batch_size: 256\n  max_retries: 0\n",
            encoding="utf-8",
        )
    for doc in sorted(p for p in kb.rglob("doc-*") if p.is_file() and p.suffix in (".md", ".txt")):
        paras = doc.read_text(encoding="utf-8").split("\n\n")
        marked = [p if p.lstrip().startswith(("#", "```", "!")) or not p.strip() else f"¶{doc.stem}.{i} {p}"
                  for i, p in enumerate(paras)]  # fmt: skip
        doc.write_text("\n\n".join(marked), encoding="utf-8")


def _tree_memory(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of a process and its children, summed. The RSS sum counts a page shared
    by several processes (a forkserver's preloaded libraries, mapped by every step forked
    from it) once per process; PSS splits it among them (Linux; elsewhere PSS is RSS)."""
    import psutil

    def one(p: psutil.Process) -> tuple[int, int]:
        if hasattr(p, "memory_full_info"):
            full = p.memory_full_info()
            return int(full.rss), int(getattr(full, "pss", full.rss))
        rss = int(p.memory_info().rss)
        return rss, rss

    try:
        proc = psutil.Process(pid)
        rss, pss = one(proc)
        for child in proc.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                r, s = one(child)
                rss, pss = rss + r, pss + s
        return rss, pss
    except psutil.Error:
        return 0, 0


def hashed_vector(text: str, dim: int = 384) -> list[float]:
    """A deterministic unit vector of ``text``'s words and CJK bigrams (the model server's)."""
    import hashlib
    import re

    terms = re.findall(r"[a-z0-9]+", text.lower())
    for run in re.findall(r"[\u4e00-\u9fff]+", text):
        terms += [run[i : i + 2] for i in range(max(1, len(run) - 1))]
    vec = [0.0] * dim
    for term in terms:
        h = int.from_bytes(hashlib.blake2b(term.encode(), digest_size=8).digest(), "big")
        vec[h % dim] += 1.0 if (h >> 32) & 1 else -1.0
    norm = sum(x * x for x in vec) ** 0.5 or 1.0
    return [x / norm for x in vec] if any(vec) else [1.0] + [0.0] * (dim - 1)


@contextlib.contextmanager
def model_server() -> Any:
    """A local OpenAI-compatible ``/v1/embeddings`` endpoint (127.0.0.1, a free port) in a
    thread; yields its base URL."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
            texts = body.get("input") or []
            texts = [texts] if isinstance(texts, str) else texts
            data = [{"object": "embedding", "index": i, "embedding": hashed_vector(t)} for i, t in enumerate(texts)]
            out = json.dumps({"object": "list", "data": data, "model": body.get("model"), "usage": {}}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()


def _env(home: Path, tree: Path) -> dict[str, str]:
    """The environment of a run in ``home`` with the code of ``tree`` (a checkout: first on
    ``PYTHONPATH``, so its packages win over the installed ones; the venv is shared)."""
    env = {**os.environ, "CORPUS_HOME": str(home), "DAGSTER_HOME": str(home / "dagster"), "HF_HUB_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [os.environ.get("PYTHONPATH")])])
    return env


@dataclass
class Indexed:
    """One ``corpus index`` as the benchmark measured it."""

    seconds: float
    peak_rss_mb: float
    peak_pss_mb: float
    summary: dict[str, Any]
    steps: dict[str, float]  # seconds per step as it printed them
    # peak (RSS, PSS) MB of the process tree per step, as printed (``benchmarks.steps.step_label``):
    # the samples since the previous finished step (steps run one after another serially)
    step_peaks: dict[str, tuple[float, float]] = field(default_factory=dict)
    # RSS MB when each step started (its first sample; a batched step's first batch)
    step_starts: dict[str, float] = field(default_factory=dict)


def corpus_index(home: Path, workers: int, tree: Path = REPO) -> Indexed:
    """``corpus index --workers N --json`` in ``home`` with ``tree``'s code, its memory
    sampled every 0.2 s and cut at each finished step's line as it is printed."""
    env = _env(home, tree)
    env["SCALE_BENCH_KEY"] = "local"
    for var in ("OPENAI_BASE_URL", "CORPUS_VISION_MODEL"):
        env.pop(var, None)
    cmd = [str(Path(sys.executable).parent / "corpus"), "index", "--kb", KB, "--workers", str(workers), "--json"]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, cwd=tree, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak, window = [0, 0], [0, 0]  # the run's, and since the last finished step
    first = [0]  # RSS at the first sample since the last finished step: what the step started from
    step_peaks: dict[str, tuple[float, float]] = {}
    step_starts: dict[str, float] = {}
    lines: list[str] = []
    lock = threading.Lock()
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            rss, pss = _tree_memory(proc.pid)
            with lock:
                peak[0], peak[1] = max(peak[0], rss), max(peak[1], pss)
                first[0] = first[0] or rss
                window[0], window[1] = max(window[0], rss), max(window[1], pss)
            time.sleep(0.2)

    def read_stderr() -> None:  # (read while stdout is: neither pipe can fill and block)
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            label = step_label(line)
            if label is None:
                continue
            with lock:
                was = step_peaks.get(label, (0.0, 0.0))
                step_peaks[label] = (max(was[0], window[0] / 2**20), max(was[1], window[1] / 2**20))
                step_starts.setdefault(label, first[0] / 2**20)
                window[0] = window[1] = first[0] = 0

    threads = [threading.Thread(target=f, daemon=True) for f in (sample, read_stderr)]
    for t in threads:
        t.start()
    assert proc.stdout is not None
    out = proc.stdout.read()
    proc.wait()
    seconds = time.monotonic() - t0
    done.set()
    for t in threads:
        t.join()
    stderr = "".join(lines)
    if proc.returncode != 0:
        raise RuntimeError(f"corpus index failed ({proc.returncode}) in {home}: {stderr[-2000:]}{out[-2000:]}")
    return Indexed(
        seconds, peak[0] / 2**20, peak[1] / 2**20, json.loads(out)[0], step_seconds(stderr), step_peaks, step_starts
    )


def edit_one(home: Path) -> None:
    from benchmarks.incremental.run import edit_one_document

    edit_one_document(home / "kbs" / KB, 7)


def model_rate(home: Path, n: int = 256) -> float:
    """The bundled local model's chunks/s on ``n`` of this KB's child chunks (evenly spaced,
    after a warm-up), through the product's own embedder: what the hashed-vector endpoint
    stands in for."""
    import pyarrow.parquet as pq

    from corpus_pipeline.embedding import open_embedder

    files = sorted((home / "warehouse" / "child_chunks").rglob("*.parquet"))
    texts = [t for f in files for t in pq.read_table(f, columns=["text"]).column("text").to_pylist()]
    sample = texts[:: max(1, len(texts) // n)][:n]
    embedder = open_embedder(None)  # kb.yaml's default: the packaged multilingual-e5-small
    embedder.embed(sample[:16])
    t0 = time.monotonic()
    embedder.embed(sample)
    return len(sample) / (time.monotonic() - t0)


def search_latency(home: Path, n: int = 20, seed: int = 3, tree: Path = REPO) -> tuple[float, float]:
    """p50 / p95 ms of the Python API's search, warm, over ``n`` questions from the KB's text."""
    code = f"""
import json, random, re, time, statistics
from pathlib import Path
from corpus_pipeline import open_kb
kb = open_kb({KB!r}, {str(home)!r})
docs = sorted(p for p in Path({str(home / "kbs" / KB)!r}).rglob("doc-*") if p.suffix in (".md", ".txt"))
rng = random.Random({seed})
qs = []
while len(qs) < {n}:
    text = rng.choice(docs).read_text(encoding="utf-8")
    sents = [s.strip() for s in re.split(r"(?<=[.!?。！？])\\s*", text) if 20 <= len(s.strip()) <= 120 and "¶" not in s]
    if sents:
        qs.append(rng.choice(sents))
kb.search(qs[0])  # warm: the model and the table opened
ms = []
for q in qs:
    t0 = time.perf_counter(); kb.search(q); ms.append((time.perf_counter() - t0) * 1000)
ms.sort()
print(json.dumps([statistics.median(ms), ms[int(0.95 * (len(ms) - 1))]]))
"""
    r = subprocess.run(
        [sys.executable, "-c", code], env=_env(home, tree), cwd=tree, capture_output=True, text=True, check=True
    )
    p50, p95 = json.loads(r.stdout.strip().splitlines()[-1])
    return float(p50), float(p95)


def written_by_edit(home: Path) -> str:
    """What the last index wrote of the warehouse: Parquet files and bytes (from the
    partitions' manifests) and the search table's write."""
    from corpus_pipeline.store.layout import Layout
    from corpus_pipeline.store.parquet import read_manifest

    layout = Layout.at(home)
    files = size = 0
    for manifest in layout.warehouse.glob("*/kb=*/**/_manifest.json"):
        w = read_manifest(manifest.parent).get("written") or {}
        files, size = files + int(w.get("files", 0)), size + int(w.get("bytes", 0))
    return f"{files} Parquet files ({size / 1024:.0f} KiB) written"


def run_size(
    base: Path,
    n_docs: int,
    workers: int,
    seed: int,
    model: str | None = None,
    trees: dict[str, Path] | None = None,
    keep: bool = False,
) -> list[Row]:
    """One KB of ``n_docs`` documents, indexed serially and with ``workers`` (each in a fresh
    home), then edited and re-indexed, then searched: with each code tree of ``trees``
    (label: checkout), one after the other on the same KB."""
    rows = []
    for label, tree in (trees or {"": REPO}).items():
        homes = {w: base / f"d{n_docs}-w{w}{'-' + label if label else ''}" for w in sorted({1, workers})}
        mine = []
        for w, home in homes.items():
            make_kb(home, n_docs, seed, model)
            run = corpus_index(home, w, tree)
            secs, peak, summary = run.seconds, (run.peak_rss_mb, run.peak_pss_mb), run.summary
            if w == 1:
                top = sorted(run.step_peaks.items(), key=lambda kv: -kv[1][0])[:6]
                by_step = ", ".join(f"{k} {v[0]:,.0f} (from {run.step_starts.get(k, 0):,.0f})" for k, v in top)
                step_notes = [
                    f"{label + ': ' if label else ''}serial peak RSS MB by step, the highest (from: RSS as it "
                    f"started): {by_step}"
                ]
                print(f"  by step: {by_step}", flush=True)
            mine.append(
                Row(
                    n_docs,
                    w,
                    label,
                    round(secs, 1),
                    round(1000 * secs / n_docs, 1),
                    round(peak[0]),
                    round(peak[1]),
                    summary["child_chunks"],
                )
            )
            print(
                f"  {n_docs} docs, {label or 'this code'}, --workers {w}: {secs:.1f} s, "
                f"{peak[0]:.0f} MB peak RSS, {peak[1]:.0f} MB peak PSS, "
                f"{summary['child_chunks']} chunks",
                flush=True,
            )
        serial = mine[0]
        serial.notes += step_notes
        edit_one(homes[1])
        edit = corpus_index(homes[1], 1, tree)
        secs, summary, steps = edit.seconds, edit.summary, edit.steps
        serial.edit_seconds, serial.edit_share = round(secs, 1), round(secs / serial.seconds, 4)
        top = ", ".join(f"{k} {v:.1f}" for k, v in sorted(steps.items(), key=lambda kv: -kv[1])[:5])
        serial.notes.append(
            f"{label + ': ' if label else ''}edit: {summary['documents_parsed']} parsed, "
            f"{summary['embedded']} embedded, {written_by_edit(homes[1])}; its steps took "
            f"{sum(steps.values()):.1f} s of the {secs:.1f} s (the rest: start-up, Dagster's run), most: {top}"
        )
        serial.search_p50_ms, serial.search_p95_ms = (round(x, 1) for x in search_latency(homes[1], tree=tree))
        if model:
            rate = model_rate(homes[1])
            serial.with_model_s = round(serial.seconds + serial.chunks / rate)
            serial.notes.append(
                f"{label + ': ' if label else ''}the bundled model embeds {rate:.1f} chunks/s here (256 of this KB's "
                f"chunks): a full index with it would take ~{serial.with_model_s} s, and the edit would be "
                f"{100 * secs / serial.with_model_s:.2f} % of that"
            )
        print(f"  one edit: {secs:.1f} s ({100 * serial.edit_share:.2f} % of the full index); search p50 "
              f"{serial.search_p50_ms} ms", flush=True)  # fmt: skip
        for home in homes.values() if not keep else ():
            shutil.rmtree(home, ignore_errors=True)
        rows += mine
    return rows


@contextlib.contextmanager
def code_trees(against: str | None, base: Path) -> Any:
    """{label: checkout}: this repository's working tree and, with ``against`` (a git
    ref), that commit checked out beside it (``git worktree``, removed afterwards)."""
    if not against:
        yield {"": REPO}
        return
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    ref = subprocess.run(["git", "rev-parse", "--short", against], cwd=REPO, capture_output=True, text=True)
    if ref.returncode != 0:
        raise SystemExit(f"--against {against}: not a commit of this repository ({ref.stderr.strip()})")
    other = base / f"code-{ref.stdout.strip()}"
    subprocess.run(["git", "worktree", "add", "--detach", str(other), against], cwd=REPO, check=True)
    try:
        yield {ref.stdout.strip(): other, f"HEAD {head.stdout.strip()}": REPO}
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(other)], cwd=REPO, check=False)


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def write(rows: list[Row], ctx: dict[str, Any]) -> None:
    code = any(r.code for r in rows)
    model = any(r.with_model_s for r in rows)
    head = "| documents | workers | wall s | ms / document | peak RSS MB | peak PSS MB | chunks | one-doc edit s | edit / full | search p50 ms | p95 ms |"
    if code:
        head = head.replace("| workers |", "| code | workers |")
    if model:
        head += " full with the model s (projected) | edit / that |"
    lines = [head, "|" + "---:|" * (11 + code + 2 * model)]
    for r in rows:
        lines.append(
            f"| {r.docs} | {f'{r.code} | ' if code else ''}{r.workers} | {r.seconds} | {r.per_doc_ms} | {r.peak_rss_mb:.0f} | {r.peak_pss_mb:.0f} | {r.chunks} | "
            f"{r.edit_seconds if r.edit_seconds is not None else ''} | "
            f"{f'{100 * r.edit_share:.2f} %' if r.edit_share is not None else ''} | "
            f"{r.search_p50_ms if r.search_p50_ms is not None else ''} | {r.search_p95_ms if r.search_p95_ms is not None else ''} |"
            + (
                (
                    f" {r.with_model_s} | {100 * (r.edit_seconds or 0) / r.with_model_s:.2f} % |"
                    if r.with_model_s
                    else " | |"
                )
                if model
                else ""
            )
        )
    notes = [f"- {r.docs} documents: {n}" for r in rows for n in r.notes]
    title = "# Scale benchmark: results\n\n"
    section = (
        f"## {ctx['date']}: `{ctx['command']}`\n\n"
        f"{ctx['machine']} · load {ctx['load_before']} → {ctx['load_after']} · git {ctx['git']}"
        + (" · embedding: the local hashed-vector endpoint, no model" if ctx.get("model_server") else "")
        + "\n\n"
        + "\n".join(lines)
        + "\n\n"
        + "\n".join(notes)
        + "\n"
    )
    old = RESULTS.read_text(encoding="utf-8").removeprefix(title) if RESULTS.exists() else ""
    RESULTS.write_text(title + section + ("\n" + old if old else ""), encoding="utf-8")  # newest first


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.scale", description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,5000,20000", help="KB sizes in documents, comma-separated")
    ap.add_argument("--workers", type=int, default=2, help="the parallel run's --workers (default 2)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path, default=None, help="where the homes go (default: a temporary folder)")
    ap.add_argument("--write", action="store_true", help="write RESULTS.md")
    ap.add_argument("--keep", action="store_true", help="keep the indexed homes under --out (to look into them)")
    ap.add_argument(
        "--against",
        metavar="REF",
        help="also run every size with the code of this git commit, side by side (a git worktree beside the runs)",
    )
    ap.add_argument(
        "--model-server",
        action="store_true",
        help="embed through a local hashed-vector endpoint instead of the model (the pipeline's own cost)",
    )
    args = ap.parse_args(argv)
    from benchmarks.machine import cpu_model, ram_gib

    base = args.out or Path(tempfile.mkdtemp(prefix="corpus-scale-"))
    ctx = {
        "command": "python -m benchmarks.scale " + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": f"{cpu_model()}, {os.cpu_count()} cores, {ram_gib()} RAM, Python {platform.python_version()}",
        "load_before": _load(),
        "git": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip(),
    }
    rows: list[Row] = []
    with (
        model_server() if args.model_server else contextlib.nullcontext() as url,
        code_trees(args.against, base) as trees,
    ):
        for n in (int(x) for x in args.sizes.split(",") if x.strip()):
            print(f"{n} documents ...", flush=True)
            rows += run_size(base, n, args.workers, args.seed, url, trees, keep=args.keep)
    ctx["load_after"] = _load()
    ctx["model_server"] = args.model_server
    print(json.dumps([asdict(r) for r in rows], indent=1))
    if args.write:
        write(rows, ctx)
    return 0
