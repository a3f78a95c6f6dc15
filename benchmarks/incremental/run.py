"""Incremental re-indexing: full index vs re-index after no change, one edited document, and
a child-strategy change, on a generated KB of 500+ documents, in one run.

    .venv/bin/python -m benchmarks.incremental [--docs 500] [--seed 7] [--repeat 3] [--no-cli] [--no-write] [--keep]

About 13 minutes on 2 shared cores (load average 2–3); the two full embeddings (the cold
index and the strategy change) are nearly all of it. See README.md for the findings.

What it does, in a temporary CORPUS_HOME with a temporary DAGSTER_HOME (SQLite, written by
``prepare_dagster_home`` exactly as ``corpus index`` does):

1. generates the KB ``bench`` (see ``corpus.py``: Markdown and plain text, English and
   Chinese, 2–6 KB each, headings and paragraphs, a few PNG figures read by OCR,
   deterministic from ``--seed``), with
   ``PARENT:STRUCTURE,RECURSIVE;CHILD:RECURSIVE`` (sections by heading, cut at 2200/180
   characters; children 240/32 tokens of the embedding model);
2. measures, in this process, what ``corpus index`` does after its argument parsing —
   ``resolve_kb`` + ``register_version`` + ``prepare_dagster_home`` +
   ``assets.runner.index_kbs`` (Dagster runs on the instance, ``execute_job``):
   full (cold: empty warehouse, empty embedding cache, model not yet loaded), nothing
   changed and one document edited (``--repeat`` times each, a different document each
   time; the median is reported), child RECURSIVE ``max_tokens`` 240 -> 180;
3. then, unless ``--no-cli``, the same two small re-indexes as a user runs them:
   ``corpus index --json`` in a subprocess (interpreter start, imports and, when anything
   must be embedded, the model load are then part of the time);
4. checks the counts each scenario must show, breaks the time down (Dagster steps and
   run overhead, discovery, Parquet, LanceDB, embedding cache, checks; see ``probes.py``),
   prints a table, and writes ``RESULTS.md`` beside this file (unless ``--no-write``).

In-process timing excludes interpreter start and imports (reported separately), which
would otherwise be a constant in every scenario's time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DEFAULT_CORPUS = Path("/work/shared/corpora/markdown-5mb")
KB = "bench"
TARGETS = {"nothing changed": 0.03, "one document edited": 0.05}

# Sections by heading (long ones cut at 2200 characters), children sized in tokens of the
# embedding model: with Chinese text and code, 800-character children exceed the model's
# 254-token limit and the blocking check child_token_limit stops the run (see RESULTS.md).
KB_YAML = """\
description: generated benchmark KB (benchmarks/incremental)
chunking:
  plan: "PARENT:STRUCTURE,RECURSIVE;CHILD:RECURSIVE"
  parent: {RECURSIVE: {max_chars: 2200, overlap_chars: 180}}
  child: {RECURSIVE: {size_unit: tokens, max_tokens: 240, overlap_tokens: 32}}
