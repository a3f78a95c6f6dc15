"""A synthetic published version of one KB, written with the product's own write functions.

    build(home, docs=20_000)  ->  BuiltKB (and ``home/bench.json``: its figures and the queries)

Per document: 4–6 parent blocks (5 on average) of 1,200–1,800 characters, each cut into 2–4
child chunks of 400 characters (15 children a document on average), every 25th document one
IMAGE child (an image description) besides, and 1 % of the documents a format that is not
their extension's (a PDF named ``.txt``: the searcher's format exceptions). The text is
sentences of a generated vocabulary, English, Chinese and mixed (identifiers, ports, paths),
drawn with a Zipf law, plus one mark per parent (``OPS-<doc>-<parent>``), so that no two
parents are the same text and the keyword index sees a vocabulary that grows with the KB.
Ids are shaped as the pipeline's (sha256 prefixes: 16 hex for documents, 24 for parents and
chunks).

Written as ``corpus index`` writes them: the ``documents`` partition (``store.parquet``'s
``PartitionWriter``, a stream of document batches), ``parent_blocks`` and ``child_chunks``
(the records' schemas, ``store.schemas.schema_of``), the search table
(``store.lance.write_search_table``: keyword text, full-text, scalar and, from
``VECTOR_INDEX_MIN_ROWS`` children on, ANN indexes) with random unit vectors of 384
dimensions, then ``store.snapshots.publish``. ``chunk_embeddings`` is not written: neither a
snapshot nor a searcher needs it (its manifest is pinned as absent).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from corpus_pipeline.models import Chunk, Document, ParentBlock
from corpus_pipeline.store.lance import write_search_table
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.parquet import PartitionWriter
from corpus_pipeline.store.schemas import SEARCH_COLUMNS, schema_of
from corpus_pipeline.store.snapshots import asset_folder, publish

KB = "bench"
VERSION = "v1"
DIM = 384
#: Documents generated and written per batch (what the builder holds at once, vectors aside).
BATCH_DOCS = 1000
CHILD_CHARS = 400
IMAGE_EVERY = 25
ODD_FORMAT_EVERY = 100
#: Extensions and their share of the documents.
EXTENSIONS = (
    ("md", "markdown", 50),
    ("txt", "text", 20),
    ("html", "html", 15),
    ("pdf", "pdf", 10),
    ("docx", "docx", 5),
)
STRATEGY_CODE = "RECURSIVE@3"
PLAN = "PARENT:RECURSIVE;CHILD:RECURSIVE"

_EN_COMMON = (
    "the", "a", "of", "to", "and", "in", "is", "for", "on", "with", "that", "by", "this", "be", "are", "as",
    "at", "from", "or", "can", "it", "not", "when", "if", "after", "before", "service", "server", "cluster",
    "node", "disk", "memory", "cpu", "network", "port", "request", "response", "error", "alert", "backup",
    "snapshot", "replica", "policy", "retention", "index", "search", "query", "cache", "queue", "worker", "job",
    "schedule", "deploy", "release", "rollback", "config", "configure", "setting", "timeout", "retry", "limit",
    "threshold", "latency", "throughput", "log", "metric", "dashboard", "user", "account", "password", "token",
    "certificate", "key", "storage", "volume", "database", "table", "schema", "migration", "upgrade", "restart",
    "monitor", "check", "health", "status", "warning", "critical", "incident", "runbook", "owner", "team",
    "escalate", "page", "on-call", "window",
)  # fmt: skip
_EN_IDENTS = (
    "max_connections", "read_timeout_ms", "kube-proxy", "etcdctl", "pg_dump", "nginx.conf", "db.yaml",
    "/var/log/syslog", "systemctl", "jstack", "top -H", "GC_PAUSE", "OOMKilled", "HTTP 503", "x509",
)  # fmt: skip
_ZH_COMMON = (
    "服务", "集群", "节点", "磁盘", "内存", "网络", "端口", "请求", "响应", "错误", "告警", "备份", "快照", "副本", "策略", "保留", "索引", "检索",
    "查询", "缓存", "队列", "任务", "调度", "部署", "发布", "回滚", "配置", "超时", "重试", "限制", "阈值", "延迟", "吞吐", "日志", "指标", "看板",
    "用户", "账号", "密码", "证书", "存储", "数据库", "升级", "重启", "监控", "检查", "健康", "状态", "严重", "事故", "值班", "负责人", "升级处理",
    "维护窗口", "使用率", "超过", "分钟", "小时", "立即", "通知", "排查", "定位",
)  # fmt: skip
_PUNCT_EN = ". "
_PUNCT_ZH = "。"


@dataclass
class BuiltKB:
    """What was written: sizes, where, how long each part took, and the queries to search."""

    home: str
    kb: str
    version: str
    docs: int
    parents: int
    children: int
    images: int
    odd_formats: int
    parent_chars: int
    child_chars: int
    seconds: dict[str, float] = field(default_factory=dict)
    disk_mb: dict[str, float] = field(default_factory=dict)
    queries: list[str] = field(default_factory=list)


class Vocabulary:
    """English and Chinese words (common ones first, then generated ones) and a pool of
    sentences drawn from them with a Zipf law, seeded."""

    def __init__(self, rng: np.random.Generator, en_words: int = 30_000, zh_words: int = 12_000) -> None:
        syll = ["ka", "lo", "mi", "ter", "van", "dor", "sel", "pra", "qu", "nex", "bri", "tal", "on", "ex", "ul", "ri"]
        en = list(_EN_COMMON)
        seen = set(en)
        while len(en) < en_words:
            w = "".join(syll[i] for i in rng.integers(0, len(syll), rng.integers(2, 5)))
            if w not in seen:
                seen.add(w)
                en.append(w)
        # Chinese: words of 2–3 characters from 1,500 common-range characters.
        chars = [chr(0x4E00 + int(c)) for c in rng.choice(0x51A5 // 4, 1500, replace=False)]
        zh = list(_ZH_COMMON)
        zseen = set(zh)
        while len(zh) < zh_words:
            w = "".join(chars[i] for i in rng.integers(0, len(chars), rng.integers(2, 4)))
            if w not in zseen:
                zseen.add(w)
                zh.append(w)
        self.en, self.zh = en, zh
        self.rng = rng

    def _zipf(self, n: int, size: int) -> np.ndarray:
        return np.minimum(self.rng.zipf(1.3, size) - 1, n - 1)

    def en_sentence(self) -> str:
        k = int(self.rng.integers(8, 20))
        words = [self.en[i] for i in self._zipf(len(self.en), k)]
        if self.rng.random() < 0.3:
            words.insert(int(self.rng.integers(0, k)), _EN_IDENTS[int(self.rng.integers(0, len(_EN_IDENTS)))])
        if self.rng.random() < 0.2:
            words.append(f"port {int(self.rng.integers(1024, 65535))}")
        return " ".join(words).capitalize() + _PUNCT_EN

    def zh_sentence(self) -> str:
        k = int(self.rng.integers(6, 16))
        words = [self.zh[i] for i in self._zipf(len(self.zh), k)]
        if self.rng.random() < 0.35:  # an identifier or a figure in a Chinese sentence
            pick = _EN_IDENTS[int(self.rng.integers(0, len(_EN_IDENTS)))]
            words.insert(
                int(self.rng.integers(0, k)),
                f" {pick} " if self.rng.random() < 0.5 else f"{int(self.rng.integers(1, 100))}%",
            )
        return "".join(words) + _PUNCT_ZH

    def sentences(self, n: int) -> list[str]:
        return [self.zh_sentence() if self.rng.random() < 0.45 else self.en_sentence() for _ in range(n)]


def _sha(text: str, n: int) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:n]


def _paths(docs: int, rng: np.random.Generator) -> list[tuple[str, str]]:
    """(path, format) of each document: folders two deep, extensions by ``EXTENSIONS``."""
    exts = [(e, f) for e, f, share in EXTENSIONS for _ in range(share)]
    out = []
    for i in range(docs):
        ext, fmt = exts[int(rng.integers(0, len(exts)))]
        if i % ODD_FORMAT_EVERY == 7:  # content says otherwise than the extension
            ext, fmt = "txt", "pdf"
        out.append((f"team-{i % 37:02d}/area-{(i // 37) % 23:02d}/doc-{i:06d}.{ext}", fmt))
    return out


class _Batch:
    """The column lists of one batch of documents, parents and children."""

    def __init__(self) -> None:
        self.docs: dict[str, list[Any]] = {f.name: [] for f in schema_of(Document)}
        self.parents: dict[str, list[Any]] = {f.name: [] for f in schema_of(ParentBlock)}
        self.children: dict[str, list[Any]] = {f.name: [] for f in schema_of(Chunk)}

    def tables(self) -> tuple[pa.Table, pa.Table, pa.Table]:
        return (
            pa.table(self.docs, schema=schema_of(Document)),
            pa.table(self.parents, schema=schema_of(ParentBlock)),
            pa.table(self.children, schema=schema_of(Chunk)),
        )


def _add_child(
    b: _Batch, *, doc_id: str, path: str, parent_id: str, index: int, kind: str, text: str,
    start: int, section: str, block: int, meta: dict[str, Any], image_id: str | None, fingerprint: str,
) -> None:  # fmt: skip
    th = hashlib.sha256(text.encode("utf-8")).hexdigest()
    c = b.children
    c["chunk_id"].append(_sha(f"chunk\x1f{VERSION}\x1f{doc_id}\x1f{index}\x1f{start}\x1f{th}", 24))
    c["parent_id"].append(parent_id)
    c["chunk_index"].append(index)
    c["chunk_type"].append(kind)
    c["kb"].append(KB)
    c["strategy_version"].append(VERSION)
    c["doc_id"].append(doc_id)
    c["doc_path"].append(path)
    c["text"].append(text)
    c["start_offset"].append(start)
    c["end_offset"].append(start + len(text))
    c["char_count"].append(len(text))
    c["token_count"].append(len(text) // 3)
    c["section_path"].append(section)
    c["page_num"].append(None)
    c["block_index"].append(block)
    c["strategy"].append("IMAGE" if kind != "TEXT" else "RECURSIVE")
    c["strategy_code_version"].append(STRATEGY_CODE)
    c["overlap_chars"].append(0)
    c["derived"].append(kind != "TEXT")
    c["metadata"].append(json.dumps(meta, ensure_ascii=False, sort_keys=True))
    c["image_id"].append(image_id)
    c["text_hash"].append(th)
    c["doc_fingerprint"].append(fingerprint)


def _document(b: _Batch, i: int, path: str, fmt: str, pool: list[str], rng: np.random.Generator) -> None:
    """One document's row, parents and children into ``b``."""
    doc_id = _sha(f"{KB}/{path}", 16)
    content_hash = _sha(f"content of {path}", 64)
    n_parents = int(rng.integers(4, 7))
    pmeta = json.dumps({"plan": PLAN, "plan_reasons": ["markdown headings"]}, sort_keys=True)
    offset = 0
    parent_ids = []
    spans: list[tuple[str, int, int, str, str]] = []
    for j in range(n_parents):
        target = int(rng.integers(1200, 1801))
        picks = rng.integers(0, len(pool), 40)
        text, k = f"OPS-{i}-{j} ", 0
        while len(text) < target:
            text += pool[int(picks[k % 40])]
            k += 1
        text = text[:target]
        pid = _sha(f"parent\x1f{VERSION}\x1f{doc_id}\x1f{j}\x1f{offset}\x1f{_sha(text, 64)}", 24)
        section = f"Chapter {j + 1} > Part {int(rng.integers(1, 4))}"
        p = b.parents
        p["parent_id"].append(pid)
        p["parent_index"].append(j)
        p["kb"].append(KB)
        p["strategy_version"].append(VERSION)
        p["doc_id"].append(doc_id)
        p["doc_path"].append(path)
        p["text"].append(text)
        p["start_offset"].append(offset)
        p["end_offset"].append(offset + len(text))
        p["char_count"].append(len(text))
        p["token_count"].append(len(text) // 3)
        p["section_path"].append(section)
        p["page_num"].append(None)
        p["block_index"].append(j * 4)
        p["strategy"].append("RECURSIVE")
        p["strategy_code_version"].append(STRATEGY_CODE)
        p["overlap_chars"].append(0)
        p["derived"].append(False)
        p["metadata"].append(pmeta)
        p["content_hash"].append(content_hash)
        parent_ids.append(pid)
        spans.append((pid, offset, len(text), text, section))
        offset += len(text) + 2
    fingerprint = _sha("".join(parent_ids), 24)
    index = 0
    for j, (pid, start, length, text, section) in enumerate(spans):
        k = int(rng.integers(2, 5))
        starts = np.linspace(0, max(length - CHILD_CHARS, 0), k).astype(int)
        for s in starts:
            _add_child(
                b, doc_id=doc_id, path=path, parent_id=pid, index=index, kind="TEXT",
                text=text[s : s + CHILD_CHARS], start=start + int(s), section=section, block=j * 4,
                meta={}, image_id=None, fingerprint=fingerprint,
            )  # fmt: skip
            index += 1
        if j == 0 and i % IMAGE_EVERY == 0:
            image_id = _sha(f"image of {path}", 64)
            desc = (
                f"图片描述 image of OPS-{i}: "
                + pool[int(rng.integers(0, len(pool)))]
                + pool[int(rng.integers(0, len(pool)))]
            )
            _add_child(
                b, doc_id=doc_id, path=path, parent_id=pid, index=index, kind="IMAGE", text=desc[:300],
                start=start + length // 2, section=section, block=j * 4 + 1,
                meta={"image_id": image_id}, image_id=image_id, fingerprint=fingerprint,
            )  # fmt: skip
            index += 1
    d = b.docs
    d["kb"].append(KB)
    d["doc_id"].append(doc_id)
    d["path"].append(path)
    d["format"].append(fmt)
    d["size_bytes"].append(offset)
    d["content_hash"].append(content_hash)
    d["plan"].append(PLAN)
    d["override"].append(None)
    d["error"].append(None)


def queries(vocab: Vocabulary, docs: int, rng: np.random.Generator, n: int = 50) -> list[str]:
    """``n`` varied queries: English words, Chinese words, the two mixed with identifiers,
    and a parent's mark (``OPS-<doc>-<parent>``), in turn."""
    out = []
    for q in range(n):
        kind = q % 5
        en = [vocab.en[int(i)] for i in rng.integers(0, 3000, 4)]
        zh = [vocab.zh[int(i)] for i in rng.integers(0, 1500, 3)]
        ident = _EN_IDENTS[int(rng.integers(0, len(_EN_IDENTS)))]
        if kind == 0:
            out.append(f"how to {en[0]} the {en[1]} {en[2]} when {en[3]} fails")
        elif kind == 1:
            out.append(f"如何{zh[0]}{zh[1]}的{zh[2]}")
        elif kind == 2:
            out.append(f"{ident} {zh[0]}{zh[1]} {en[0]}")
        elif kind == 3:
            out.append(f"{zh[0]} {en[1]} {en[2]} {ident}")
        else:
            out.append(f"OPS-{int(rng.integers(0, docs))}-{int(rng.integers(0, 4))} {en[0]}")
    return out


def _disk_mb(path: Path) -> float:
    return round(sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20, 1)


def build(home: Path, docs: int, *, seed: int = 7, log: Any = print) -> BuiltKB:
    """Write a published version of ``KB`` with ``docs`` documents under ``home`` (a
    CORPUS_HOME); returns what was written (also in ``home/bench.json``)."""
    layout = Layout(home)
    rng = np.random.default_rng(seed)
    vocab = Vocabulary(rng)
    pool = vocab.sentences(20_000)
    t0 = time.perf_counter()
    writers = {
        "documents": PartitionWriter(asset_folder(layout, "documents", KB, VERSION)),
        "parent_blocks": PartitionWriter(asset_folder(layout, "parent_blocks", KB, VERSION)),
        "child_chunks": PartitionWriter(asset_folder(layout, "child_chunks", KB, VERSION)),
    }
    vrng = np.random.default_rng(seed + 1)
    search_parts: list[pa.Table] = []
    vectors: list[np.ndarray] = []
    counts = {"parents": 0, "children": 0, "images": 0, "parent_chars": 0, "child_chars": 0}
    paths = _paths(docs, rng)
    for start in range(0, docs, BATCH_DOCS):
        b = _Batch()
        for i in range(start, min(start + BATCH_DOCS, docs)):
            _document(b, i, *paths[i], pool, rng)
        dtab, ptab, ctab = b.tables()
        writers["documents"].add(dtab)
        writers["parent_blocks"].add(ptab)
        writers["child_chunks"].add(ctab)
        search_parts.append(ctab.select(list(SEARCH_COLUMNS)))
        v = vrng.standard_normal((ctab.num_rows, DIM)).astype(np.float32)
        vectors.append(v / np.linalg.norm(v, axis=1, keepdims=True))
        counts["parents"] += ptab.num_rows
        counts["children"] += ctab.num_rows
        counts["images"] += sum(1 for t in b.children["chunk_type"] if t != "TEXT")
        counts["parent_chars"] += sum(b.parents["char_count"])
        counts["child_chars"] += sum(b.children["char_count"])
        log(f"  {min(start + BATCH_DOCS, docs)}/{docs} documents generated")
    for w in writers.values():
        w.commit({"run_id": "benchmark"})
    t1 = time.perf_counter()
    log(f"  partitions written in {t1 - t0:.1f} s; writing the search table ({counts['children']} rows) ...")
    chunks = pa.concat_tables(search_parts)
    del search_parts
    write_search_table(layout, KB, VERSION, chunks, np.concatenate(vectors))
    del chunks, vectors
    t2 = time.perf_counter()
    publish(layout, KB, VERSION)
    t3 = time.perf_counter()
    built = BuiltKB(
        home=str(home), kb=KB, version=VERSION, docs=docs, parents=counts["parents"], children=counts["children"],
        images=counts["images"], odd_formats=sum(1 for i in range(docs) if i % ODD_FORMAT_EVERY == 7),
        parent_chars=counts["parent_chars"], child_chars=counts["child_chars"],
        seconds={"partitions": round(t1 - t0, 1), "search_table": round(t2 - t1, 1), "publish": round(t3 - t2, 1), "total": round(t3 - t0, 1)},
        disk_mb={
            "parent_blocks": _disk_mb(Path(asset_folder(layout, "parent_blocks", KB, VERSION))),
            "child_chunks": _disk_mb(Path(asset_folder(layout, "child_chunks", KB, VERSION))),
            "documents": _disk_mb(Path(asset_folder(layout, "documents", KB, VERSION))),
            "search_table": _disk_mb(Path(layout.search_table_dir(KB, VERSION))),
        },
        queries=queries(vocab, docs, np.random.default_rng(seed + 2)),
    )  # fmt: skip
    (home / "bench.json").write_text(json.dumps(asdict(built), ensure_ascii=False, indent=1), encoding="utf-8")
    return built


def load(home: Path, docs: int) -> BuiltKB | None:
    """The KB built earlier under ``home`` with ``docs`` documents, if it is there."""
    try:
        data = json.loads((home / "bench.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return BuiltKB(**data) if data.get("docs") == docs else None
