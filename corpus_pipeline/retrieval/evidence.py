"""Evidence: what search hands the caller (an LLM prompt) for each parent, within budgets.

For each parent block (seed 003 §6):

    evidence = parent text, with each image's description (or OCR text) in place of its
               bare reference (``![label](pump.png)`` carries no answer; its description does)
             + "\\n\\n命中子片段:\\n" + "child#N：<first 140 chars of the child>"   (Chinese text)
             + "\\n\\nMatched child passages:\\n" + "child#N: <...>"              (other text)

Budgets, in characters of evidence (snippets and image text included, so what the caller
receives is what is counted): at most ``parent_evidence_max_chars`` per parent, at most
``per_subquestion_evidence_max_chars`` per sub-question when the question was split into
several, at most ``total_evidence_max_chars`` in all. The seed filled the budgets greedily
(the first two parents took 2200 each and the fifth never fit); here every parent first gets
its least: its best matched child and one snippet line (when even that does not fit, the
lowest-ranked parents are dropped, ``dropped_by_budget``, rather than cut to a window that
misses what matched), so all ``final_top_k`` parents reach the caller. What is left goes, by
``search.evidence_fill``:

    passages  (default) to the returned parents' best passages (``retrieval.passages``: their
              children ranked by the query vector and the keyword channel among them), the
              best first whichever parent holds it, each with ``PASSAGE_MARGIN`` of context
    rank      to the best-ranked parent first (the default before passages)
    equal     evenly, a short parent's unused share going to the others (water filling)

A parent too long for its share is cut to windows around its best hit and then its passages
(or its other hits), joined by "…" when they are too far apart for one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from corpus_pipeline.language import image_label, is_chinese
from corpus_pipeline.retrieval.elevation import ChildHit, ParentResult
from corpus_pipeline.retrieval.settings import SearchSettings

#: No parent's evidence is cut below this many characters (or its best matched child).
MIN_PARENT_CHARS = 200
#: Characters of context a passage brings with it in ``passage_fill`` (the window widens
#: around it): an answer that runs over a child's edge is kept whole. 150 on COVID-QA: the
#: same hit rate, and 0.6 points of parent recall more than passages cut at their edges.
PASSAGE_MARGIN = 150

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_SPACE = re.compile(r"\s")


@dataclass(frozen=True)
class ImageText:
    """An image of a document: the span of its reference in the canonical text (empty for
    formats that keep no markup, e.g. PDF) and the text that stands in for it."""

    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Evidence:
    """The final results and what the budgets did."""

    results: tuple[ParentResult, ...]
    chars: int = 0
    dropped_by_budget: tuple[str, ...] = field(default_factory=tuple)


def image_marker(text: str, chinese: bool | None = None) -> str:
    """An image's text as it stands in evidence: marked as an image (seed 000's form) in the
    language of the document it is in (``chinese``; None: of the text itself)."""
    return image_label(text, chinese=chinese)


def snippet_block(hits: Sequence[ChildHit], settings: SearchSettings, chinese: bool, limit: int | None = None) -> str:
    """The seed's list of matched children: ``child#N：<first chars>`` (at most ``limit``
    lines; "" for none)."""
    shown = list(hits[: settings.max_hit_snippets])[: limit if limit is not None else None]
    if not shown or settings.hit_preview_chars == 0:
        return ""
    head, sep = ("命中子片段:", "：") if chinese else ("Matched child passages:", ": ")
    lines = [f"child#{i}{sep}{' '.join(h.preview(settings.hit_preview_chars).split())}" for i, h in enumerate(shown, 1)]
    return "\n\n" + head + "\n" + "\n".join(lines)


def _images_in(result: ParentResult, images: Sequence[ImageText], chinese: bool) -> list[tuple[int, int, str]]:
    """The images inside ``result``'s text, as (start, end, text) in text positions, labelled
    in the text's language (``chinese``)."""
    base = result.start_offset - result.overlap_chars
    n = len(result.text)
    out = []
    for img in images:
        s, e = img.start - base, img.end - base
        if 0 <= s <= n and s <= e and (s < n or e == s):
            out.append((s, min(e, n), image_marker(img.text, chinese)))
    return sorted(out)


