"""Parsing in worker processes (``parsing.worker``) gives exactly what parsing in this
process gives: one parse path, the same rows and ids, in input order."""

from __future__ import annotations

from pathlib import Path

from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.parsing import discover, parse_document
from corpus_pipeline.parsing.worker import ParseJob, parse_many

SAMPLES = Path(__file__).resolve().parents[2] / "data" / "kbs"


def test_worker_output_equals_the_plain_parse_on_every_sample_document(tmp_path: Path) -> None:
    jobs = []
    for kb_dir in sorted(p for p in SAMPLES.iterdir() if p.is_dir()):
        kb = resolve_kb(kb_dir)
        jobs += [ParseJob(d, kb.path, tmp_path / "images", kb.config.parsing) for d in discover(kb)]
    assert {j.doc.format for j in jobs} == {"markdown", "text", "html", "docx", "pdf"}
    plain = [parse_document(j.doc, j.kb_dir, images_dir=j.images_dir, limits=j.limits) for j in jobs]
    in_workers = list(parse_many(jobs))
    assert [p.status for p in plain] == ["OK"] * len(jobs)
    assert sum(len(p.images) for p in plain) > 0
    assert in_workers == plain  # texts, blocks, offsets, image ids and paths, record for record
    assert list(parse_many(jobs, workers=2)) == plain  # several at once: still in input order
