"""A generated knowledge base for the incremental benchmark: deterministic from a seed.

Text is drawn, read in place, from the shared markdown corpus (``/work/shared/corpora/
markdown-5mb``: FastAPI, Vue, Rust book, ... in English and Chinese). Its files are cut
into headings and paragraphs (fenced code blocks kept whole), each block classified as
Chinese or English by its share of CJK characters. Every generated document takes one
language, a format (Markdown or plain text) and a target size of 2–6 KB (UTF-8 bytes),
then a title and sections: a heading followed by a run of consecutive paragraphs of one
source file (so sections read naturally). Paragraphs are used without replacement while
the pool lasts, so documents do not share text and the full index really embeds every
chunk. Plain-text documents write headings the way such files do (``1. Overview``,
``一、概述``), not with ``#``. One Markdown document in ``IMAGE_EVERY`` shows a figure: a small
PNG beside it with a caption and a few lines of text rendered in it (read by OCR when no
vision model is configured), so image description is part of the full index.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path

MIN_BYTES = 2048
MAX_BYTES = 6144
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_ANCHOR = re.compile(r"\s*\{\s*#[^}]*\}\s*$")  # FastAPI's "{ #anchor }" after headings
_CN_NUMS = "一二三四五六七八九十"
IMAGE_EVERY = 40


def _figure(path: Path, number: int, lines: list[str]) -> None:
    """A PNG with a title and a few lines of text (PIL's built-in font: ASCII only)."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=18)
    img = Image.new("RGB", (720, 40 + 28 * (len(lines) + 1)), "white")
    draw = ImageDraw.Draw(img)
    draw.text((20, 16), f"Figure {number}", fill="black", font=font)
    for i, line in enumerate(lines):
        draw.text((20, 16 + 28 * (i + 1)), line, fill="black", font=font)
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path, "PNG")


_FIGURE_LINES = [
    ["client -> gateway -> service", "retry: 3 times, backoff 200 ms", "timeout: 30 s"],
    ["step 1: build the image", "step 2: push to the registry", "step 3: roll out 10% first"],
    ["cache hit rate 94%", "p95 latency 180 ms", "errors 0.02%"],
]


@dataclass
class Section:
    heading: str
    paragraphs: list[str]


def _blocks(text: str) -> list[str]:
    """Blank-line separated blocks; a fenced code block stays one block."""
    out: list[str] = []
    cur: list[str] = []
    fence = False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        if not line.strip() and not fence:
            if cur:
                out.append("\n".join(cur).strip("\n"))
                cur = []
            continue
        cur.append(line.rstrip())
    if cur:
        out.append("\n".join(cur).strip("\n"))
    return [b for b in out if b.strip()]


def _lang(paragraphs: list[str]) -> str:
    """By the prose (code blocks left out): Chinese when CJK is over 15 % of its letters."""
    text = " ".join(p for p in paragraphs if not p.lstrip().startswith(("```", "~~~")))
    letters = sum(1 for c in text if not c.isspace())
    return "zh" if letters and len(_CJK.findall(text)) / letters > 0.15 else "en"


def _usable(block: str) -> bool:
    first = block.lstrip()
    if first.startswith(("import ", "export ", "<", "---", "{%", "{*", "|", "!", "///", ":::")):
        return False  # MDX imports, HTML, front matter, tables, admonition markers, images
    return 40 <= len(block.encode()) <= 1800


def load_sections(root: Path) -> dict[str, list[Section]]:
    """Every source file cut into sections (heading + paragraphs), by language."""
    pools: dict[str, list[Section]] = {"en": [], "zh": []}
    for f in sorted(p for p in root.rglob("*") if p.suffix in (".md", ".mdx") and p.is_file()):
        text = f.read_text(encoding="utf-8", errors="replace")
        current: Section | None = None
        for b in _blocks(text):
            if b.startswith("#") and "\n" not in b:
                heading = _ANCHOR.sub("", b.lstrip("#").strip())
                if current and current.paragraphs:
                    pools[_lang(current.paragraphs)].append(current)
                current = Section(heading[:80] or f.stem, []) if heading else None
            elif current is not None and _usable(b):
                current.paragraphs.append(b)
        if current and current.paragraphs:
            pools[_lang(current.paragraphs)].append(current)
    return pools