"""
CHILD_BEFORE = "child: {RECURSIVE: {size_unit: tokens, max_tokens: 240"
CHILD_AFTER = "child: {RECURSIVE: {size_unit: tokens, max_tokens: 180"


@dataclass
class Result:
    name: str
    how: str  # in-process | cli
    wall: float
    summary: dict[str, Any]
    spans: list[tuple[str, str, float, float]] = field(default_factory=list)  # (run partition, step, start, end)
    calls: list[tuple[str, float, float, int]] = field(default_factory=list)  # probes.CALLS of this scenario
    runs_wall: float = 0.0
    probes: dict[str, tuple[float, int]] = field(default_factory=dict)
    checks: list[tuple[str, bool]] = field(default_factory=list)
    walls: list[float] = field(default_factory=list)  # every repetition (``wall`` is their median)
    load: float = 0.0  # 1-minute load average when it ended (the machine may be shared)
    cpu: float = 0.0  # CPU seconds (user + system, all threads) of the process(es) doing the work


# --------------------------------------------------------------------------- machine


def machine() -> dict[str, str]:
    from benchmarks.machine import cpu_model, ram_gib

    cpu, ram = cpu_model(), ram_gib()
    import dagster
    import lancedb

    return {
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "ram": ram,
        "python": platform.python_version(),
        "os": platform.platform(),
        "dagster": dagster.__version__,
        "lancedb": lancedb.__version__,
    }


# --------------------------------------------------------------------------- scenarios


def _step_spans(instance, run_ids: list[str], partitions: list[str]) -> list[tuple[str, str, float, float]]:
    """(run partition, step, start, end) of every step, from the run's event log."""
    from dagster import DagsterEventType

    out = []
    kinds = {DagsterEventType.STEP_START, DagsterEventType.STEP_SUCCESS, DagsterEventType.STEP_FAILURE}
    for run_id, part in zip(run_ids, partitions, strict=True):
        starts: dict[str, float] = {}
        for rec in instance.all_logs(run_id, of_type=kinds):
            ev = rec.dagster_event
            if ev.event_type == DagsterEventType.STEP_START:
                starts[ev.step_key] = rec.timestamp
            elif ev.step_key in starts:
                out.append((part, ev.step_key, starts[ev.step_key], rec.timestamp))
    return out


def index_in_process(name: str, layout) -> Result:
    from dagster import DagsterInstance

    from assets.runner import index_kbs
    from benchmarks.incremental import probes
    from corpus_pipeline.instance import prepare_dagster_home
    from corpus_pipeline.kbconfig import resolve_kb
    from corpus_pipeline.store.versions import register_version

    before = probes.snapshot()
    first_call = len(probes.CALLS)
    c0 = time.process_time()
    t0 = time.perf_counter()
    # What `corpus index` does after parsing its arguments (corpus_pipeline/cli/index.py).
    kb = resolve_kb(layout.kb_dir(KB))
    planned = [(kb, register_version(layout, kb))]
    prepare_dagster_home(layout)
    [summary] = index_kbs(layout, planned, say=lambda s: None)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    res = Result(name, "in-process", wall, summary.to_dict(), probes=probes.delta(before), walls=[wall], cpu=cpu)
    res.load = os.getloadavg()[0]
    res.spans = _step_spans(DagsterInstance.get(), summary.runs, summary.partitions_run)
    res.calls = probes.CALLS[first_call:]
    res.runs_wall = res.probes.get("dagster run", (0.0, 0))[0]
    return res


def index_cli(name: str, env: dict[str, str]) -> Result:
    corpus = Path(sys.executable).with_name("corpus")
    cmd = (
        [str(corpus), "index", "--kb", KB, "--json"]
        if corpus.exists()
        else [sys.executable, "-m", "corpus_pipeline.cli", "index", "--kb", KB, "--json"]
    )
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"`{' '.join(cmd)}` failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    ru2 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru2.ru_utime - ru.ru_utime) + (ru2.ru_stime - ru.ru_stime)
    [summary] = json.loads(proc.stdout)
    return Result(name, "cli", wall, summary, walls=[wall], load=os.getloadavg()[0], cpu=cpu)


