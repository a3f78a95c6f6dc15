"""Elevation of child hits to their parent blocks, and the evidence budgets (seed 003 §6).

    fused children ──group by parent_id──> one result per parent
        score = best child score × (1 + extra_hit_boost × min(extra hits, max_extra_hits)
                                      + multi_channel_boost × multi-channel weight)
        best final_top_k by score ──budgets──> evidence

The multi-channel weight is the share of the *other* channels that also found a child of
the parent: with two channels, 1 when the parent's hits came through both, else 0.

Budgets: each parent's evidence text is at most ``parent_evidence_max_chars``; all of
them together at most ``total_evidence_max_chars``. A parent too long for what is left is
cut to a window around its hits (so the matched text stays in); once the total budget is
spent the remaining parents are dropped. Every result is one parent (the prompt-level
de-duplication key of the seed, ``"PARENT:" + parent_id``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from corpus_pipeline.retrieval.fusion import CHANNELS, ChannelScore
from corpus_pipeline.retrieval.settings import SearchSettings


@dataclass(frozen=True)
class ChildHit:
    """A fused child chunk with where it comes from (offsets into the canonical text)."""

    chunk_id: str
    parent_id: str
    score: float
    channels: Mapping[str, ChannelScore]
    text: str
    doc_path: str
    section_path: str
    start_offset: int
    end_offset: int
    chunk_type: str = "TEXT"

    def preview(self, chars: int) -> str:
        return self.text[:chars]


@dataclass(frozen=True)
class Parent:
    """A parent block as search needs it. ``text`` may start with ``overlap_chars`` of
    context taken from before ``start_offset`` (``text[overlap_chars:]`` is the span)."""

    parent_id: str
    text: str
    doc_path: str
    section_path: str
    start_offset: int
    end_offset: int
    overlap_chars: int = 0


@dataclass(frozen=True)
class ParentResult:
    """One result: a parent block's evidence and the child hits that brought it in.

    ``start_offset``/``end_offset`` is the span of the canonical text that ``text`` covers
    (a window of the parent when a budget cut it: ``truncated``).
    """

    parent_id: str
    score: float
    best_child_score: float
    boost: float
    text: str
    doc_path: str
    section_path: str
    start_offset: int
    end_offset: int
    hits: tuple[ChildHit, ...]
    truncated: bool = False
    parent_found: bool = True
    overlap_chars: int = 0  # leading context chars of ``text`` from before start_offset

    @property
    def channels(self) -> list[str]:
        return [c for c in CHANNELS if any(c in h.channels for h in self.hits)]


@dataclass(frozen=True)
class Evidence:
    """The final results and what the budgets did."""

    results: tuple[ParentResult, ...]
    chars: int = 0
    dropped_by_budget: tuple[str, ...] = field(default_factory=tuple)


def parent_boost(
    extra_hits: int, channels_hit: int, settings: SearchSettings, n_channels: int = len(CHANNELS)
) -> float:
    """The multiplier's increment: ``0.12 × min(extra, 3) + 0.10 × weight`` by default."""
    weight = (channels_hit - 1) / (n_channels - 1) if n_channels > 1 and channels_hit > 1 else 0.0
    return (
        settings.extra_hit_boost * min(max(extra_hits, 0), settings.max_extra_hits)
        + settings.multi_channel_boost * weight
    )


def _fallback_parent(child: ChildHit) -> Parent:
    # A child whose parent row is missing (an index older than its parents, a dropped
    # partition) is its own evidence rather than a silent loss.
    return Parent(child.parent_id, child.text, child.doc_path, child.section_path, child.start_offset, child.end_offset)


