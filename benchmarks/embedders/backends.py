"""torch vs ONNX Runtime (fp32, int8) for the default model, side by side in one run.

    .venv/bin/python -m benchmarks.embedders --backends [--covid-docs N] [--index-docs N] [--write]

The same multilingual-e5-small folder, loaded by sentence-transformers, with its transformer
run by torch, by ONNX Runtime (``embedding.backend: onnx``) and by ONNX Runtime with 8-bit
weights (``onnx-int8``), all in this process:

- export: exporting the folder to ONNX (and quantizing) into a fresh cache root, timed;
- agreement: cosine of each backend's passage vectors to torch's on the speed passages;
- speed: passages/s on ~500-character English and Chinese passages, the three interleaved in
  each round, best of ``--rounds`` (``run.measure_speed``); the ratio to torch is the figure;
- quality: hit@1 / hit@5 / MRR@10 on ``cmrc2018-trial-zh`` (all paragraphs) and ``covid-qa-en``
  (the first ``--covid-docs`` articles' windows and their questions), as ``run.evaluate``;
- the model's share of index time: ``corpus index`` of one small KB (``--index-docs`` markdown
  files of ``../shared/corpora/markdown-5mb``, English and Chinese) in a fresh ``CORPUS_HOME``
  per backend; the embedding steps' time (model load included, export already cached) against
  the process's wall time and the sum of all steps.

``--write`` replaces the section "Backends" of ``RESULTS.md`` (the rest of the file is kept).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.embedders.run import (
    Embedder,
    evaluate,
    load_cmrc,
    load_covid,
    measure_speed,
    speed_passages,
)
from benchmarks.machine import cpu_model, ram_gib
from benchmarks.steps import step_seconds

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DEFAULT_CORPUS = REPO.parent / "shared" / "corpora" / "markdown-5mb"
BACKENDS = ("torch", "onnx", "onnx-int8")
SECTION = "## Backends: torch vs ONNX Runtime"


def load_backend(backend: str, cache_root: Path | None = None) -> Embedder:
    """e5-small through the product's embedder with ``embedding.backend`` = ``backend``."""
    from corpus_pipeline.embedding.local import SentenceTransformerEmbedder
    from corpus_pipeline.embedding.settings import EmbeddingConfig

    if cache_root is not None:
        os.environ["CORPUS_MODEL_CACHE"] = str(cache_root)
    emb = SentenceTransformerEmbedder(EmbeddingConfig(backend=backend, device="cpu"))
    return Embedder(backend, lambda t: emb.embed(t), lambda t: emb.embed_queries(t))


def export_times() -> dict[str, float]:
    """Export (and quantize) the converted e5 folder into a temporary cache root, timed."""
    from corpus_pipeline.embedding.e5_small import ensure_model_dir
    from corpus_pipeline.embedding.onnx_backend import onnx_sentence_transformer

    folder = ensure_model_dir()
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        onnx_sentence_transformer(folder, device="cpu", int8=False, cache_root=Path(tmp))
        out["onnx_s"] = round(time.perf_counter() - t0, 1)
        t0 = time.perf_counter()
        onnx_sentence_transformer(folder, device="cpu", int8=True, cache_root=Path(tmp))
        out["onnx_int8_extra_s"] = round(time.perf_counter() - t0, 1)
        for p in Path(tmp).iterdir():
            size = sum(f.stat().st_size for f in p.rglob("*.onnx"))
            out["int8_mib" if "-int8" in p.name else "onnx_mib"] = round(size / 2**20)
    return out


# ------------------------------------------------------------------------------ index share


def pick_docs(corpus: Path, n_docs: int) -> list[Path]:
    """``n_docs`` markdown files of ``corpus``, half English and half Chinese (the smallest ones
    first over 2 kB, in name order); exits naming the folder if it has too few."""
    chosen: list[Path] = []
    for lang in ("en", "zh"):
        files = sorted(p for p in (corpus / lang).rglob("*.md") if p.stat().st_size > 2000)
        files.sort(key=lambda p: (p.stat().st_size > 12000, str(p)))
        want = n_docs // 2 if lang == "en" else n_docs - n_docs // 2
        if len(files) < want:
            raise SystemExit(
                f"--index-docs {n_docs}: {corpus / lang} has {len(files)} markdown files over 2 kB, {want} are needed "
                "(pass --corpus FOLDER with en/ and zh/ inside, e.g. ../shared/corpora/markdown-5mb, or --index-docs 0)"
            )
        chosen += files[:want]
    return chosen


