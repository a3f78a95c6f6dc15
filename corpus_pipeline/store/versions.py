"""The strategy versions of each KB on disk: what each was configured with, which one search
reads (ACTIVE), which one kb.yaml yields now (CURRENT), and retiring old ones.

    register_version(layout, kb, current=True)   record kb.yaml's configuration under its version
    load_version(layout, kb_name, version)       the KB exactly as that version was registered
    build_kb(layout, kb_name, version)           the KB a build of that version uses
    active_version / set_active                  what search reads
    list_versions / activate                     every version with its state; switch to a built one
    current_version                              what the last `corpus index` / sensor tick saw
    versions_to_retire / retire_version          retention (built versions only)
    failed_versions                              never-built versions a newer build supersedes

A partition is always (re)built with its version's registered strategies, so a backfill of
an old version or a run started from the UI builds exactly what the version's name promises.
What the name does not hash (an endpoint's URL and key, batch sizes, concurrency, quality
thresholds) is taken from kb.yaml as it is now whenever kb.yaml still yields the version
(``build_kb``): a moved endpoint or a loosened threshold takes effect on the next run.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from upath import UPath

from corpus_pipeline.embedding.settings import EmbeddingConfig
from corpus_pipeline.errors import ConfigError
from corpus_pipeline.kbconfig import KBConfig, KnowledgeBase, kb_from_config, resolve_kb
from corpus_pipeline.store.files import put_text, remove_tree
from corpus_pipeline.store.layout import Layout, check_kb_name
from corpus_pipeline.store.snapshots import Snapshot, SnapshotNotFound, collect, resolve, unpublish
from corpus_pipeline.versioning import strategy_version, version_inputs

#: The partitions of one version, Parquet and beyond (the LanceDB table is separate).
VERSIONED_ASSETS = ("parent_blocks", "child_chunks", "chunk_embeddings", "retrieval_eval")


def register_version(layout: Layout, kb: KnowledgeBase, *, current: bool = True) -> str:
    """Record the KB's configuration under its version (once); with ``current``, mark it as
    the version kb.yaml yields now (the one a successful build activates). Returns it."""
    version = strategy_version(kb)
    f = layout.version_file(kb.name, version)
    if not f.exists():
        payload = {
            "kb": kb.name,
            "strategy_version": version,
            "registered_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "config": kb.config.model_dump(mode="json"),
            "inputs": version_inputs(kb),
        }
        put_text(f, json.dumps(payload, ensure_ascii=False, indent=2, sort_keys=True))
    if current and current_version(layout, kb.name) != version:
        put_text(layout.current_file(kb.name), version + "\n")
    return version


def load_version(layout: Layout, kb_name: str, version: str) -> KnowledgeBase:
    """The KB as it was configured when ``version`` was registered."""
    f = layout.version_file(kb_name, version)
    if not f.exists():
        known = known_versions(layout, kb_name)
        raise ConfigError(
            f"strategy_version {version!r} is not a version of knowledge base {kb_name!r} "
            f"(known: {', '.join(known) or 'none'}); run `corpus index --kb {kb_name}` to register "
            "the current one."
        )
    payload = json.loads(f.read_text(encoding="utf-8"))
    kb = kb_from_config(layout.kb_dir(kb_name), KBConfig.model_validate(payload["config"]))
    now = strategy_version(kb)
    if now != version:
        raise ConfigError(
            f"{f}: the configuration registered as {version!r} now yields {now!r}: a strategy's code "
            "version or defaults changed since. This version cannot be rebuilt; index the KB again "
            "to register the current one."
        )
    return kb


def build_kb(layout: Layout, kb_name: str, version: str) -> KnowledgeBase:
    """The KB a build of ``version`` uses: kb.yaml as it is now when it still yields
    ``version`` (its settings outside the version's hash are the ones that apply: a moved
    endpoint, a new key variable, a loosened quality threshold); otherwise the registered
    configuration, with kb.yaml's embedding section if it names the same vectors (a moved
    endpoint again, see ``version_embedding``). A kb.yaml that no longer loads builds from
    the registration alone."""
    snapshot = load_version(layout, kb_name, version)
    try:
        now = resolve_kb(layout.kb_dir(kb_name))
    except ConfigError:
        return snapshot
    if strategy_version(now) == version:
        return now
    embedding = version_embedding(layout, kb_name, version, now.config.embedding)
    if embedding == snapshot.config.embedding:
        return snapshot
    return kb_from_config(snapshot.path, snapshot.config.model_copy(update={"embedding": embedding}))


def known_versions(layout: Layout, kb: str) -> list[str]:
    d = layout.version_dir(kb)
    return sorted(p.stem for p in d.glob("*.json")) if d.is_dir() else []


def _read_pointer(path: UPath) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def active_version(layout: Layout, kb: str) -> str | None:
    """The version search reads for ``kb`` (None before the first successful index)."""
    return _read_pointer(layout.active_file(kb))


def current_version(layout: Layout, kb: str) -> str | None:
    """The version kb.yaml yielded when it was last registered by ``corpus index`` or the sensor."""
    return _read_pointer(layout.current_file(kb))


def set_active(layout: Layout, kb: str, version: str) -> None:
    if version not in known_versions(layout, kb):
        raise ConfigError(
            f"{version!r} is not a registered version of {kb!r}: {', '.join(known_versions(layout, kb)) or 'none'}"
        )
    put_text(layout.active_file(kb), version + "\n")


def version_info(layout: Layout, kb: str, version: str) -> dict[str, Any]:
    """The registration of a version (kb, strategy_version, registered_at, config, inputs); {}
    if unknown or unreadable."""
    try:
        data = json.loads(layout.version_file(kb, version).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def version_embedding(layout: Layout, kb: str, version: str, current: EmbeddingConfig | None = None) -> EmbeddingConfig:
    """The embedding model that embedded ``version``: its vectors must be searched with it.

    ``current`` (kb.yaml's section now) is used when it names the same vectors (same model,
    prefixes, window, tokenizer): it may point at a moved endpoint or another device.
    Otherwise the section registered with the version; ``current`` or the default when the
    version is not registered here.
    """
    registered = (version_info(layout, kb, version).get("config") or {}).get("embedding")
    if registered is None:
        return current or EmbeddingConfig()
    then = EmbeddingConfig.model_validate(registered)
    if current is not None and (current.vector_key, current.version_input()) == (then.vector_key, then.version_input()):
        return current
    return then


def versions_by_age(layout: Layout, kb: str) -> list[str]:
    """Registered versions, newest first."""
    vs = known_versions(layout, kb)
    return sorted(vs, key=lambda v: (version_info(layout, kb, v).get("registered_at", ""), v), reverse=True)


def versions_to_retire(layout: Layout, kb: str, keep: int) -> list[str]:
    """Built versions beyond the ``keep`` newest built ones (the active one counted first,
    never retired). A version that was never built (stopped by its checks, its run killed)
    is not counted: it cannot displace a built rollback (see ``failed_versions``)."""
    active = active_version(layout, kb)
    built = [v for v in versions_by_age(layout, kb) if v == active or is_built(layout, kb, v)]
    kept = [v for v in built if v == active]
    out = []
    for v in built:
        if v == active:
            continue
        if len(kept) < keep:
            kept.append(v)
        else:
            out.append(v)
    return out


def failed_versions(layout: Layout, kb: str, newer_than: str) -> list[str]:
    """Versions registered before ``newer_than`` that were never built and are neither the
    active nor the current one: their partitions hold text of a build that stopped (its
    checks failed, its run was killed). They explain that failure until a newer version is
    built; then they are purged (``activate_if_current``)."""
    active, current = active_version(layout, kb), current_version(layout, kb)
    when = version_info(layout, kb, newer_than).get("registered_at", "")
    return [
        v
        for v in versions_by_age(layout, kb)
        if v not in (active, current, newer_than)
        and version_info(layout, kb, v).get("registered_at", "") <= when
        and not is_built(layout, kb, v)
    ]


def is_built(layout: Layout, kb: str, version: str) -> bool:
    """Whether ``version`` completed its build (see ``missing_from_build``)."""
    try:
        snap: Snapshot | None = resolve(layout, kb, version)
    except SnapshotNotFound:
        snap = None
    return missing_from_build(layout, kb, version, snap) is None


def yielded_version(layout: Layout, kb: str) -> str:
    """The version kb.yaml yields as it is now (``ConfigError`` when it does not load);
    ``current_version`` is what the last index saw."""
    return strategy_version(resolve_kb(layout.kb_dir(kb)))


def retire_version(layout: Layout, kb: str, version: str) -> None:
    """Withdraw a version's snapshot (its readers re-resolve: ``store.snapshots``), then
    delete its Parquet partitions, LanceDB table, state and registration, and release what
    only its snapshot kept of the KB's partitions."""
    from corpus_pipeline.store.lance import drop_search_table

    if version == active_version(layout, kb):
        raise ConfigError(f"{version!r} is the active version of {kb!r}; activate another one before retiring it")
    unpublish(layout, kb, version)
    for asset in VERSIONED_ASSETS:
        remove_tree(layout.partition_dir(asset, kb, version))
    drop_search_table(layout, kb, version)
    layout.index_state_file(kb, version).unlink(missing_ok=True)
    layout.version_file(kb, version).unlink(missing_ok=True)
    collect(layout, kb)