def render(text: str, images: Sequence[tuple[int, int, str]], a: int, b: int) -> tuple[str, int, int]:
    """``text[a:b]`` with every image inside replaced by its text; a window edge inside an
    image's reference moves out to take the whole reference. Returns (text, a, b)."""
    for s, e, _ in images:
        if s < a < e:
            a = s
        if s < b < e:
            b = e
    parts, pos = [], a
    for s, e, alt in images:
        if s < a or s > b or (s == b and e > s):
            continue
        parts.append(text[pos:s])
        parts.append(("\n" if s > 0 and text[s - 1] != "\n" else "") + alt + ("\n" if e < len(text) else ""))
        pos = max(pos, e)
    parts.append(text[pos:b])
    return "".join(parts), a, b


def evidence_window(text_len: int, hit_spans: Sequence[tuple[int, int]], max_chars: int) -> tuple[int, int]:
    """The ``[start, end)`` of a text of ``text_len`` chars to keep within ``max_chars``.

    ``hit_spans`` are positions in the text, best hit first. The window covers all hits
    when they fit, centred on them; otherwise it is centred on the best hit.
    """
    if text_len <= max_chars:
        return 0, text_len
    spans = [(max(0, s), min(text_len, e)) for s, e in hit_spans if e > s]
    if not spans:
        return 0, max_chars
    lo, hi = min(s for s, _ in spans), max(e for _, e in spans)
    if hi - lo > max_chars:
        lo, hi = spans[0]
    start = lo - max(0, max_chars - (hi - lo)) // 2
    start = max(0, min(start, text_len - max_chars))
    return start, start + max_chars


#: What joins two windows of one parent in its evidence.
GAP = "\n…\n"


def _segments(text_len: int, hit_spans: Sequence[tuple[int, int]], room: int) -> list[tuple[int, int]]:
    """Windows of a text of ``text_len`` chars within ``room`` chars (``GAP``s included).

    One window when all the hits fit in one (``evidence_window``); otherwise the hits are
    taken best first, each whole, while they fit, and what is left of ``room`` widens every
    window evenly on both sides (windows that meet are merged). A parent whose answer is in
    its second or third matched child keeps that child instead of losing it to a window
    centred on the first.
    """
    spans = [(max(0, s), min(text_len, e)) for s, e in hit_spans if min(text_len, e) > max(0, s)]
    if not spans or max(e for _, e in spans) - min(s for s, _ in spans) <= room:
        return [evidence_window(text_len, spans, room)]
    chosen: list[tuple[int, int]] = []
    for span in spans:
        trial = _merge([*chosen, span])
        if _cost(trial) <= room:
            chosen = trial
    if not chosen:
        return [evidence_window(text_len, spans[:1], room)]
    for _ in range(16):  # widen evenly until the room is used (each pass at least halves what is left)
        left = room - _cost(chosen)
        pad = left // (2 * len(chosen))
        if pad <= 0:
            break
        chosen = _merge([(max(0, a - pad), min(text_len, b + pad)) for a, b in chosen])
        if all(a == 0 for a, _ in chosen[:1]) and all(b == text_len for _, b in chosen[-1:]) and len(chosen) == 1:
            break
    while _cost(chosen) > room:  # rounding after a merge: trim the last window
        a, b = chosen[-1]
        chosen[-1] = (a, b - (_cost(chosen) - room))
    return chosen


def _merge(spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1] + len(GAP):
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _cost(spans: Sequence[tuple[int, int]]) -> int:
    return sum(b - a for a, b in spans) + len(GAP) * max(0, len(spans) - 1)


def window_order(result: ParentResult, fill: str) -> list[tuple[int, int]]:
    """The spans (of the canonical text) a cut parent's window takes, first first: its hits
    in fused order, then its passages; with ``fill`` "passages", its best hit, then its
    passages (its other hits among them) by score, the order ``passage_fill`` spent the
    budget in, then any hit no passage ranked (passages not computed)."""
    hits = [(h.start_offset, h.end_offset) for h in result.hits]
    passages = [(p.start, p.end) for p in result.passages]
    if fill != "passages":
        return hits + passages
    return hits[:1] + passages + [h for h in hits[1:] if h not in passages]  # hits no passage ranked