def edit_one_document(kb_dir: Path, index: int) -> Path:
    """Insert one new paragraph in the middle of one document (its later chunks shift)."""
    docs = sorted(p for p in kb_dir.rglob("doc-*") if p.is_file())
    doc = docs[index % len(docs)]
    text = doc.read_text(encoding="utf-8")
    paras = text.split("\n\n")
    # The middle, moved forward to a paragraph boundary outside any fenced code block.
    mid = max(1, len(paras) // 2)
    while mid < len(paras) and "\n\n".join(paras[:mid]).count("```") % 2:
        mid += 1
    zh = any("\u4e00" <= c <= "\u9fff" for c in text)
    added = (
        f"补充说明（第 {index} 次修改）：本节内容已于本周复核，示例与当前版本一致。"
        if zh
        else f"Editor's note ({index}): this section was reviewed this week; the examples match the current release."
    )
    doc.write_text("\n\n".join([*paras[:mid], added, *paras[mid:]]), encoding="utf-8")
    return doc


def cached_hashes(layout, model: str) -> set[str]:
    f = layout.cache / "embeddings.sqlite"
    if not f.exists():
        return set()
    with sqlite3.connect(f) as c:
        return {h for (h,) in c.execute("SELECT text_hash FROM vectors WHERE model = ?", (model,))}


def image_meta(instance) -> str:
    """What the last image_descriptions materialization says: count and statuses."""
    from dagster import AssetKey

    ev = instance.get_latest_materialization_event(AssetKey("image_descriptions"))
    if ev is None or ev.asset_materialization is None:
        return "no image_descriptions materialization"
    md = {k: getattr(v, "value", v) for k, v in ev.asset_materialization.metadata.items()}
    statuses = ", ".join(f"{k} {v}" for k, v in (md.get("by_status") or {}).items())
    return f"{md.get('images', 0)} images" + (f": {statuses}" if statuses else "")


def materializations(instance, asset: str) -> int:
    from dagster import AssetKey

    return len(instance.fetch_materializations(AssetKey(asset), limit=10_000).records)


def median_of(results: list[Result]) -> Result:
    """The repetition with the median wall time, carrying every repetition's time."""
    ordered = sorted(results, key=lambda r: r.wall)
    mid = ordered[(len(ordered) - 1) // 2]
    mid.walls = [r.wall for r in results]
    mid.checks = [c for r in results for c in r.checks]
    return mid


# --------------------------------------------------------------------------- report

HEADER = [
    "scenario",
    "wall s",
    "runs (s)",
    "of full",
    "target",
    "CPU s",
    "load",
    "docs parsed/reused",
    "docs re-chunked",
    "chunks embedded/reused",
    "child chunks",
    "partitions run",
]


def _fmt_row(r: Result, full: float) -> list[str]:
    s = r.summary
    ratio = r.wall / full if full else 0.0
    target = TARGETS.get(r.name)
    verdict = (("met" if ratio <= target else "MISSED") + f" (≤ {target:.0%})") if target else "—"
    return [
        r.name + (" (CLI)" if r.how == "cli" else ""),
        f"{r.wall:.2f}",
        " / ".join(f"{w:.2f}" for w in r.walls) if len(r.walls) > 1 else "",
        f"{ratio:.1%}",
        verdict,
        f"{r.cpu:.1f}",
        f"{r.load:.1f}",
        f"{s['documents_parsed']}/{s['documents_reused']}",
        str(s["documents_chunked"]),
        f"{s['embedded']}/{s['reused']}",
        str(s["child_chunks"]),
        ", ".join(s["partitions_run"]) or "none",
    ]


def markdown_table(rows: list[list[str]], header: list[str]) -> str:
    def esc(x: str) -> str:
        return x.replace("|", "\\|")

    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(esc(x) for x in r) + " |" for r in rows]
    return "\n".join(out)


def text_table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(x) for x in col) for col in zip(header, *rows, strict=True)]

    def line(r: list[str]) -> str:
        return "  ".join(x.ljust(w) for x, w in zip(r, widths, strict=True)).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


def _calls_rows(
    calls: list[tuple[str, float, float, int]], base_depth: int, indent: int, wall: float
) -> tuple[list[list[str]], float]:
    """Probe calls aggregated by (label, depth), in order of first start; returns the rows
    and the seconds of the outermost ones (for the remainder)."""
    agg: dict[tuple[str, int], list[float]] = {}
    for label, start, secs, depth in sorted(calls, key=lambda c: (c[1], c[3])):
        a = agg.setdefault((label, depth), [0.0, 0, start])
        a[0] += secs
        a[1] += 1
    rows, outer = [], 0.0
    for (label, depth), (secs, n, _) in agg.items():
        if depth == base_depth:
            outer += secs
        pad = "  " * (indent + depth - base_depth)
        rows.append([pad + label, f"{secs:.3f}", str(int(n)), f"{secs / wall:.1%}"])
    return rows, outer


