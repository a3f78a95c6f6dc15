"""What is stale: whether a KB must be parsed again, and whether a version must be rebuilt.

Shared by ``corpus index`` and the Dagster sensor, so both redo exactly the same work.

- The *parse fingerprint* of a KB is a hash of every document's (id, path, content hash)
  with the parser version and the settings that shape parsing (include/exclude globs,
  size limit, vision settings). The last parse chain writes it to
  ``warehouse/state/<kb>/parse.json`` when it finishes.
- A version's index state (``state/<kb>/index-<version>.json``) records the parse
  fingerprint it was built from and the build code's version; the version is stale when
  either differs from now, or when its search table is missing.

Discovery hashes file contents (streamed, fast), so an edited file with an unchanged
modification time is still seen.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from upath import UPath

from corpus_pipeline.kbconfig import KnowledgeBase
from corpus_pipeline.store.files import put_text
from corpus_pipeline.store.layout import Layout

# Settings that do not shape parsing (they shape chunks, versions, search or checks).
_NOT_PARSING = ("description", "chunking", "embedding", "search", "quality", "retention", "llm")


def parse_config_fingerprint(kb: KnowledgeBase) -> str:
    cfg = {k: v for k, v in kb.config.model_dump(mode="json").items() if k not in _NOT_PARSING}
    return hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest()[:16]


def parse_fingerprint(kb: KnowledgeBase, docs: pa.Table) -> str:
    """From a ``documents`` table or a parsed ``texts`` table (same id/path/hash columns)."""
    from corpus_pipeline.parsing import PARSER_VERSION

    h = hashlib.sha256(f"{PARSER_VERSION}|{parse_config_fingerprint(kb)}".encode())
    rows = sorted(
        zip(
            docs.column("doc_id").to_pylist(),
            docs.column("path").to_pylist(),
            docs.column("content_hash").to_pylist(),
            strict=True,
        )
    )
    for row in rows:
        h.update("\x1f".join(str(v) for v in row).encode() + b"\x1e")
    return h.hexdigest()[:16]


def _read(path: UPath) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(path: UPath, data: dict[str, Any]) -> None:
    put_text(path, json.dumps(data, indent=2, sort_keys=True))


def record_parsed(layout: Layout, kb: str, fingerprint: str) -> None:
    _write(layout.parse_state_file(kb), {"fingerprint": fingerprint})


def last_parsed(layout: Layout, kb: str) -> str | None:
    fp = _read(layout.parse_state_file(kb)).get("fingerprint")
    return str(fp) if fp is not None else None


def build_version() -> str:
    """The version of the code that builds a strategy version's tables (not the strategies,
    which are in the version itself): a bump makes every built version stale."""
    from corpus_pipeline.store.lance import SEARCH_TABLE_VERSION
    from corpus_pipeline.versioning import CHUNK_TABLE_VERSION

    return f"{CHUNK_TABLE_VERSION}.{SEARCH_TABLE_VERSION}"


def record_indexed(layout: Layout, kb: str, version: str) -> None:
    """The version was just rebuilt from the KB's last parse."""
    _write(
        layout.index_state_file(kb, version), {"parse_fingerprint": last_parsed(layout, kb), "build": build_version()}
    )


def forget_version(layout: Layout, kb: str, version: str) -> None:
    layout.index_state_file(kb, version).unlink(missing_ok=True)


@dataclass(frozen=True)
class Freshness:
    kb: str
    version: str
    parse_fingerprint: str
    parse_needed: bool
    index_needed: bool
    reason: str

    @property
    def up_to_date(self) -> bool:
        return not (self.parse_needed or self.index_needed)


def check(layout: Layout, kb: KnowledgeBase, version: str, documents: pa.Table) -> Freshness:
    """Compare the KB as discovered now (``documents``) with what was last built."""
    fp = parse_fingerprint(kb, documents)
    last = last_parsed(layout, kb.name)
    parse_needed = last != fp
    state = _read(layout.index_state_file(kb.name, version))
    built_from = state.get("parse_fingerprint")
    # The table's folder, not a LanceDB connection: importing lancedb costs seconds.
    has_table = layout.search_table_dir(kb.name, version).is_dir()
    old_build = state.get("build") != build_version()
    index_needed = parse_needed or built_from != fp or not has_table or old_build
    if last is None:
        reason = "never parsed"
    elif parse_needed:
        reason = "documents or parsing settings changed"
    elif built_from is None or not has_table:
        reason = f"version {version} not built yet"
    elif built_from != fp:
        reason = f"version {version} was built from an older parse"
    elif old_build:
        reason = f"version {version} was built by older code (build {state.get('build')}, now {build_version()})"
    else:
        reason = "nothing changed"
    return Freshness(kb.name, version, fp, parse_needed, index_needed, reason)
