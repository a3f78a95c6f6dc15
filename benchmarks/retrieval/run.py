"""End-to-end retrieval benchmark: the product as users meet it, and plain peers over its chunks.

    .venv/bin/python -m benchmarks.retrieval PATH [PATH...] [--index-config NAME ...]
        [--search-config NAME ...] [--limit-docs N] [--limit-questions N] [--out DIR] [--keep]

For each KB folder PATH (documents + ``questions.jsonl``) and each index configuration,
one configuration at a time:

1. a fresh CORPUS_HOME under ``--out`` with ``kbs/<name>/``: the documents (copied; the
   first ``--limit-docs`` in sorted order, and only the questions whose references all lie
   in them, then the first ``--limit-questions``) and a ``kb.yaml`` made from the config;
2. ``corpus index --kb <name> --json`` as a subprocess, wall-timed, exit code checked;
3. per search configuration, kb.yaml's ``search:`` section rewritten (the version does not
   change) and ``corpus eval --kb <name> --json`` run; its summary kept, its per-question
   details written under ``--out``;
4. the peers (``peers.py``) over the very chunks and vectors of the indexed version.

Then a markdown table per KB, printed and written to ``--out/results.md``, and everything
(kb.yaml texts, versions, the machine, the git commit) to ``--out/results.json``.
See README.md beside this file for what the columns mean.
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

from benchmarks.retrieval import configs, peers, product
from benchmarks.retrieval.kbfolder import Selection, kb_name, materialize, select, write_kb_yaml, write_questions

REPO = product.REPO


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- the machine


def _git(*args: str) -> str | None:
    try:
        p = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout.strip() if p.returncode == 0 else None


def machine() -> dict[str, Any]:
    from benchmarks.machine import cpu_model, ram_gib

    status = _git("status", "--porcelain", "--untracked-files=no")
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "ram": ram_gib(),
        "python": platform.python_version(),
        "os": platform.platform(),
        "git_commit": _git("rev-parse", "--short", "HEAD"),
        "git_dirty": None if status is None else bool(status),
    }


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# --------------------------------------------------------------------------- one KB x one index config


def _last_line(text: str, n: int = 240) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return (lines[-1][:n] + ("..." if len(lines[-1]) > n else "")) if lines else ""


def _tail(text: str, n: int = 3000) -> str:
    return text if len(text) <= n else "..." + text[-n:]


def _over_budget(eval_json: dict[str, Any], total_budget: int) -> int:
    qs = eval_json["versions"][0].get("questions") or []
    return sum(1 for q in qs if (q.get("parent") or {}).get("returned_chars", 0) > total_budget)


def _answer_cut(eval_json: dict[str, Any]) -> tuple[int, int]:
    """(questions whose matched children hold more reference characters than the returned
    evidence, those of them whose evidence holds none): the answer was found, then cut."""
    qs = eval_json["versions"][0].get("questions") or []
    more = [
        q
        for q in qs
        if (q.get("child") or {}).get("overlap_chars", 0) > (q.get("parent") or {}).get("overlap_chars", 0)
    ]
    return len(more), sum(1 for q in more if not (q.get("parent") or {}).get("overlap_chars", 0))


def _skipped_by_anchoring(notes: list[str]) -> int:
    return sum(1 for n in notes if n.endswith("question skipped"))


def run_index_config(
    sel: Selection,
    iname: str,
    icfg: dict[str, Any],
    searches: list[tuple[str, dict[str, Any]]],
    out: Path,
    args: argparse.Namespace,
) -> dict[str, Any]:
    from benchmarks.retrieval.peers import default_budgets
    from corpus_pipeline.store.layout import Layout
    from corpus_pipeline.store.versions import active_version

    kb = sel.name
    home = Path(args.homes) / f"{kb}__{iname}"
    details = out / "details" / kb / iname
    if home.exists():
        shutil.rmtree(home)
    details.mkdir(parents=True, exist_ok=True)
    entry: dict[str, Any] = {"index_config": iname, "config": icfg, "corpus_home": str(home)}
    try:
        # Questions present at index time make `corpus index` run the retrieval_eval asset
        # too (an evaluation inside the index time): by default they are written after it.
        dest = materialize(sel, home, questions=args.questions_before_index)
        base = (sel.own_kb_yaml or {}) if args.with_kb_yaml else {}
        kbcfg = configs.deep_merge(base, icfg)
        entry["kb_yaml_index"] = write_kb_yaml(dest, kbcfg)
        entry["load_before"] = load()
        say(f"[{kb} / {iname}] corpus index ({len(sel.documents)} documents) ...")
        run = product.index(home, kb, timeout=args.timeout)
        entry["index_seconds"] = round(run.seconds, 2)
        entry["index_returncode"] = run.returncode
        entry["index_summary"] = run.extra.get("summary")
        if not run.ok:
            entry["error"] = run.error
            entry["stderr"] = _tail(run.stderr)
            say(f"[{kb} / {iname}] FAILED: {run.error}\n{_tail(run.stderr)}")
            return entry
        layout = Layout(home)
        write_questions(sel, dest)
        version = active_version(layout, kb)
        entry["strategy_version"] = version
        say(f"[{kb} / {iname}] indexed in {run.seconds:.1f} s: version {version}")
        if version is None:
            entry["error"] = "corpus index exited 0 but the KB has no active version"
            return entry

        entry["searches"] = []
        for sname, scfg in searches:
            cfg = configs.deep_merge(kbcfg, {"search": scfg}) if scfg else kbcfg
            text = write_kb_yaml(dest, cfg)
            s_entry: dict[str, Any] = {"search_config": sname, "config": scfg, "kb_yaml": text}
            say(f"[{kb} / {iname} / {sname}] corpus eval ...")
            ev = product.evaluate(home, kb, timeout=args.timeout)
            s_entry["eval_seconds"] = round(ev.seconds, 2)
            if not ev.ok:
                s_entry["error"] = ev.error
                s_entry["stderr"] = _tail(ev.stderr)
                say(f"[{kb} / {iname} / {sname}] FAILED: {ev.error}\n{_tail(ev.stderr)}")
                entry["searches"].append(s_entry)
                continue
            (details / f"eval-{sname}.json").write_text(
                json.dumps(ev.parsed, ensure_ascii=False, indent=1), encoding="utf-8"
            )
            v0 = ev.parsed["versions"][0]
            notes = list(v0.get("notes") or [])
            total_budget = int(scfg.get("total_evidence_max_chars", default_budgets()[1]))
            s_entry.update(
                summary=v0["summary"],
                evaluated_version=v0.get("strategy_version"),
                notes=notes,
                questions_skipped_by_anchoring=_skipped_by_anchoring(notes),
                questions_over_total_budget=_over_budget(ev.parsed, total_budget),
                questions_answer_cut=_answer_cut(ev.parsed)[0],
                questions_answer_cut_entirely=_answer_cut(ev.parsed)[1],
                details_file=str((details / f"eval-{sname}.json").relative_to(out)),
            )
            if v0.get("strategy_version") != version:
                s_entry["warning"] = f"corpus eval evaluated {v0.get('strategy_version')}, not {version}"
            entry["searches"].append(s_entry)
            summ = v0["summary"]
            say(
                f"[{kb} / {iname} / {sname}] {summ.get('questions')} questions: parent R {summ.get('parent_recall')}"
                f" hit {summ.get('hit_rate')} MRR {summ.get('mrr')} chars {summ.get('mean_returned_chars')}"
            )
        write_kb_yaml(dest, kbcfg)
        try:
            entry["peers"] = run_peers(layout, kb, version, details, out, args.peer_budgets)
        except Exception as exc:  # noqa: BLE001 - the product rows stand without the peers
            entry["peers_error"] = f"{type(exc).__name__}: {exc}"
            say(f"[{kb} / {iname}] peers FAILED: {entry['peers_error']}")
        return entry
    finally:
        entry["load_after"] = load()
        if not args.keep and home.exists():
            shutil.rmtree(home, ignore_errors=True)


def run_peers(layout: Any, kb: str, version: str, details: Path, out: Path, budgets: list[str]) -> list[dict[str, Any]]:
    from corpus_pipeline.retrieval.evaluation import anchor_references, load_canonical_texts, load_questions

    questions, notes = anchor_references(
        load_questions(layout.kb_dir(kb) / "questions.jsonl"), load_canonical_texts(layout, kb)
    )
    chunks = peers.Chunks.load(layout, kb, version)
    say(f"[{kb}] peers over {len(chunks.children)} children, {len(chunks.parents)} parents, {len(questions)} questions")
    reports: list[dict[str, Any]] = []
    candidates: list[tuple[str, Any]] = [
        ("bm25-words", lambda: peers.bm25_peer("bm25-words", chunks, peers.tokens_words)),
        ("bm25-bigrams", lambda: peers.bm25_peer("bm25-bigrams", chunks, peers.tokens_bigrams)),
        ("vector", lambda: _vector_peer(layout, kb, version, chunks)),
    ]
    for name, build in candidates:
        try:
            peer = build()
            rep = peers.evaluate_peer(peer, chunks, questions, budgets)
        except Exception as exc:  # noqa: BLE001 - one failing peer must not lose the others
            say(f"[{kb}] peer {name} FAILED: {type(exc).__name__}: {exc}")
            reports.append({"name": name, "error": f"{type(exc).__name__}: {exc}"})
            continue
        f = details / f"peer-{name}.json"
        f.write_text(json.dumps(rep.questions, ensure_ascii=False, indent=1), encoding="utf-8")
        reports.append(
            {
                "name": name,
                "about": rep.about,
                "build_seconds": rep.build_seconds,
                "budget": {
                    "parent_evidence_max_chars": rep.budget[0],
                    "total_evidence_max_chars": rep.budget[1],
                },
                "variants": rep.variants,
                "anchoring_notes": notes,
                "details_file": str(f.relative_to(out)),
            }
        )
        recalls = ", ".join(f"{k} {v.get('parent_recall')}" for k, v in rep.variants.items())
        say(f"[{kb}] peer {name}: parent recall {recalls}")
    return reports


def _vector_peer(layout: Any, kb: str, version: str, chunks: Any) -> Any:
    from corpus_pipeline.embedding import open_embedder
    from corpus_pipeline.store.versions import version_embedding

    cfg = version_embedding(layout, kb, version)
    emb = open_embedder(cfg)
    if product.THREADS is not None:
        import torch

        torch.set_num_threads(product.THREADS)
    return peers.vector_peer(chunks, lambda q: emb.embed_queries([q])[0], cfg.model)


# --------------------------------------------------------------------------- tables


def _fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


HEADER = "| run | questions | parent recall | parent IoU | hit | MRR | chars | index s | query p50 ms |"
RULE = "|---|---:|---:|---:|---:|---:|---:|---:|---:|"


def _row(label: str, s: dict[str, Any], index_s: Any, index_digits: int = 1) -> str:
    return (
        f"| {label} | {_fmt(s.get('questions'))} | {_fmt(s.get('parent_recall'))} | {_fmt(s.get('parent_iou'), 4)}"
        f" | {_fmt(s.get('hit_rate'))} | {_fmt(s.get('mrr'))} | {_fmt(s.get('mean_returned_chars'), 0)}"
        f" | {_fmt(index_s, index_digits)} | {_fmt(s.get('query_p50_ms'), 1)} |"
    )


def kb_table(kb: dict[str, Any]) -> str:
    lines = [
        f"### {kb['name']}",
        "",
        f"`{kb['source']}`: {kb['documents']} documents, {kb['questions_written']} questions written"
        f" (of {kb['questions_in_source']}; {kb['questions_outside_docs']} outside the kept documents).",
        "",
        HEADER,
        RULE,
    ]
    for r in kb["runs"]:
        if r.get("error"):
            why = _last_line(r.get("stderr") or "").replace("|", "/")
            lines.append(f"| product {r['index_config']} | index failed: {r['error']}: {why} |||||||")
            continue
        for s in r.get("searches", []):
            label = f"product {r['index_config']} × {s['search_config']}"
            if s.get("error"):
                why = _last_line(s.get("stderr") or "").replace("|", "/")
                lines.append(f"| {label} | eval failed: {s['error']}: {why} |||||||")
            else:
                lines.append(_row(label, s["summary"], r.get("index_seconds")))
    for r in kb["runs"]:
        if r.get("peers_error"):
            lines.append(f"| peers [{r['index_config']}] | failed: {r['peers_error'][:200]} |||||||")
        for p in r.get("peers", []):
            label = f"{p['name']} [{r['index_config']}]"
            if p.get("error"):
                lines.append(f"| {label} | failed: {p['error'][:120]} |||||||")
                continue
            budget = p["budget"]["total_evidence_max_chars"]
            for k, summary in p["variants"].items():
                name = p["name"] if k == "full" else f"{p['name']}@{budget}{peers.BUDGET_SUFFIX[k]}"
                lines.append(_row(f"{name} [{r['index_config']}]", summary, p["build_seconds"], 2))
    versions = [f"{r['index_config']} = `{r.get('strategy_version')}`" for r in kb["runs"] if not r.get("error")]
    if versions:
        lines += ["", "Versions: " + ", ".join(versions) + "."]
    flags = []
    for r in kb["runs"]:
        for s in r.get("searches", []):
            if s.get("questions_skipped_by_anchoring"):
                flags.append(
                    f"{r['index_config']} × {s['search_config']}: {s['questions_skipped_by_anchoring']}"
                    " questions skipped by anchoring"
                )
            if s.get("questions_over_total_budget"):
                flags.append(
                    f"{r['index_config']} × {s['search_config']}: {s['questions_over_total_budget']}"
                    " questions returned more characters than search.total_evidence_max_chars"
                )
            if s.get("questions_answer_cut"):
                flags.append(
                    f"{r['index_config']} × {s['search_config']}: in {s['questions_answer_cut']} questions the"
                    " matched children held more of the answer than the returned evidence (in"
                    f" {s['questions_answer_cut_entirely']} the evidence held none of it)"
                )
            peer_qs = {p["variants"]["full"].get("questions") for p in r.get("peers", []) if "variants" in p}
            if s.get("summary") and peer_qs and peer_qs != {s["summary"].get("questions")}:
                flags.append(
                    f"{r['index_config']} × {s['search_config']}: the product scored"
                    f" {s['summary'].get('questions')} questions, the peers {sorted(peer_qs)}"
                )
            if s.get("warning"):
                flags.append(f"{r['index_config']} × {s['search_config']}: {s['warning']}")
    if flags:
        lines += ["", *(f"- {f}" for f in flags)]
    return "\n".join(lines)


def results_md(result: dict[str, Any]) -> str:
    m = result["machine"]
    head = [
        "# Retrieval benchmark",
        "",
        f"{result['started_at']} · {m['cpu']}, {m['cores']} cores, {m['ram']} RAM · load {result['load_before']}"
        f" → {result['load_after']} · git {m['git_commit']}{' (dirty tree)' if m['git_dirty'] else ''}"
        f" · {result['seconds']:.0f} s",
        "",
        f"`{result['command']}`",
        "",
        "Product rows: `corpus eval` (budgeted evidence, search settings of the row). Peer rows: the same"
        " chunks, top 5 parents' full spans; `@N`: cut to the product's default budgets. Peers' `index s` is"
        " the peer's own build time over the product's chunks (and stored vectors), not an indexing time.",
    ]
    return "\n".join([*head, "", *(kb_table(kb) + "\n" for kb in result["kbs"])])


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.retrieval", description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", type=Path, help="KB folders: documents and a questions.jsonl")
    ap.add_argument(
        "--index-config",
        action="append",
        metavar="NAME[=JSON]",
        help=f"index configuration (repeatable; default {' '.join(configs.DEFAULT_INDEX)}); known:"
        f" {', '.join(configs.INDEX_CONFIGS)}",
    )
    ap.add_argument(
        "--search-config",
        action="append",
        metavar="NAME[=JSON]",
        help=f"search configuration (repeatable; default {' '.join(configs.DEFAULT_SEARCH)}); known:"
        f" {', '.join(configs.SEARCH_CONFIGS)}",
    )
    ap.add_argument("--limit-docs", type=int, help="the first N documents (sorted), and the questions inside them")
    ap.add_argument("--limit-questions", type=int, help="the first N questions (after --limit-docs)")
    ap.add_argument("--out", type=Path, help="output folder (default: a new temporary folder)")
    ap.add_argument("--keep", action="store_true", help="keep the CORPUS_HOMEs (under OUT/homes)")
    ap.add_argument(
        "--with-kb-yaml",
        action="store_true",
        help="merge the configurations over the KB's own kb.yaml (default: ignore it; kb.yaml = the configuration)",
    )
    ap.add_argument("--timeout", type=float, help="seconds allowed per corpus command (default: none)")
    ap.add_argument(
        "--questions-before-index",
        action="store_true",
        help="write questions.jsonl before `corpus index` (which then also runs its retrieval_eval asset, inside"
        " the index time); default: after it",
    )
    ap.add_argument(
        "--peer-budgets",
        default="greedy,equal",
        type=lambda v: [x for x in v.split(",") if x],
        help="budget rules of the peers' budgeted rows: greedy (@5200), equal (@5200eq); comma-separated"
        " (default both; '' for none)",
    )
    ap.add_argument(
        "--threads",
        type=int,
        help="torch / BLAS threads (OMP_NUM_THREADS, MKL_NUM_THREADS) of the product and the vector peer"
        " (default: the libraries' own, as users get it)",
    )
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        index_cfgs = [
            configs.resolve(s, configs.INDEX_CONFIGS, "index") for s in args.index_config or configs.DEFAULT_INDEX
        ]
        search_cfgs = [
            configs.resolve(s, configs.SEARCH_CONFIGS, "search") for s in args.search_config or configs.DEFAULT_SEARCH
        ]
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    for names, kind in ((index_cfgs, "index"), (search_cfgs, "search")):
        dup = {n for n, _ in names if [m for m, _ in names].count(n) > 1}
        if dup:
            print(f"--{kind}-config: names used twice: {', '.join(sorted(dup))}", file=sys.stderr)
            return 2
    bad = [b for b in args.peer_budgets if b not in peers.BUDGETS]
    if bad:
        print(f"--peer-budgets: unknown {', '.join(bad)}; known: {', '.join(peers.BUDGETS)}", file=sys.stderr)
        return 2
    for p in args.paths:
        if not (p / "questions.jsonl").is_file():
            print(f"{p}: not a KB folder with a questions.jsonl", file=sys.stderr)
            return 2
    if args.threads is not None:
        product.THREADS = args.threads
        os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(args.threads)
    out = (args.out or Path(tempfile.mkdtemp(prefix="corpus-bench-retrieval-"))).resolve()
    out.mkdir(parents=True, exist_ok=True)
    # The CORPUS_HOMEs hold copies of the documents: never inside the repository.
    homes = out / "homes"
    if out == REPO or REPO in out.parents:
        homes = Path(tempfile.mkdtemp(prefix="corpus-bench-retrieval-homes-"))
    args.homes = homes
    say(f"output: {out}")

    started = time.perf_counter()
    result: dict[str, Any] = {
        "started_at": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": " ".join(["python -m benchmarks.retrieval", *(sys.argv[1:] if argv is None else argv)]),
        "machine": machine(),
        "load_before": load(),
        "index_configs": dict(index_cfgs),
        "search_configs": dict(search_cfgs),
        "limits": {"docs": args.limit_docs, "questions": args.limit_questions},
        "with_kb_yaml": args.with_kb_yaml,
        "questions_before_index": args.questions_before_index,
        "threads": args.threads,
        "kbs": [],
    }
    taken: set[str] = set()
    for path in args.paths:
        name = kb_name(path.resolve(), taken)
        sel = select(path.resolve(), name, args.limit_docs, args.limit_questions)
        kb: dict[str, Any] = {
            "name": name,
            "source": str(path.resolve()),
            "documents": len(sel.documents),
            "document_paths": sel.documents,
            "questions_in_source": sel.questions_in_source,
            "questions_outside_docs": sel.questions_outside_docs,
            "questions_written": len(sel.questions),
            "own_kb_yaml": sel.own_kb_yaml,
            "runs": [],
        }
        result["kbs"].append(kb)
        for iname, icfg in index_cfgs:
            try:
                entry = run_index_config(sel, iname, icfg, search_cfgs, out, args)
            except Exception as exc:  # noqa: BLE001 - report it, go on with the next configuration
                entry = {"index_config": iname, "config": icfg, "error": f"harness: {type(exc).__name__}: {exc}"}
                say(f"[{name} / {iname}] FAILED: {entry['error']}")
            kb["runs"].append(entry)
            _write(out, result, started)  # partial results survive an interrupted run
    _write(out, result, started)
    if args.keep:
        say(f"kept the CORPUS_HOMEs under {homes}")
    else:
        shutil.rmtree(homes, ignore_errors=True)
    md = (out / "results.md").read_text(encoding="utf-8")
    print(md)
    say(f"written: {out / 'results.md'}, {out / 'results.json'}, details under {out / 'details'}")
    return 0


def _write(out: Path, result: dict[str, Any], started: float) -> None:
    result["load_after"] = load()
    result["seconds"] = round(time.perf_counter() - started, 1)
    result["finished_at"] = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    (out / "results.json").write_text(json.dumps(result, ensure_ascii=False, indent=1), encoding="utf-8")
    (out / "results.md").write_text(results_md(result), encoding="utf-8")