def breakdown(r: Result) -> list[list[str]]:
    """Where one in-process scenario's time went: outside the Dagster runs, then each run's
    steps with the pipeline functions timed inside them, and what Dagster itself took."""
    w = r.wall

    def pct(x: float) -> str:
        return f"{x / w:.1%}"

    rows: list[list[str]] = [["total (wall)", f"{w:.3f}", "", "100%"]]
    runs = sorted((c for c in r.calls if c[0] == "dagster run"), key=lambda c: c[1])

    def in_run(c: tuple[str, float, float, int], run: tuple[str, float, float, int]) -> bool:
        return run[1] <= c[1] and c[1] + c[2] <= run[1] + run[2] + 1e-3

    outside = [c for c in r.calls if c[0] != "dagster run" and not any(in_run(c, x) for x in runs)]
    out_s = w - r.runs_wall
    rows.append(["outside Dagster runs", f"{out_s:.3f}", "", pct(out_s)])
    sub, outer = _calls_rows(outside, 0, 2, w)
    rows += sub
    rows.append(
        [
            "    rest: resolve_kb, register_version, instance, definitions, partitions",
            f"{out_s - outer:.3f}",
            "",
            pct(out_s - outer),
        ]
    )
    parts = list(dict.fromkeys(p for p, *_ in r.spans))
    for run, part in zip(runs, parts or [""] * len(runs), strict=True):
        job = "parse_kb" if "|" not in part else "index_version"
        rows.append([f"Dagster run {job} [{part}]", f"{run[2]:.3f}", "", pct(run[2])])
        steps_total = 0.0
        for p, step, t0, t1 in r.spans:
            if p != part:
                continue
            dur = t1 - t0
            steps_total += dur
            rows.append([f"    step {step}", f"{dur:.3f}", "", pct(dur)])
            inside = [c for c in r.calls if c[0] != "dagster run" and t0 - 1e-3 <= c[1] and c[1] + c[2] <= t1 + 1e-3]
            sub, outer = _calls_rows(inside, 1, 3, w)
            rows += sub
            rows.append(
                [
                    "      rest of step: Dagster inputs/outputs, metadata, check events",
                    f"{dur - outer:.3f}",
                    "",
                    pct(dur - outer),
                ]
            )
        ov = run[2] - steps_total
        rows.append(
            ["    run overhead (run − its steps): run creation, event log, orchestration", f"{ov:.3f}", "", pct(ov)]
        )
    return rows


def derived(results: list[Result], tokens_full: int) -> dict[str, float]:
    full = results[0]
    enc_s, _ = full.probes.get("model encode", (0.0, 0))
    load_s, _ = full.probes.get("load_embedder", (0.0, 0))
    out = {
        "encode_s": enc_s,
        "model_load_s": load_s,
        "chunks_per_s": full.summary["embedded"] / enc_s if enc_s else 0.0,
        "tokens_per_s": tokens_full / enc_s if enc_s else 0.0,
        "tokens": tokens_full,
        "full_without_model": full.wall - enc_s - load_s,
    }
    edited = next((r for r in results if r.name == "one document edited" and r.how == "in-process"), None)
    if edited is not None and out["full_without_model"]:
        out["edited_vs_full_without_model"] = edited.wall / out["full_without_model"]
    return out