# ---------------------------------------------------------------------------------------------- use cases


def _age(ts: str | None) -> str:
    if not ts:
        return "?"
    secs = (datetime.now(UTC) - datetime.fromisoformat(ts)).total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{int(secs // size)}{unit}"
    return f"{int(secs)}s"


def _rows(manifest: dict[str, Any]) -> int | None:
    rows = manifest.get("rows")
    return int(rows["data"]) if isinstance(rows, dict) and "data" in rows else None


def missing_from_build(layout: Layout, kb: str, version: str, snap: Snapshot | None) -> str | None:
    """What a version lacks to be read (None: its build completed). A published snapshot is
    complete by construction (published after every asset, the table and its indexes); a KB
    that has none yet is read from its files only when the version's build was recorded as
    finished (``freshness.record_indexed``, after the table and its indexes)."""
    if snap is None:
        return "it is not published (being built, stopped by its checks, its run killed, or retired)"
    if not layout.search_table_dir(kb, version).is_dir():
        return "it has no search table"
    if snap.live and not layout.index_state_file(kb, version).exists():
        return "its build did not finish (its run stopped before the search table and its indexes were complete)"
    return None


def list_versions(layout: Layout, kb: str) -> list[dict[str, Any]]:
    """Every registered version of ``kb``, newest first: active, current (kb.yaml's), built
    (published: search can read it), plan, registration and build times, counts. What
    ``corpus versions``, ``GET /kbs/{kb}/versions`` and ``KB.versions()`` show."""
    check_kb_name(kb)
    active = active_version(layout, kb)
    try:
        current = yielded_version(layout, kb)
    except ConfigError:
        current = None
    out = []
    for v in versions_by_age(layout, kb):
        info = version_info(layout, kb, v)
        try:
            snap: Snapshot | None = resolve(layout, kb, v)
        except SnapshotNotFound:
            snap = None  # (registered, not published: being built, stopped by its checks)
        rows = {asset: _rows(snap.manifest(asset)) if snap else None for asset in ("parent_blocks", "child_chunks")}
        built_at = snap.manifest("child_chunks").get("written_at") if snap else None
        out.append(
            {
                "kb": kb,
                "strategy_version": v,
                "active": v == active,
                "current": v == current,
                "built": missing_from_build(layout, kb, v, snap) is None,
                "plan": ((info.get("inputs") or {}).get("plan") or {}).get("snapshot"),
                "registered_at": info.get("registered_at"),
                "built_at": built_at,
                "age": _age(info.get("registered_at")),
                "parent_blocks": rows["parent_blocks"],
                "child_chunks": rows["child_chunks"],
            }
        )
    return out


def activate(layout: Layout, kb: str, version: str) -> str | None:
    """Make a built (published) version the one search reads, with no rebuild (rollback);
    returns the version that was active. ``ConfigError`` naming the known versions when
    ``version`` is not one, or is not built."""
    rows = {r["strategy_version"]: r for r in list_versions(layout, kb)}
    r = rows.get(version)
    if r is None:
        raise ConfigError(
            f"{version!r} is not a version of {kb!r}; known: {', '.join(rows) or 'none'} "
            f"(see `corpus versions --kb {kb}`)"
        )
    try:
        snap: Snapshot | None = resolve(layout, kb, version)
    except SnapshotNotFound:
        snap = None
    missing = missing_from_build(layout, kb, version, snap)
    if missing is not None:
        raise ConfigError(
            f"version {version!r} of {kb!r} cannot be activated: {missing}. Build it with `corpus index --kb {kb}` "
            f"(when kb.yaml yields it), or pick a built one of `corpus versions --kb {kb}`."
        )
    before = active_version(layout, kb)
    set_active(layout, kb, version)
    return before
