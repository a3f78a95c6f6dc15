"""The plan recommender (seed 003 §5): document features -> a parent/child plan, with reasons.

    rec = recommend(text, "markdown", blocks, token_counter=token_counter_for(model))
    rec.snapshot        'PARENT:STRUCTURE;CHILD:SEMANTIC,RECURSIVE'
    rec.reasons         ['parent STRUCTURE: markdown with 12 headings on 3 levels', ...]
    rec.child_settings  {'RECURSIVE': {'size_unit': 'tokens', 'max_tokens': 240, ...}} or {}

Seed 003's rules, with their thresholds:

- parent: a structured format (PDF, DOCX, Markdown, HTML) whose structure level is at
  least MEDIUM or that has 2+ headings -> STRUCTURE; otherwise RECURSIVE. Added: plain text
  with 3+ headings is structured too, and when a section is longer than the parent size
  (2,200 characters) RECURSIVE follows STRUCTURE as the parent's size guard.
- child: low quality with an LLM enabled -> LLM, RECURSIVE; at least MEDIUM quality with 3+
  paragraphs and at least ``SEMANTIC_MIN_CHARS`` characters -> SEMANTIC, RECURSIVE;
  otherwise RECURSIVE. The seed recommended LLM even with LLM splitting switched off
  (it then silently ran SEMANTIC); here it is recommended only when enabled.
- Added: when 800 characters of this document are more tokens than the embedding model
  reads (Chinese: about one token per character; 254 for the default model), the child
  settings switch RECURSIVE to ``size_unit: tokens`` so chunks are not truncated.

``RECOMMENDER_VERSION`` changes whenever a rule does; it belongs in ``strategy_version``
of KBs whose plan is ``auto``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from corpus_pipeline.chunking import text as tx
from corpus_pipeline.chunking.headings import find_headings
from corpus_pipeline.chunking.plan import build_plan
from corpus_pipeline.chunking.recursive import Recursive
from corpus_pipeline.doc_formats import STRUCTURED
from corpus_pipeline.embedding.tokens import TokenCounter
from corpus_pipeline.models import Block

RECOMMENDER_VERSION = "v1"
STRUCTURED_FORMATS = STRUCTURED  # (the format table's: formats with their own headings)
PARENT_MAX_CHARS = int(Recursive.parent_defaults["max_chars"])  # 2200
CHILD_MAX_CHARS = 800
SEMANTIC_MIN_CHARS = 240
_GARBAGE = re.compile(r"[\ufffd\x00-\x08\x0b\x0c\x0e-\x1f]")
_WORDISH = re.compile(r"[A-Za-z0-9\u3400-\u9fff\uf900-\ufaff\u3040-\u30ff\u00c0-\u024f]")
_ENDERS = re.compile(r"[。！？.!?]")
LEVELS = ("NONE", "LOW", "MEDIUM", "HIGH")


@dataclass(frozen=True)
class Recommendation:
    snapshot: str  # named form: PARENT:STRUCTURE;CHILD:SEMANTIC,RECURSIVE
    snapshot_numeric: str  # seed 003 form where every step has a code: PARENT:1;CHILD:3,2
    reasons: list[str]
    features: dict[str, Any]
    parent_settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    child_settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    version: str = RECOMMENDER_VERSION

    def to_dict(self) -> dict[str, Any]:
        return {
            "plan": self.snapshot,
            "plan_numeric": self.snapshot_numeric,
            "reasons": list(self.reasons),
            "parent_settings": self.parent_settings,
            "child_settings": self.child_settings,
            "features": self.features,
            "recommender_version": self.version,
        }


def _normalize_format(fmt: str | None) -> str:
    f = (fmt or "text").lower().lstrip(".")
    return {"md": "markdown", "mdx": "markdown", "markdown": "markdown", "htm": "html", "txt": "text"}.get(f, f)


def document_features(
    text: str, fmt: str = "text", blocks: Sequence[Block] = (), token_counter: TokenCounter | None = None
) -> dict[str, Any]:
    """What the rules look at: sizes, headings and levels, paragraphs, language, quality."""
    fmt = _normalize_format(fmt)
    n = len(text)
    heads = find_headings(text, 0, n, blocks)
    levels = sorted({h.level for h in heads})
    paras = tx.paragraphs(text)
    starts = [h.start for h in heads] + [n]
    sections = [starts[i + 1] - starts[i] for i in range(len(heads))]
    if heads:
        sections.append(heads[0].start)  # text before the first heading
    non_ws = sum(1 for c in text if not c.isspace()) if n < 2_000_000 else n
    wordish = len(_WORDISH.findall(text))
    garbage = len(_GARBAGE.findall(text))
    line_list = [ln for ln in text.splitlines() if ln.strip()]
    short_lines = sum(1 for ln in line_list if len(ln.strip()) < 12 and not _ENDERS.search(ln))
    enders = len(_ENDERS.findall(text))
    cjk = tx.cjk_ratio(text[:200_000])

    # Quality (seed 003 leaves it to the parser; here from the text): unreadable characters,
    # symbol soup, fragmented lines (OCR / PDF debris), no sentence punctuation in prose.
    problems = []
    unreadable = bool(non_ws and garbage / non_ws > 0.01)
    if unreadable:
        problems.append(f"{garbage} unreadable characters")
    if non_ws and wordish / non_ws < 0.6:
        problems.append(f"only {wordish / non_ws:.0%} of characters are letters, digits or CJK")
    if len(line_list) >= 20 and short_lines / len(line_list) > 0.5:
        problems.append(f"{short_lines} of {len(line_list)} lines are short fragments")
    if non_ws >= 500 and enders / non_ws < 0.002:
        problems.append("almost no sentence punctuation")
    quality = "LOW" if unreadable or len(problems) >= 2 else ("MEDIUM" if problems else "HIGH")

    if not heads:
        structure = "NONE"
    elif len(heads) == 1:
        structure = "LOW"
    elif len(heads) >= 5 and len(levels) >= 2:
        structure = "HIGH"
    else:
        structure = "MEDIUM"

    feats: dict[str, Any] = {
        "format": fmt,
        "chars": n,
        "paragraphs": len(paras),
        "headings": len(heads),
        "heading_levels": len(levels),
        "structure_level": structure,
        "largest_section_chars": max(sections) if sections else n,
        "cjk_ratio": round(cjk, 3),
        "quality": quality,
        "quality_problems": problems,
    }
    if token_counter is not None and n:
        sample = text[:20_000]
        toks = token_counter.count(sample)
        feats["tokens_per_char"] = round(toks / max(1, len(sample)), 3)
        feats["model_max_tokens"] = token_counter.max_tokens
    return feats


def recommend(
    text: str,
    fmt: str = "text",
    blocks: Sequence[Block] = (),
    *,
    token_counter: TokenCounter | None = None,
    llm_enabled: bool = False,
) -> Recommendation:
    """A plan for one document, with the reasons for each choice."""
    f = document_features(text, fmt, blocks, token_counter)
    reasons: list[str] = []
    structured_format = f["format"] in STRUCTURED_FORMATS
    at_least_medium = LEVELS.index(f["structure_level"]) >= LEVELS.index("MEDIUM")
    desc = f"{f['headings']} heading{'s' if f['headings'] != 1 else ''} on {f['heading_levels']} level" + (
        "s" if f["heading_levels"] != 1 else ""
    )

    # Parent pipeline.
    if (structured_format and (at_least_medium or f["headings"] >= 2)) or (
        f["format"] == "text" and f["headings"] >= 3
    ):
        parent = ["STRUCTURE"]
        reasons.append(f"parent STRUCTURE: {f['format']} with {desc} (structure {f['structure_level']})")
        if f["largest_section_chars"] > PARENT_MAX_CHARS:
            parent.append("RECURSIVE")
            reasons.append(
                f"parent + RECURSIVE: the largest section has {f['largest_section_chars']} characters, more "
                f"than a parent block's {PARENT_MAX_CHARS}"
            )
    else:
        parent = ["RECURSIVE"]
        if f["headings"] == 0:
            why = "no headings found"
        elif not structured_format:
            why = f"{f['format']} with only {desc}"
        else:
            why = f"only {desc} (structure {f['structure_level']})"
        reasons.append(f"parent RECURSIVE: {why}")

    # Child pipeline.
    if f["quality"] == "LOW":
        problems = "; ".join(f["quality_problems"])
        if llm_enabled:
            child = ["LLM", "RECURSIVE"]
            reasons.append(f"child LLM, RECURSIVE: low quality text ({problems}); an LLM finds the boundaries")
        else:
            child = ["RECURSIVE"]
            reasons.append(
                f"child RECURSIVE: low quality text ({problems}); LLM splitting would help but is not enabled"
            )
    elif f["paragraphs"] >= 3 and f["chars"] >= SEMANTIC_MIN_CHARS:
        child = ["SEMANTIC", "RECURSIVE"]
        reasons.append(
            f"child SEMANTIC, RECURSIVE: {f['quality'].lower()} quality prose in {f['paragraphs']} paragraphs; "
            "cut at topic shifts, RECURSIVE keeps the size"
        )
    else:
        child = ["RECURSIVE"]
        reasons.append(
            f"child RECURSIVE: {f['paragraphs']} paragraph{'s' if f['paragraphs'] != 1 else ''}, "
            f"{f['chars']} characters: too little for topic segmentation"
        )

    child_settings: dict[str, dict[str, Any]] = {}
    tpc = f.get("tokens_per_char")
    max_tokens = f.get("model_max_tokens")
    if tpc is not None and max_tokens:
        per_chunk = round(CHILD_MAX_CHARS * tpc)
        if per_chunk > max_tokens:
            budget = min(240, max_tokens)
            child_settings["RECURSIVE"] = {"size_unit": "tokens", "max_tokens": budget, "overlap_tokens": budget // 8}
            if "SEMANTIC" in child:
                child_settings["SEMANTIC"] = {"size_unit": "tokens", "max_tokens": budget, "min_tokens": budget // 4}
            reasons.append(
                f"child sizes in tokens: {CHILD_MAX_CHARS} characters of this text are ~{per_chunk} tokens, more "
                f"than the embedding model reads ({max_tokens}); chunks kept to {budget} tokens"
            )
    elif f["cjk_ratio"] > 0.3:
        reasons.append(
            "note: mostly CJK text (about one token per character); consider size_unit: tokens for child "
            "chunks so the embedding model does not truncate them"
        )

    snapshot = f"PARENT:{','.join(parent)};CHILD:{','.join(child)}"
    plan = build_plan(snapshot, {}, child_settings)
    return Recommendation(
        snapshot=plan.snapshot(),
        snapshot_numeric=plan.snapshot(numeric=True),
        reasons=reasons,
        features=f,
        parent_settings={},
        child_settings=child_settings,
    )
