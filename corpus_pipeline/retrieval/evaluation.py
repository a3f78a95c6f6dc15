"""Retrieval evaluation: character-level recall, precision and IoU of the returned spans.

The method of Chroma's chunking evaluation: a question's *references* are exact character
spans of the documents' canonical texts; what search returns is also a set of spans; the
scores compare the two as sets of characters, per document:

    recall    = |returned ∩ reference| / |reference|
    precision = |returned ∩ reference| / |returned|
    IoU       = |returned ∩ reference| / |returned ∪ reference|

Overlapping returned spans count their shared characters once (Chroma sums chunk
lengths in the precision denominator, counting overlap twice; the set form makes
strategies with and without overlap comparable). Two span sets are scored per question:

    child    the child chunks search matched, as listed under the returned parents
    parent   the evidence search returns: each parent block (or its budgeted window)

plus ``hit_rate`` (a returned parent touches a reference) and ``mrr`` (1 / rank of the
first such parent). Means are over the questions.

``questions.jsonl``, one JSON object a line::

    {"id": "en-07", "question": "Which port does the agent data channel use?",
     "references": [{"doc_path": "01-installation.md", "start": 2312, "end": 2382,
                     "text": "`7410/tcp` – agent data channel ..."}]}

``text`` is optional; when present it is checked against the canonical text, and a
reference whose offsets drifted (the parser changed) is re-anchored where that text
occurs exactly once, with a warning; otherwise the reference is reported and skipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import fmean
from typing import TYPE_CHECKING, Any

from corpus_pipeline.errors import ConfigError, StoreError
from corpus_pipeline.retrieval.search import Searcher, SearchResult
from corpus_pipeline.retrieval.settings import SearchSettings
from corpus_pipeline.store.files import put_text
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.reader import SnapshotReader
from corpus_pipeline.store.snapshots import Snapshot, resolve

if TYPE_CHECKING:
    from corpus_pipeline.kbconfig import KnowledgeBase

# --------------------------------------------------------------------------- spans


@dataclass(frozen=True)
class Span:
    """``[start, end)`` of the canonical text of ``doc_path``."""

    doc_path: str
    start: int
    end: int


@dataclass(frozen=True)
class Reference(Span):
    text: str | None = None


def merge_spans(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, non-overlapping union of half-open intervals (empty ones dropped)."""
    out: list[tuple[int, int]] = []
    for s, e in sorted((s, e) for s, e in spans if e > s):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def _length(merged: Sequence[tuple[int, int]]) -> int:
    return sum(e - s for s, e in merged)


def _intersection(a: Sequence[tuple[int, int]], b: Sequence[tuple[int, int]]) -> int:
    """Characters in both of two merged interval lists."""
    i = j = total = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


@dataclass(frozen=True)
class SpanScores:
    recall: float
    precision: float
    iou: float
    returned_chars: int
    reference_chars: int
    overlap_chars: int


def span_scores(returned: Iterable[Span], references: Iterable[Span]) -> SpanScores:
    """Character-level recall, precision and IoU of ``returned`` against ``references``."""
    by_doc_ret: dict[str, list[tuple[int, int]]] = {}
    by_doc_ref: dict[str, list[tuple[int, int]]] = {}
    for s in returned:
        by_doc_ret.setdefault(s.doc_path, []).append((s.start, s.end))
    for s in references:
        by_doc_ref.setdefault(s.doc_path, []).append((s.start, s.end))
    ret = ref = inter = 0
    for doc in set(by_doc_ret) | set(by_doc_ref):
        a, b = merge_spans(by_doc_ret.get(doc, [])), merge_spans(by_doc_ref.get(doc, []))
        ret += _length(a)
        ref += _length(b)
        inter += _intersection(a, b)
    union = ret + ref - inter
    return SpanScores(
        recall=inter / ref if ref else 0.0,
        precision=inter / ret if ret else 0.0,
        iou=inter / union if union else 0.0,
        returned_chars=ret,
        reference_chars=ref,
        overlap_chars=inter,
    )


# --------------------------------------------------------------------------- questions


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    references: tuple[Reference, ...]