def _size(parts: list[str]) -> int:
    return len("\n\n".join(parts).encode()) + 1


def _heading(fmt: str, lang: str, level: int, number: str, text: str) -> str:
    if fmt == "md":
        return "#" * level + " " + text
    # Plain text: numbered headings, as such files write them.
    return f"{number} {text}" if level > 1 else text


class _Stream:
    """Sections of one language, shuffled, consumed without replacement (then reshuffled)."""

    def __init__(self, sections: list[Section], rng: random.Random) -> None:
        self.sections, self.rng, self.i, self.cycle = list(sections), rng, 0, 0
        rng.shuffle(self.sections)

    def next(self) -> Section:
        if self.i >= len(self.sections):
            self.rng.shuffle(self.sections)
            self.i, self.cycle = 0, self.cycle + 1
        s = self.sections[self.i]
        self.i += 1
        return s


def generate_kb(
    kb_dir: Path, corpus: Path, n_docs: int, seed: int, zh_share: float = 0.4, txt_share: float = 0.3
) -> dict:
    """Write ``n_docs`` documents under ``kb_dir``; returns a description of what was made."""
    rng = random.Random(seed)
    pools = load_sections(corpus)
    empty = sorted(lang for lang in ("en", "zh") if not pools.get(lang))
    if empty:
        raise SystemExit(
            f"generate_kb: no {'/'.join(empty)} sections under {corpus} (is the shared corpus there? "
            "the benchmarks read ../shared/corpora/ beside the repository)"
        )
    streams = {lang: _Stream(secs, random.Random(rng.random())) for lang, secs in pools.items()}
    sizes: list[int] = []
    counts = {"en-md": 0, "en-txt": 0, "zh-md": 0, "zh-txt": 0}
    images = 0
    for i in range(n_docs):
        lang = "zh" if rng.random() < zh_share else "en"
        fmt = "txt" if rng.random() < txt_share else "md"
        target = rng.randint(MIN_BYTES + 256, MAX_BYTES - 256)
        stream = streams[lang]
        first = stream.next()
        parts = [_heading(fmt, lang, 1, "", first.heading)]
        section_no = 0
        pending = [first]
        while _size(parts) < target:
            sec = pending.pop() if pending else stream.next()
            intro = sec is first  # the title's own section: its paragraphs follow the title
            if not intro:
                section_no += 1
            number = f"{_CN_NUMS[(section_no - 1) % 10]}、" if (lang == "zh" and fmt == "txt") else f"{section_no}."
            head = _heading(fmt, lang, 2, number, sec.heading)
            added = intro
            for para in sec.paragraphs:
                candidate = parts + ([head] if not added else []) + [para]
                if _size(candidate) > MAX_BYTES - 64:
                    break
                parts, added = candidate, True
                if _size(parts) >= target:
                    break
            if not added and _size(parts) >= MIN_BYTES:
                break  # the next section does not fit: the document is long enough
        if _size(parts) < MIN_BYTES:  # rare: pad with short paragraphs of the same language
            while _size(parts) < MIN_BYTES:
                for para in stream.next().paragraphs:
                    if _size([*parts, para]) <= MAX_BYTES - 64:
                        parts.append(para)
        folder = kb_dir / lang / f"topic-{i % 17:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        if fmt == "md" and i % IMAGE_EVERY == 3 and _size(parts) < MAX_BYTES - 200:
            caption = "架构示意图" if lang == "zh" else "How the request flows"
            parts.insert(min(2, len(parts)), f"![{caption}](images/fig-{i:04d}.png)")
            _figure(folder / "images" / f"fig-{i:04d}.png", i, _FIGURE_LINES[i % len(_FIGURE_LINES)])
            images += 1
        body = "\n\n".join(parts) + "\n"
        path = folder / f"doc-{i:04d}.{fmt}"
        path.write_text(body, encoding="utf-8")
        sizes.append(len(body.encode()))
        counts[f"{lang}-{fmt}"] += 1
    return {
        "documents": n_docs,
        "by_language_format": counts,
        "bytes_total": sum(sizes),
        "bytes_min": min(sizes),
        "bytes_max": max(sizes),
        "bytes_mean": round(sum(sizes) / len(sizes)),
        "images": images,
        "pool_cycles": {lang: s.cycle for lang, s in streams.items()},
    }