def elevate(
    children: Sequence[ChildHit], parents: Mapping[str, Parent], settings: SearchSettings
) -> list[ParentResult]:
    """Group fused children by parent, score each parent, keep the best ``final_top_k``.

    ``children`` are best first. Ties between parents are broken by their best child's
    position in ``children``.
    """
    groups: dict[str, list[ChildHit]] = {}
    for child in children:
        groups.setdefault(child.parent_id, []).append(child)
    first_seen = {pid: i for i, pid in enumerate(groups)}
    results = []
    for pid, hits in groups.items():
        hits = sorted(hits, key=lambda h: -h.score)
        best = hits[0].score
        channels_hit = sum(1 for c in CHANNELS if any(c in h.channels for h in hits))
        boost = parent_boost(len(hits) - 1, channels_hit, settings)
        parent = parents.get(pid)
        found = parent is not None
        parent = parent or _fallback_parent(hits[0])
        results.append(
            ParentResult(
                parent_id=pid,
                score=best * (1.0 + boost),
                best_child_score=best,
                boost=boost,
                text=parent.text,
                doc_path=parent.doc_path,
                section_path=parent.section_path,
                start_offset=parent.start_offset,
                end_offset=parent.end_offset,
                hits=tuple(hits),
                parent_found=found,
                overlap_chars=parent.overlap_chars,
            )
        )
    results.sort(key=lambda r: (-r.score, first_seen[r.parent_id]))
    return results[: settings.final_top_k]


def evidence_window(text_len: int, hit_spans: Iterable[tuple[int, int]], max_chars: int) -> tuple[int, int]:
    """The ``[start, end)`` of a text of ``text_len`` chars to keep within ``max_chars``.

    ``hit_spans`` are positions in the text, best hit first. The window covers all hits
    when they fit, centred on them; otherwise it starts at the best hit.
    """
    if text_len <= max_chars:
        return 0, text_len
    spans = [(max(0, s), min(text_len, e)) for s, e in hit_spans if e > s]
    if not spans:
        return 0, max_chars
    lo, hi = min(s for s, _ in spans), max(e for _, e in spans)
    if hi - lo <= max_chars:
        start = lo - (max_chars - (hi - lo)) // 2
    else:
        start = spans[0][0]
    start = max(0, min(start, text_len - max_chars))
    return start, start + max_chars


def _cut(result: ParentResult, max_chars: int) -> ParentResult:
    """``result`` with its text cut to ``max_chars`` around its hits."""
    if len(result.text) <= max_chars:
        return result
    # Canonical offset x sits at text position x - start + overlap.
    base = result.start_offset - result.overlap_chars
    spans = [(h.start_offset - base, h.end_offset - base) for h in result.hits]
    a, b = evidence_window(len(result.text), spans, max_chars)
    start = min(max(result.start_offset, base + a), result.end_offset)
    end = max(start, min(result.end_offset, base + b))
    return replace(
        result,
        text=result.text[a:b],
        start_offset=start,
        end_offset=end,
        truncated=True,
        overlap_chars=max(0, result.overlap_chars - a),
    )


def apply_budgets(results: Sequence[ParentResult], settings: SearchSettings) -> Evidence:
    """Cut each parent to ``parent_evidence_max_chars`` and all to ``total_evidence_max_chars``."""
    kept: list[ParentResult] = []
    dropped: list[str] = []
    used = 0
    for r in results:
        left = settings.total_evidence_max_chars - used
        if left <= 0:
            dropped.append(r.parent_id)
            continue
        cut = _cut(r, min(settings.parent_evidence_max_chars, left))
        kept.append(cut)
        used += len(cut.text)
    return Evidence(tuple(kept), used, tuple(dropped))


def format_evidence(results: Sequence[ParentResult], settings: SearchSettings) -> str:
    """The prompt form of seed 003: each parent's text, then its hit children's first chars."""
    parts = []
    for n, r in enumerate(results, 1):
        lines = [
            f"[{n}] {r.doc_path}" + (f" — {r.section_path}" if r.section_path else ""),
            r.text,
            "",
            "Matched child passages:",
        ]
        lines += [f"child#{i}: {h.preview(settings.hit_preview_chars)}" for i, h in enumerate(r.hits, 1)]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)