def make_kb(corpus: Path, kb: Path, n_docs: int) -> dict[str, int]:
    """The ``pick_docs`` files copied into ``kb``."""
    kb.mkdir(parents=True)
    chosen = pick_docs(corpus, n_docs)
    for i, p in enumerate(chosen):
        shutil.copyfile(p, kb / f"{i:03d}-{p.parent.name}-{p.name}")
    return {"docs": len(chosen), "chars": sum(len(p.read_text(encoding="utf-8")) for p in chosen)}


def index_once(backend: str, corpus: Path, n_docs: int) -> dict[str, Any]:
    """``corpus index --json`` of a fresh KB in a fresh CORPUS_HOME with ``embedding.backend``."""
    with tempfile.TemporaryDirectory(prefix="bench-onnx-") as tmp:
        home = Path(tmp)
        kb = home / "kbs" / "bench"
        kb_info = make_kb(corpus, kb, n_docs)
        (kb / "kb.yaml").write_text(f"embedding:\n  backend: {backend}\n  device: cpu\n", encoding="utf-8")
        env = {**os.environ, "CORPUS_HOME": str(home), "DAGSTER_HOME": str(home / "dagster"), "HF_HUB_OFFLINE": "1"}
        (home / "dagster").mkdir()
        cmd = [str(Path(sys.executable).parent / "corpus"), "index", "--kb", "bench", "--json"]
        t0 = time.perf_counter()
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, check=False)
        wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise RuntimeError(f"corpus index ({backend}) failed: {res.stderr[-2000:]}{res.stdout[-2000:]}")
    steps = step_seconds(res.stderr)
    summary = json.loads(res.stdout)
    embed_s = sum(v for k, v in steps.items() if "embed" in k)
    total_steps = sum(steps.values())
    out = {
        **kb_info,
        "wall_s": round(wall, 1),
        "steps_s": round(total_steps, 1),
        "embed_s": round(embed_s, 1),
        "share_of_wall": round(embed_s / wall, 3),
        "share_of_steps": round(embed_s / total_steps, 3) if total_steps else None,
        "steps": {k: round(v, 1) for k, v in steps.items()},
        "summary": _counts(summary),
    }
    print(f"  index {backend:10} " + json.dumps({k: v for k, v in out.items() if k != "steps"}), flush=True)
    return out


def _counts(summary: Any) -> dict[str, Any]:
    """The KB's counts from ``corpus index --json`` (chunks embedded and the like)."""
    kbs = summary.get("kbs", summary) if isinstance(summary, dict) else summary
    first = kbs[0] if isinstance(kbs, list) and kbs else kbs
    if not isinstance(first, dict):
        return {}
    keys = ("status", "documents", "parent_blocks", "child_chunks", "chunks_embedded", "embedded", "reused")
    return {k: first[k] for k in keys if k in first}


