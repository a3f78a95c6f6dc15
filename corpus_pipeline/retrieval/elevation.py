"""Elevation of child hits to their parent blocks, and the evidence budgets (seed 003 §6).

    fused children ──group by parent_id──> one result per parent
        score = best child score × (1 + extra_hit_boost × min(extra hits, max_extra_hits)
                                      + multi_channel_boost × multi-channel weight)
        best final_top_k by score ──budgets──> evidence

The multi-channel weight is the share of the *other* channels that also found a child of
the parent: with two channels, 1 when the parent's hits came through both, else 0.

Every result is one parent (the prompt-level de-duplication key of the seed,
``"PARENT:" + parent_id``). What each parent's evidence holds, and the budgets:
``retrieval.evidence``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

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
    #: how well it matches, 0 to 1, from its channels' own scores (``retrieval.relevance``)
    relevance: float = 0.0
    #: its document's id ("" when unknown: its parent is then looked for in every file)
    doc_id: str = ""

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
class Passage:
    """A child of a returned parent as a place for its window: its span of the canonical
    text and how well it matches the query, as fused from its ranks (``retrieval.passages``)."""

    start: int
    end: int
    score: float


@dataclass(frozen=True)
class ParentResult:
    """One result: a parent block's evidence and the child hits that brought it in.

    ``start_offset``/``end_offset`` is the span of the canonical text that ``text`` covers
    (a window of the parent when a budget cut it: ``truncated``; when the cut kept several
    windows around matched children, ``spans`` lists them and this is their extent).
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
    evidence: str = ""  # ``text`` and the matched-children snippets: what the caller gets
    images: int = 0  # images whose description stands in ``text`` in place of their reference
    sub_question: int = 0  # which sub-question found it (0: the question itself)
    rerank_score: float | None = None  # the reranker's score, when one re-ordered the results
    #: the spans of the canonical text the evidence holds, in order (one unless a budget cut
    #: the parent to separate windows around its matched children); empty: the whole span
    spans: tuple[tuple[int, int], ...] = ()
    #: the parent's children but its best hit, most similar to the query first: where its
    #: window goes when a budget cuts it (``retrieval.passages``)
    passages: tuple[Passage, ...] = ()
    #: the title of the document (``DocumentText.title``); "" when its snapshot has none
    doc_title: str = ""

    @property
    def returned_spans(self) -> tuple[tuple[int, int], ...]:
        return self.spans or ((self.start_offset, self.end_offset),)

    @property
    def channels(self) -> list[str]:
        return [c for c in CHANNELS if any(c in h.channels for h in self.hits)]

    @property
    def relevance(self) -> float:
        """The best relevance of the child hits that brought this parent in."""
        return max((h.relevance for h in self.hits), default=0.0)


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