def write_results(path: Path, ctx: dict[str, Any], results: list[Result], full: float) -> None:
    m, kb, d = ctx["machine"], ctx["kb"], ctx["derived"]
    lines = [
        "# Incremental re-indexing benchmark — latest figures",
        "",
        "Generated by the benchmark; what it measures, the findings and the recommended product",
        "changes are in [README.md](README.md).",
        "",
        f"- Run: {ctx['date']}, `{ctx['command']}`, {ctx['total'] / 60:.1f} min in all.",
        (
            f"- Machine: {m['cpu']}, {m['cores']} cores, {m['ram']} RAM; Python {m['python']}; "
            f"Dagster {m['dagster']}, LanceDB {m['lancedb']}; {m['os']}."
        ),
        (
            f"- Load: 1-minute load average {ctx['load_start']:.1f} at the start, {ctx['load_end']:.1f} at the end "
            "(the `load` column: at the end of each scenario; above the core count means other work "
            "was competing for the CPU and every wall time is inflated; `CPU s`, the CPU time of the "
            "process doing the work, all threads, is less sensitive to that)."
        ),
        f"- KB: {kb['documents']} generated documents (seed {ctx['seed']}: "
        + ", ".join(f"{k} {v}" for k, v in kb["by_language_format"].items())
        + f"), {kb['bytes_total'] / 1e6:.2f} MB, {kb['bytes_min']}–{kb['bytes_max']} bytes each "
        f"(mean {kb['bytes_mean']}), text drawn from `{ctx['corpus']}`; {kb['images']} Markdown documents "
        "show a PNG figure, read by OCR (no vision model is configured in the run).",
        (
            "- Plan `PARENT:STRUCTURE,RECURSIVE;CHILD:RECURSIVE`: sections by heading, cut at 2200/180 "
            "characters; children RECURSIVE 240/32 tokens. The strategy change sets the children's "
            "`max_tokens` to 180. Default embedding model (all-MiniLM-L6-v2) on CPU."
        ),
        (
            f"- In-process rows: `resolve_kb` + `register_version` + `prepare_dagster_home` + "
            "`assets.runner.index_kbs` in the benchmark's process, on a real Dagster instance "
            "(temporary DAGSTER_HOME, SQLite storage) in a temporary CORPUS_HOME; imports excluded "
            f"({ctx['import_s']:.1f} s). `wall s` is the median of the runs listed. CLI rows: "
            "`corpus index --kb bench --json` in a subprocess (interpreter start, imports and model "
            "load included)."
        ),
        "",
        markdown_table([_fmt_row(r, full) for r in results], HEADER),
        "",
        f"Full index: model inference {d['encode_s']:.0f} s for {results[0].summary['embedded']} chunks "
        f"({d['tokens']} tokens): {d['chunks_per_s']:.1f} chunks/s, {d['tokens_per_s']:.0f} tokens/s; "
        f"model load {d['model_load_s']:.1f} s; everything else {d['full_without_model']:.1f} s."
        + (
            f" One edited document costs {d['edited_vs_full_without_model']:.0%} of that non-model part."
            if "edited_vs_full_without_model" in d
            else ""
        ),
        "",
        "## Checks",
        "",
    ]
    for r in results:
        for desc, ok in r.checks:
            lines.append(f"- {'✔' if ok else '✘'} {r.name}{' (CLI)' if r.how == 'cli' else ''}: {desc}")
    lines += ["", "## Where the time goes (in-process; the median repetition)", ""]
    for r in results:
        if r.how == "in-process":
            lines += [
                f"### {r.name}",
                "",
                markdown_table(breakdown(r), ["part", "seconds", "calls", "share of wall"]),
                "",
            ]
    path.write_text("\n".join(lines), encoding="utf-8")


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.incremental", description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=500, help="documents in the generated KB (500 for the record)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=3, help="repetitions of the two small re-indexes (median kept)")
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="where text is drawn from (read in place)")
    ap.add_argument("--no-cli", action="store_true", help="skip the `corpus index` subprocess rows")
    ap.add_argument("--no-write", action="store_true", help="do not rewrite RESULTS.md")
    ap.add_argument("--keep", action="store_true", help="keep the temporary CORPUS_HOME (its path is printed)")
    args = ap.parse_args(argv)
    if not args.corpus.is_dir():
        ap.error(f"--corpus {args.corpus}: no such folder (Markdown files to draw text from)")
    started = time.perf_counter()
    started_at = dt.datetime.now()
    load_start = os.getloadavg()[0]

    home = Path(tempfile.mkdtemp(prefix="corpus-bench-incremental-"))
    os.environ["CORPUS_HOME"] = str(home)
    os.environ["DAGSTER_HOME"] = str(home / "dagster")
    for k, v in {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "DO_NOT_TRACK": "1",
        "DAGSTER_DISABLE_TELEMETRY": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }.items():
        os.environ.setdefault(k, v)
    for k in ("OPENAI_BASE_URL", "CORPUS_VISION_MODEL"):  # figures are read by OCR: no network, same work everywhere
        os.environ.pop(k, None)

    def say(s: str) -> None:
        print(s, file=sys.stderr, flush=True)

    try:
        from benchmarks.incremental.corpus import generate_kb

        kb_dir = home / "kbs" / KB
        kb_dir.mkdir(parents=True)
        (kb_dir / "kb.yaml").write_text(KB_YAML, encoding="utf-8")
        t = time.perf_counter()
        kb_info = generate_kb(kb_dir, args.corpus, args.docs, args.seed)
        say(
            f"generated {kb_info['documents']} documents ({kb_info['bytes_total'] / 1e6:.2f} MB) "
            f"in {time.perf_counter() - t:.1f}s under {home}"
        )

        t = time.perf_counter()
        from dagster import DagsterInstance

        import assets.runner  # noqa: F401  (Dagster, the asset graph)
        from benchmarks.incremental import probes
        from corpus_pipeline.embedding.tokens import DEFAULT_MODEL
        from corpus_pipeline.instance import prepare_dagster_home
        from corpus_pipeline.store.layout import Layout
        from corpus_pipeline.store.parquet import read_partition

        import_s = time.perf_counter() - t
        missing = probes.install()
        if missing:
            say(f"(probes not installed, the code moved: {', '.join(missing)})")
        layout = Layout.from_env()
        prepare_dagster_home(layout)
        results: list[Result] = []
        n = args.docs

        # 1. Full, cold.
        say("1/4 full index (cold) …")
        full = index_in_process("full (cold)", layout)
        s = full.summary
        full.checks = [
            (
                f"every document parsed ({s['documents_parsed']} of {n}), none failed",
                s["documents_parsed"] == n and not s["failed_documents"] and s["status"] == "ok",
            ),
            (
                f"every chunk embedded or, for a text seen twice, reused ({s['embedded']} + {s['reused']} = {s['child_chunks']})",
                s["embedded"] + s["reused"] == s["child_chunks"] and s["embedded"] > 0,
            ),
            ("both partitions ran", len(s["partitions_run"]) == 2),
            (
                f"every figure described ({image_meta(DagsterInstance.get())}; {kb_info['images']} in the KB)",
                image_meta(DagsterInstance.get()).startswith(f"{kb_info['images']} images"),
            ),
        ]
        results.append(full)
        base = full.wall
        v1 = s["strategy_version"]
        tokens_full = sum(
            read_partition(layout.partition_dir("child_chunks", KB, v1)).column("token_count").to_pylist()
        )
        say(f"    {full.wall:.1f}s")

        # 2. Nothing changed.
        reps = []
        for i in range(args.repeat):
            say(f"2/4 re-index, nothing changed ({i + 1}/{args.repeat}) …")
            r = index_in_process("nothing changed", layout)
            s = r.summary
            r.checks = [
                (
                    "no run; nothing parsed, chunked or embedded",
                    s["up_to_date"] and not s["partitions_run"] and s["documents_parsed"] == 0 and s["embedded"] == 0,
                )
            ]
            reps.append(r)
            say(f"    {r.wall:.2f}s")
        results.append(median_of(reps))

        # 3. One document edited (a different one each repetition).
        reps = []
        for i in range(args.repeat):
            say(f"3/4 re-index, one document edited ({i + 1}/{args.repeat}) …")
            doc = edit_one_document(kb_dir, n // 2 + 37 * i)
            r = index_in_process("one document edited", layout)
            s = r.summary
            rel = doc.relative_to(kb_dir).as_posix()
            r.checks = [
                (
                    (
                        f"{rel}: only it parsed and re-chunked ({s['documents_parsed']} parsed, {s['documents_reused']} reused, "
                        f"{s['documents_chunked']} re-chunked), {s['embedded']} new chunk texts embedded, both partitions ran"
                    ),
                    (s["documents_parsed"], s["documents_reused"], s["documents_chunked"]) == (1, n - 1, 1)
                    and 0 < s["embedded"] <= 12
                    and len(s["partitions_run"]) == 2
                    and s["status"] == "ok",
                ),
            ]
            reps.append(r)
            say(f"    {r.wall:.2f}s")
        results.append(median_of(reps))

        # 4. Child strategy change: RECURSIVE max_tokens 240 -> 180.
        say("4/4 re-index after child RECURSIVE max_tokens 240 -> 180 …")
        instance = DagsterInstance.get()
        parse_mats = {a: materializations(instance, a) for a in ("documents", "parsed_blocks", "image_descriptions")}
        cache_before = cached_hashes(layout, DEFAULT_MODEL)
        yml = kb_dir / "kb.yaml"
        yml.write_text(yml.read_text().replace(CHILD_BEFORE, CHILD_AFTER))
        r = index_in_process("child strategy changed", layout)
        s = r.summary
        v2 = s["strategy_version"]
        new_hashes = read_partition(layout.partition_dir("child_chunks", KB, v2)).column("text_hash").to_pylist()
        expected = len(set(new_hashes) - cache_before)
        parse_after = {a: materializations(instance, a) for a in parse_mats}
        r.checks = [
            (
                f"a new version ({v1} -> {v2}); only its partition ran",
                v2 != v1 and s["partitions_run"] == [f"{KB}|{v2}"] and s["status"] == "ok",
            ),
            (
                (
                    "no parsing and no image work: 0 documents parsed, no new documents / parsed_blocks / "
                    "image_descriptions materialization"
                ),
                s["documents_parsed"] == 0 and parse_after == parse_mats,
            ),
            (
                (
                    f"only chunk texts never seen before embedded: {s['embedded']} embedded = {expected} distinct new texts "
                    f"among {len(new_hashes)} chunks; {s['reused']} vectors from the cache"
                ),
                s["embedded"] == expected,
            ),
        ]
        results.append(r)
        say(f"    {r.wall:.2f}s")

        # CLI rows: the two small re-indexes as a user runs them.
        if not args.no_cli:
            env = dict(os.environ)
            env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
            say("CLI: corpus index, nothing changed …")
            c = index_cli("nothing changed", env)
            c.checks = [("no run", c.summary["up_to_date"] and not c.summary["partitions_run"])]
            results.append(c)
            say(f"    {c.wall:.2f}s")
            say("CLI: corpus index, one document edited …")
            edit_one_document(kb_dir, n // 3)
            c = index_cli("one document edited", env)
            cs = c.summary
            c.checks = [
                (
                    "one document parsed and re-chunked, its new chunk texts embedded",
                    (cs["documents_parsed"], cs["documents_chunked"]) == (1, 1) and 0 < cs["embedded"] <= 12,
                )
            ]
            results.append(c)
            say(f"    {c.wall:.2f}s")

        d = derived(results, tokens_full)
        print()
        print(text_table([_fmt_row(x, base) for x in results], HEADER))
        print(
            f"\nfull index: model inference {d['encode_s']:.0f}s for {results[0].summary['embedded']} chunks "
            f"({d['chunks_per_s']:.1f} chunks/s, {d['tokens_per_s']:.0f} tokens/s), model load {d['model_load_s']:.1f}s, "
            f"everything else {d['full_without_model']:.1f}s"
        )
        print()
        for x in results:
            for desc, ok in x.checks:
                print(f"{'ok  ' if ok else 'FAIL'} {x.name}{' (CLI)' if x.how == 'cli' else ''}: {desc}")
        for x in results:
            if x.how == "in-process":
                print(f"\nwhere the time goes — {x.name}:")
                print(text_table(breakdown(x), ["part", "seconds", "calls", "share"]))
        total = time.perf_counter() - started
        print(f"\ntotal benchmark time {total:.0f}s; imports {import_s:.1f}s (excluded from in-process rows)")
        if not args.no_write:
            ctx = {
                "date": started_at.strftime("%Y-%m-%d %H:%M"),
                "command": " ".join(
                    [".venv/bin/python -m benchmarks.incremental", *(sys.argv[1:] if argv is None else argv)]
                ),
                "machine": machine(),
                "kb": kb_info,
                "seed": args.seed,
                "corpus": args.corpus,
                "import_s": import_s,
                "total": total,
                "derived": d,
                "load_start": load_start,
                "load_end": os.getloadavg()[0],
            }
            write_results(HERE / "RESULTS.md", ctx, results, base)
            print(f"wrote {HERE / 'RESULTS.md'}")
        return 0 if all(ok for x in results for _, ok in x.checks) else 1
    finally:
        if args.keep:
            say(f"kept {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)