# ------------------------------------------------------------------------------ run


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    load_start = os.getloadavg()
    cmrc_root, covid_root = args.benchmarks / "cmrc2018-trial-zh", args.benchmarks / "covid-qa-en"
    qsets = [load_cmrc(cmrc_root, args.questions, None), load_covid(covid_root, args.questions, args.covid_docs)]
    if args.index_docs:
        pick_docs(args.corpus, args.index_docs)  # before the long part: a missing corpus is refused at once
    result: dict[str, Any] = {
        "date": dt.date.today().isoformat(),
        "machine": f"{cpu_model()}, {os.cpu_count()} cores, {ram_gib()}, {platform.system()} {platform.release()}",
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "command": "python -m benchmarks.embedders " + " ".join(sys.argv[1:]),
        "load_average_start": [round(x, 1) for x in load_start],
        "rounds": args.rounds,
        "sets": {q.name: {"docs": q.docs, "units": len(q.units), "questions": len(q.questions)} for q in qsets},
        "quality": {q.name: {} for q in qsets},
    }

    def save() -> None:
        result["wall_s"] = round(time.perf_counter() - started)
        result["load_average_end"] = [round(x, 1) for x in os.getloadavg()]
        if args.json:
            args.json.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

    import onnxruntime  # type: ignore[import-untyped]
    import torch

    result["versions"] = {"torch": torch.__version__, "onnxruntime": onnxruntime.__version__}
    result["threads"] = {"torch": torch.get_num_threads()}
    if not args.skip_export:
        result["export"] = export_times()
        print(f"export: {result['export']}", flush=True)
    embedders = {b: load_backend(b) for b in BACKENDS}
    passages = speed_passages(cmrc_root, covid_root)
    ref = {lang: embedders["torch"].passages(texts) for lang, texts in passages.items()}
    agreement: dict[str, dict[str, float]] = {}
    for b in BACKENDS[1:]:
        for lang, texts in passages.items():
            cos = np.sum(embedders[b].passages(texts) * ref[lang], axis=1)
            agreement.setdefault(b, {})[f"{lang}_min"] = round(float(cos.min()), 5)
            agreement[b][f"{lang}_mean"] = round(float(cos.mean()), 5)
    result["agreement"] = agreement
    print(f"agreement: {agreement}", flush=True)
    dense: dict[str, Embedder | None] = dict(embedders)
    result["speed"] = measure_speed(dense, passages, args.rounds)
    print(f"speed: {json.dumps(result['speed'])}", flush=True)
    save()
    for q in qsets:
        for b in BACKENDS:
            result["quality"][q.name][b] = evaluate(b, embedders[b], q)
            save()
    del embedders, dense
    if args.index_docs:
        result["index"] = {b: index_once(b, args.corpus, args.index_docs) for b in BACKENDS}
        save()
    save()
    return result


# ------------------------------------------------------------------------------ RESULTS.md


def _pt(x: float, base: float) -> str:
    return f"{x:.3f} ({100 * (x - base):+.1f})"