def load_questions(path: Path) -> list[Question]:
    """Read a questions JSONL file; errors name the file, line and key."""
    if not path.exists():
        raise ConfigError(
            f"questions file {path} does not exist; write one JSON object per line (see `corpus eval --help`)."
        )
    out: list[Question] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{path}:{n}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{where}: not valid JSON: {exc}") from exc
        if not isinstance(row, dict) or not isinstance(row.get("question"), str):
            raise ConfigError(f"{where}: needs a string 'question'.")
        refs = row.get("references")
        if not isinstance(refs, list) or not refs:
            raise ConfigError(f"{where}: needs 'references': a non-empty list of {{doc_path, start, end}}.")
        parsed = []
        for i, r in enumerate(refs):
            ok = (
                isinstance(r, dict)
                and isinstance(r.get("doc_path"), str)
                and all(isinstance(r.get(k), int) and not isinstance(r.get(k), bool) for k in ("start", "end"))
            )
            if not ok or not 0 <= r["start"] < r["end"]:
                raise ConfigError(
                    f"{where}: references[{i}] = {r!r}: needs doc_path (string) and 0 <= start < end (integers)."
                )
            parsed.append(Reference(r["doc_path"], r["start"], r["end"], r.get("text")))
        out.append(Question(str(row.get("id") or f"q{n}"), row["question"], tuple(parsed)))
    if not out:
        raise ConfigError(f"{path}: no questions in it.")
    return out


def load_canonical_texts(layout: Layout, kb: str, version: str | None = None) -> dict[str, str]:
    """Each parsed document's canonical text by its path in the KB, as the published snapshot
    of ``version`` (default: the active one) holds it."""
    from corpus_pipeline.store.snapshots import read_published
    from corpus_pipeline.store.versions import active_version

    v = version or active_version(layout, kb)
    if v is None:
        raise StoreError(f"knowledge base {kb!r} has no active version yet; run `corpus index --kb {kb}` first.")
    return read_published(layout, kb, v, canonical_texts)


def canonical_texts(snapshot: Snapshot) -> dict[str, str]:
    """Each parsed document's canonical text by its path, as ``snapshot`` holds it."""
    texts = SnapshotReader(snapshot).texts_by_path()
    if texts is None:
        raise StoreError(
            f"no parsed texts for kb={snapshot.kb!r} at {snapshot.version!r}; run `corpus index --kb {snapshot.kb}`."
        )
    return texts


def anchor_references(questions: Sequence[Question], texts: Mapping[str, str]) -> tuple[list[Question], list[str]]:
    """Check every reference against the canonical texts; re-anchor drifted ones.

    Returns the questions with usable references only (questions left with none, and empty
    questions, are dropped) and one message per reference or question moved or skipped.
    """
    kept: list[Question] = []
    notes: list[str] = []
    for q in questions:
        if not q.question.strip():  # public sets have a few (CMRC 2018 trial: cmrc-0747)
            notes.append(f"{q.id}: the question is empty; skipped")
            continue
        refs = []
        for r in q.references:
            doc = texts.get(r.doc_path)
            if doc is None:
                notes.append(f"{q.id}: {r.doc_path} is not a parsed document of this KB; reference skipped")
                continue
            if r.text is None or doc[r.start : r.end] == r.text:
                if r.end > len(doc):
                    notes.append(
                        f"{q.id}: {r.doc_path} [{r.start}:{r.end}] is past the end ({len(doc)} chars); skipped"
                    )
                    continue
                refs.append(r)
                continue
            at = doc.find(r.text)
            if at >= 0 and doc.find(r.text, at + 1) < 0:
                notes.append(
                    f"{q.id}: {r.doc_path} [{r.start}:{r.end}] drifted; re-anchored at [{at}:{at + len(r.text)}]"
                )
                refs.append(Reference(r.doc_path, at, at + len(r.text), r.text))
            else:
                where = "not found" if at < 0 else "found more than once"
                notes.append(
                    f"{q.id}: {r.doc_path} [{r.start}:{r.end}] does not hold its text, which is {where}; skipped"
                )
        if refs:
            kept.append(Question(q.id, q.question, tuple(refs)))
        else:
            notes.append(f"{q.id}: no usable reference; question skipped")
    return kept, notes


# --------------------------------------------------------------------------- evaluation


def _first_relevant_rank(result: SearchResult, references: Sequence[Span]) -> int | None:
    for rank, r in enumerate(result.results, 1):
        if span_scores([Span(r.doc_path, a, b) for a, b in r.returned_spans], references).overlap_chars:
            return rank
    return None


@dataclass(frozen=True)
class QuestionScores:
    id: str
    question: str
    child: SpanScores
    parent: SpanScores
    first_relevant_rank: int | None
    returned: tuple[Span, ...]
    ms: float = 0.0  # the search's wall time