def fit(result: ParentResult, images: Sequence[ImageText], budget: int, settings: SearchSettings) -> ParentResult:
    """``result`` as evidence of at most ``budget`` characters: its text (images in place),
    cut to windows around its hits when too long, then the matched-children snippets."""
    chinese = is_chinese(result.text)
    inside = _images_in(result, images, chinese)
    body, _, _ = render(result.text, inside, 0, len(result.text))
    snippets = snippet_block(result.hits, settings, chinese)
    if len(body) + len(snippets) <= budget:
        return replace(result, text=body, evidence=body + snippets, images=len(inside))
    lines = min(len(result.hits), settings.max_hit_snippets)
    need = _best_hit_chars(result)
    while snippets and budget - len(snippets) < need:  # the best child's window comes first
        lines -= 1
        snippets = snippet_block(result.hits, settings, chinese, lines) if lines > 0 else ""
    room = budget - len(snippets)
    base = result.start_offset - result.overlap_chars
    spans = window_order(result, settings.evidence_fill)
    spans = [(a - base, b - base) for a, b in spans]
    width = room
    for _ in range(8):
        windows = _segments(len(result.text), spans, max(0, width))
        rendered = [render(result.text, inside, a, b) for a, b in windows]
        body = GAP.join(t for t, _, _ in rendered)
        if len(body) <= room:
            break
        width -= len(body) - room
    body = body[:room]
    kept = [
        (min(max(result.start_offset, base + a), result.end_offset), min(result.end_offset, base + b))
        for _, a, b in rendered
    ]
    kept = [(a, max(a, b)) for a, b in kept]
    first = rendered[0][1]
    shown = sum(1 for s, _, _ in inside if any(a <= s <= b for _, a, b in rendered))
    return replace(
        result,
        text=body,
        evidence=body + snippets,
        start_offset=kept[0][0],
        end_offset=kept[-1][1],
        spans=tuple(kept) if len(kept) > 1 else (),
        truncated=True,
        overlap_chars=max(0, result.overlap_chars - first),
        images=shown,
    )


def water_fill(demands: Sequence[int], total: int) -> list[int]:
    """Shares of ``total`` for ``demands``: each gets ``min(demand, level)``, the level as
    high as ``total`` allows (earlier entries get the rounding remainder)."""
    n = len(demands)
    out = [0] * n
    left, open_ = total, [i for i in range(n) if demands[i] > 0]
    while open_ and left > 0:
        share = left // len(open_)
        if share == 0:
            for i in open_[:left]:
                out[i] += 1
            break
        still = []
        for i in open_:
            give = min(share, demands[i] - out[i])
            out[i] += give
            left -= give
            if out[i] < demands[i]:
                still.append(i)
        if len(still) == len(open_):  # nobody was satisfied: the level is reached
            for i in still[:left]:
                out[i] += 1
            break
        open_ = still
    return out


def _best_hit_chars(result: ParentResult) -> int:
    """Characters the best matched child needs in a window (its span, or its text if longer)."""
    if not result.hits:
        return 0
    h = result.hits[0]
    return max(h.end_offset - h.start_offset, len(h.text))


def _needs(result: ParentResult, images: Sequence[ImageText], settings: SearchSettings) -> tuple[int, int]:
    """(what the whole evidence would take, capped at the parent budget; the least it may be
    given: its best matched child and one snippet line, or all of it when shorter)."""
    chinese = is_chinese(result.text)
    inside = _images_in(result, images, chinese)
    body, _, _ = render(result.text, inside, 0, len(result.text))
    full = min(settings.parent_evidence_max_chars, len(body) + len(snippet_block(result.hits, settings, chinese)))
    least = max(MIN_PARENT_CHARS, _best_hit_chars(result) + len(snippet_block(result.hits, settings, chinese, 1)))
    return full, min(full, least)


def greedy_fill(demands: Sequence[int], total: int) -> list[int]:
    """Shares of ``total`` for ``demands`` in order: each takes all it asks while any is left."""
    out = []
    for d in demands:
        give = max(0, min(d, total))
        out.append(give)
        total -= give
    return out


