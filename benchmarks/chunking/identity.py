"""Output fingerprint of the benchmarked chunkers, to prove a speed change kept the output.

    .venv/bin/python -m benchmarks.chunking.identity [--corpus DIR] [--save FILE | --compare FILE]

Hashes every piece (text, start, end, overlap, section path, chunk type, block index,
derived, strategy, metadata) of RECURSIVE in characters (800/120), RECURSIVE in tokens
(256/38), STRUCTURE alone and STRUCTURE -> RECURSIVE over the corpus, per configuration.
Save the fingerprint before a change, compare after: any difference fails (exit 1).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

from benchmarks.chunking.run import DEFAULT_CORPUS, load_corpus

CASES = {
    "RECURSIVE chars 800/120": [("RECURSIVE", {"max_chars": 800, "overlap_chars": 120})],
    "RECURSIVE tokens 256/38": [("RECURSIVE", {"size_unit": "tokens", "max_tokens": 256, "overlap_tokens": 38})],
    "RECURSIVE chars 300/0": [("RECURSIVE", {"max_chars": 300, "overlap_chars": 0})],
    "STRUCTURE": [("STRUCTURE", {})],
    "STRUCTURE->RECURSIVE chars 800/120": [("STRUCTURE", {}), ("RECURSIVE", {"max_chars": 800, "overlap_chars": 120})],
    "STRUCTURE->RECURSIVE tokens 256/38": [
        ("STRUCTURE", {}),
        ("RECURSIVE", {"size_unit": "tokens", "max_tokens": 256, "overlap_tokens": 38}),
    ],
}


def fingerprint(texts: list[str]) -> dict[str, dict[str, object]]:
    from corpus_pipeline.chunking import registry
    from corpus_pipeline.chunking.base import ChunkContext
    from corpus_pipeline.chunking.pipeline import run_steps
    from corpus_pipeline.chunking.plan import Role, Step
    from corpus_pipeline.embedding.tokens import token_counter_for
    from corpus_pipeline.models import Piece

    counter = token_counter_for()
    out: dict[str, dict[str, object]] = {}
    for name, steps in CASES.items():
        strategies = [registry.get(n)(registry.get(n).config_class(**cfg)) for n, cfg in steps]
        h = hashlib.sha256()
        hp = hashlib.sha256()  # the same through the pipeline (cleanup + strategy names)
        n = 0
        for t in texts:
            ctx = ChunkContext(text=t, token_counter=counter)
            pieces = [Piece(t, 0, len(t))]
            for s in strategies:
                pieces = s.split_all(pieces, ctx)
            for p in pieces:  # (the step name a piece carries is the pipeline's: hashed below)
                assert p.text == t[p.start : p.end]
                h.update(
                    repr(
                        (
                            p.text,
                            p.start,
                            p.end,
                            p.overlap_chars,
                            p.section_path,
                            p.chunk_type,
                            p.block_index,
                            p.derived,
                            sorted(p.metadata.items()),
                        )
                    ).encode()
                )
            n += len(pieces)
            ctx2 = ChunkContext(text=t, token_counter=counter)
            plan_steps = [Step(sn, Role.PRIMARY, st.config) for (sn, _), st in zip(steps, strategies, strict=True)]
            for p in run_steps(plan_steps, [Piece(t, 0, len(t))], ctx2):
                hp.update(
                    repr(
                        (
                            p.text,
                            p.start,
                            p.end,
                            p.overlap_chars,
                            p.section_path,
                            p.chunk_type,
                            p.block_index,
                            p.derived,
                            p.strategy,
                            sorted(p.metadata.items()),
                        )
                    ).encode()
                )
        out[name] = {"pieces": n, "sha256": h.hexdigest(), "pipeline_sha256": hp.hexdigest()}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.chunking.identity")
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--save", type=Path)
    g.add_argument("--compare", type=Path)
    args = ap.parse_args(argv)
    fp = fingerprint(load_corpus(args.corpus))
    for name, v in fp.items():
        print(f"{name:40s} {v['pieces']:6d} pieces  {v['sha256'][:16]}  pipeline {v['pipeline_sha256'][:16]}")
    if args.save:
        args.save.write_text(json.dumps(fp, indent=1), encoding="utf-8")
    if args.compare:
        ref = json.loads(args.compare.read_text(encoding="utf-8"))
        bad = [k for k in ref if ref[k] != fp.get(k)]
        print("IDENTICAL" if not bad else f"DIFFERENT: {bad}")
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