@dataclass
class EvalReport:
    kb: str
    strategy_version: str
    settings: dict[str, Any]
    questions: list[QuestionScores] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> dict[str, float | int]:
        qs = self.questions
        if not qs:
            return {"questions": 0}

        def mean(xs: Iterable[float]) -> float:
            return round(fmean(xs), 4)

        return {
            "questions": len(qs),
            "child_recall": mean(q.child.recall for q in qs),
            "child_precision": mean(q.child.precision for q in qs),
            "child_iou": mean(q.child.iou for q in qs),
            "parent_recall": mean(q.parent.recall for q in qs),
            "parent_precision": mean(q.parent.precision for q in qs),
            "parent_iou": mean(q.parent.iou for q in qs),
            "hit_rate": mean(1.0 if q.first_relevant_rank else 0.0 for q in qs),
            "mrr": mean(1.0 / q.first_relevant_rank if q.first_relevant_rank else 0.0 for q in qs),
            "mean_returned_chars": round(fmean(q.parent.returned_chars for q in qs), 1),
            "query_p50_ms": round(_quantile([q.ms for q in qs], 0.5), 1),
            "query_p95_ms": round(_quantile([q.ms for q in qs], 0.95), 1),
        }

    def to_dict(self, details: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kb": self.kb,
            "strategy_version": self.strategy_version,
            "summary": self.summary(),
            "notes": self.notes,
            "seconds": round(self.seconds, 2),
        }
        if details:
            out["questions"] = [
                {
                    "id": q.id,
                    "question": q.question,
                    "child": _rounded(asdict(q.child)),
                    "parent": _rounded(asdict(q.parent)),
                    "first_relevant_rank": q.first_relevant_rank,
                    "returned": [asdict(s) for s in q.returned],
                    "ms": round(q.ms, 1),
                }
                for q in self.questions
            ]
        return out


def _quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (nearest rank) of ``values``; 0 when empty."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))] if ordered else 0.0


def _rounded(d: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in d.items()}


def evaluate(searcher: Searcher, questions: Sequence[Question], *, notes: Sequence[str] = ()) -> EvalReport:
    """Search every question and score the returned child and parent spans."""
    import time

    t0 = time.perf_counter()
    report = EvalReport(searcher.kb, searcher.version, searcher.settings.to_dict(), notes=list(notes))
    if questions:  # load the model and warm the tables: the timings are of warm queries
        searcher.search(questions[0].question)
    for q in questions:
        t = time.perf_counter()
        res = searcher.search(q.question)
        ms = (time.perf_counter() - t) * 1e3
        parents = [Span(r.doc_path, a, b) for r in res.results for a, b in r.returned_spans]
        children = [Span(h.doc_path, h.start_offset, h.end_offset) for r in res.results for h in r.hits]
        report.questions.append(
            QuestionScores(
                q.id,
                q.question,
                span_scores(children, q.references),
                span_scores(parents, q.references),
                _first_relevant_rank(res, q.references),
                tuple(parents),
                ms,
            )
        )
    report.seconds = time.perf_counter() - t0
    return report


def evaluate_version(
    layout: Layout,
    kb: KnowledgeBase,
    version: str,
    questions_file: Path,
    *,
    settings: SearchSettings | None = None,
    texts: Mapping[str, str] | None = None,
) -> EvalReport:
    """Evaluate the KB's search, as configured (``Searcher.open``: its embedding model,
    ``search:`` or ``settings``, rerank, sub-questions), over ``version`` on a questions
    file: what ``corpus eval`` and the ``retrieval_eval`` asset run."""
    snapshot = resolve(layout, kb.name, version)
    questions, notes = anchor_references(load_questions(questions_file), texts or canonical_texts(snapshot))
    searcher = Searcher.open(layout, kb, version, settings=settings, snapshot=snapshot)
    try:
        return evaluate(searcher, questions, notes=notes)
    finally:
        searcher.close()


def compare(a: EvalReport, b: EvalReport) -> dict[str, float]:
    """``b - a`` for every summary number both have."""
    sa, sb = a.summary(), b.summary()
    return {k: round(float(sb[k]) - float(sa[k]), 4) for k in sa if k in sb and k != "questions"}


def evaluate_partition(layout: Layout, kb: KnowledgeBase, version: str) -> EvalReport | None:
    """Evaluate (kb, version) on the KB's own ``questions.jsonl`` (None when it has none),
    and keep the report as ``retrieval_eval/kb=<kb>/strategy_version=<v>/report.json``:
    what the ``retrieval_eval`` asset runs."""
    questions = kb.path / "questions.jsonl"
    if not questions.exists():
        return None
    report = evaluate_version(layout, kb, version, questions)
    put_text(layout.eval_report_file(kb.name, version), json.dumps(report.to_dict(), ensure_ascii=False, indent=2))
    return report