def _shares(
    needs: list[tuple[int, int]],
    groups: list[int],
    group_cap: int | None,
    total: int,
    fill: str = "equal",
    *,
    least_only: bool = False,
) -> list[int] | int:
    """Each result's share: its least, plus a share of what is left (``fill``: "equal", water
    filling; "rank", best-ranked first), within the group caps and the total. When the leasts
    do not fit, the index of the result to drop (the lowest-ranked of the group, or of all,
    that overflows)."""
    names = list(dict.fromkeys(groups))
    members = {g: [i for i, x in enumerate(groups) if x == g] for g in names}
    cap = group_cap if group_cap is not None else total
    for g in names:
        if sum(needs[i][1] for i in members[g]) > cap:
            return members[g][-1]
    if sum(least for _, least in needs) > total:
        return len(needs) - 1
    if least_only:
        return [least for _, least in needs]
    extra_demand = [
        min(cap, sum(needs[i][0] for i in members[g])) - sum(needs[i][1] for i in members[g]) for g in names
    ]
    share = greedy_fill if fill == "rank" else water_fill
    group_extra = share(extra_demand, total - sum(least for _, least in needs))
    out = [least for _, least in needs]
    for g, extra in zip(names, group_extra, strict=True):
        for i, more in zip(members[g], share([needs[i][0] - needs[i][1] for i in members[g]], extra), strict=True):
            out[i] += more
    return out


def passage_fill(
    results: Sequence[ParentResult], needs: Sequence[tuple[int, int]], least: Sequence[int], total: int
) -> list[int]:
    """Shares of ``total`` when the budget follows the passages: each parent has its least
    (its best hit); what is left goes to the kept parents' passages, the best first whichever
    parent holds them, each whole with ``PASSAGE_MARGIN`` of context while it fits its
    parent's cap (its full need) and the total; what is still left, best-ranked parent first."""
    shares = list(least)
    left = total - sum(shares)
    units = sorted(
        ((-p.score, i, p.end - p.start) for i, r in enumerate(results) for p in r.passages), key=lambda u: u[:2]
    )
    for _, i, width in units:
        cost = width + len(GAP) + PASSAGE_MARGIN
        if cost <= left and shares[i] + cost <= needs[i][0]:
            shares[i] += cost
            left -= cost
    for i, more in enumerate(greedy_fill([full - s for (full, _), s in zip(needs, shares, strict=True)], left)):
        shares[i] += more
    return shares


def apply_budgets(
    results: Sequence[ParentResult],
    settings: SearchSettings,
    images: Mapping[str, Sequence[ImageText]] | None = None,
) -> Evidence:
    """Evidence of ``results`` (best first) within the budgets; ``images`` by document path.

    Every kept parent gets at least its best matched child and one snippet line (a window
    that cannot hold the child that matched is no evidence); what is left is shared evenly.
    When even that does not fit, the lowest-ranked parents are dropped. Results carry their
    sub-question (``ParentResult.sub_question``); with more than one, each sub-question's
    parents share at most ``per_subquestion_evidence_max_chars``.
    """
    images = images or {}
    kept = list(results)
    dropped: list[str] = []
    multi = len({r.sub_question for r in kept}) > 1
    group_cap = settings.per_subquestion_evidence_max_chars if multi else None
    needs = [_needs(r, images.get(r.doc_path, ()), settings) for r in kept]
    fill = settings.evidence_fill
    by_passage = fill == "passages" and not multi
    if fill == "passages" and multi:  # sub-questions share their caps best-ranked first
        settings = settings.with_(evidence_fill="rank")
    while True:
        shares = _shares(
            needs,
            [r.sub_question for r in kept],
            group_cap,
            settings.total_evidence_max_chars,
            "rank" if fill == "passages" else fill,
            least_only=by_passage,
        )
        if isinstance(shares, list):
            break
        dropped.append(kept.pop(shares).parent_id)
        needs.pop(shares)
    if by_passage:
        shares = passage_fill(kept, needs, shares, settings.total_evidence_max_chars)
    fitted = [fit(r, images.get(r.doc_path, ()), share, settings) for r, share in zip(kept, shares, strict=True)]
    return Evidence(tuple(fitted), sum(len(r.evidence) for r in fitted), tuple(reversed(dropped)))


def format_evidence(results: Sequence[ParentResult]) -> str:
    """The prompt form: each parent's evidence under a numbered source line."""
    parts = []
    for n, r in enumerate(results, 1):
        where = r.doc_path + (f" — {r.section_path}" if r.section_path else "")
        parts.append(f"[{n}] {where}\n{r.evidence or r.text}")
    return "\n\n".join(parts)