def markdown(r: dict[str, Any]) -> str:
    base = r["speed"]["torch"]
    lines = [
        SECTION,
        "",
        f"Command: `{r['command']}` (wall time {r['wall_s'] / 60:.0f} min). Machine: {r['machine']}, Python "
        f"{r['python']}, torch {r['versions']['torch']} ({r['threads']['torch']} threads), onnxruntime "
        f"{r['versions']['onnxruntime']}, {r['date']}. Load average {r['load_average_start'][0]} at the start, "
        f"{r['load_average_end'][0]} at the end"
        + (
            ": the cores were shared with other jobs, so absolute rates are low and noisy"
            if max(r["load_average_start"][0], r["load_average_end"][0]) > (r.get("cores") or 2)
            else " (no other job)"
        )
        + "; the three backends ran interleaved in the same process, and the ratios to torch are the figures to "
        "compare. The ratios depend on the CPU, not only on its model name: its instruction sets are in brackets.",
        "",
        "The same multilingual-e5-small folder and the same sentence-transformers pipeline (tokenizer, prompts, "
        "length-sorted batches of 32, mean pooling, normalisation); only the transformer's forward pass differs: "
        "torch, ONNX Runtime fp32 (`embedding.backend: onnx`), ONNX Runtime with dynamically quantized int8 "
        "weights (`onnx-int8`).",
        "",
        "| backend | EN passages/s (× torch) | ZH passages/s (× torch) | query ms | cosine to torch (EN / ZH, min) |",
        "|---|---|---|---|---|",
    ]
    for b in BACKENDS:
        s = r["speed"][b]
        agree = r["agreement"].get(b)
        cos = f"{agree['en_min']:.5f} / {agree['zh_min']:.5f}" if agree else "1"
        lines.append(
            f"| {b} | {s['en']:.1f} ({s['en'] / base['en']:.2f}×) | {s['zh']:.1f} ({s['zh'] / base['zh']:.2f}×) "
            f"| {s['query_ms']:.1f} | {cos} |"
        )
    cm, cv = "cmrc2018-trial-zh", "covid-qa-en"
    q = r["quality"]
    sets = r["sets"]
    lines += [
        "",
        f"Retrieval quality (points against torch in brackets): `{cm}` {sets[cm]['units']} paragraphs, "
        f"{sets[cm]['questions']} questions; `{cv}` the first {sets[cv]['docs']} articles, {sets[cv]['units']} "
        f"windows, {sets[cv]['questions']} questions. Index: embedding all the units of the set.",
        "",
        "| backend | CMRC hit@1 | CMRC hit@5 | CMRC MRR@10 | COVID hit@1 | COVID hit@5 | COVID MRR@10 | index CMRC "
        "| index COVID |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for b in BACKENDS:
        cells = []
        for name in (cm, cv):
            m, t = q[name].get(b), q[name].get("torch")
            cells += [_pt(m[k], t[k]) if m and t else "not run" for k in ("hit@1", "hit@5", "mrr@10")]
        idx = [
            f"{q[n][b]['index_s']:.0f} s ({q[n][b]['units_per_s']:.1f}/s)" if q[n].get(b) else "not run"
            for n in (cm, cv)
        ]
        lines.append(f"| {b} | " + " | ".join(cells + idx) + " |")
    lines += ["", *verdict(r)]
    if "index" in r:
        first = r["index"]["torch"]
        lines += [
            "",
            f"The model's share of index time: `corpus index` of one KB of {first['docs']} markdown files "
            f"({first['chars']:,} characters, English and Chinese, from `../shared/corpora/markdown-5mb`), a fresh "
            "`CORPUS_HOME` per backend (nothing cached, the ONNX export already made). Embedding: the embedding "
            "steps (model load included) as `corpus index` reports them.",
            "",
            "| backend | chunks | wall s | all steps s | embedding s | embedding / wall | embedding / steps |",
            "|---|---|---|---|---|---|---|",
        ]
        for b in BACKENDS:
            x = r["index"][b]
            chunks = x["summary"].get("child_chunks", "?")
            lines.append(
                f"| {b} | {chunks} | {x['wall_s']:.0f} | {x['steps_s']:.0f} | {x['embed_s']:.0f} | "
                f"{100 * x['share_of_wall']:.0f} % | {100 * (x['share_of_steps'] or 0):.0f} % |"
            )
    if "export" in r:
        e = r["export"]
        lines += [
            "",
            f"Export, once per model folder (cached beside it, content-keyed): ONNX {e['onnx_s']} s "
            f"({e.get('onnx_mib', '?')} MiB), int8 {e['onnx_int8_extra_s']} s more ({e.get('int8_mib', '?')} MiB).",
        ]
    lines.append("")
    return "\n".join(lines)


def verdict(r: dict[str, Any]) -> list[str]:
    """The issue's target per backend: >= 2x torch's passages/s at <= 1 point of hit@5 / MRR@10 lost."""
    base, out = r["speed"]["torch"], []
    for b in BACKENDS[1:]:
        s = r["speed"][b]
        lost = max(
            100 * (q["torch"][k] - q[b][k])
            for q in r["quality"].values()
            if b in q and "torch" in q
            for k in ("hit@1", "hit@5", "mrr@10")
        )
        ratios = {lang: s[lang] / base[lang] for lang in ("en", "zh")}
        met = all(x >= 2 for x in ratios.values()) and lost <= 1
        out.append(
            f"- `{b}`: {ratios['en']:.2f}× torch on English, {ratios['zh']:.2f}× on Chinese; at most "
            f"{lost:.1f} points lost on any metric. Target (≥ 2× at ≤ 1 point lost): "
            + ("met." if met else "not met" + (" (speed)." if lost <= 1 else "."))
        )
    return out


def write_results(r: dict[str, Any]) -> Path:
    """Replace (or append) the Backends section of RESULTS.md, up to the next ``## `` heading."""
    path = HERE / "RESULTS.md"
    old = path.read_text(encoding="utf-8") if path.exists() else "# Embedder benchmark results\n"
    new = markdown(r).rstrip("\n") + "\n\n"
    if SECTION in old:
        start = old.index(SECTION)
        nxt = old.find("\n## ", start + len(SECTION))
        text = old[:start] + new + (old[nxt + 1 :] if nxt != -1 else "")
    else:
        cut = old.find("\n## Reading it")
        text = old[: cut + 1] + new + old[cut + 1 :] if cut != -1 else old.rstrip("\n") + "\n\n" + new
    path.write_text(text, encoding="utf-8")
    return path


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--backends", action="store_true", help="torch vs onnx vs onnx-int8 for e5-small, side by side (backends.py)"
    )
    ap.add_argument("--covid-docs", type=int, default=15, help="--backends: the first N COVID-QA articles")
    ap.add_argument(
        "--index-docs", type=int, default=24, help="--backends: markdown files of the KB indexed per backend (0: skip)"
    )
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="--backends: the markdown corpus of that KB")
    ap.add_argument("--skip-export", action="store_true", help="--backends: do not time a fresh export")
