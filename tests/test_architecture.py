"""The library stays free of Dagster: only assets/ and resources/ (and the CLI's index
command, lazily) may import it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

LIB = Path(__file__).resolve().parents[1] / "corpus_pipeline"


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_no_module_of_the_library_imports_dagster_at_top_level():
    offenders = []
    for path in LIB.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:  # module level only: the CLI imports the Dagster layer inside functions
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                if any(m.split(".")[0] in {"dagster", "assets", "resources"} for m in mods):
                    offenders.append(str(path.relative_to(LIB)))
    assert offenders == []


def test_only_the_cli_mentions_the_dagster_layer_at_all():
    users = sorted(
        str(p.relative_to(LIB))
        for p in LIB.rglob("*.py")
        if _imports(p) & {"dagster", "dagster_postgres", "assets", "resources"}
    )
    assert all(u.startswith("cli/") for u in users), users


def test_the_library_never_imports_the_cli():
    """The use cases (``indexer``, ``store.versions``, ``store.drop``, ``lineage``, search)
    are library calls the CLI and the Python API both call: only ``cli/`` imports ``cli/``,
    and the Dagster indexer is injected (``corpus_pipeline.indexer``), never imported."""
    offenders = []
    for path in LIB.rglob("*.py"):
        rel = str(path.relative_to(LIB))
        if rel.startswith("cli/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            mods = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            offenders += [f"{rel}:{node.lineno} {m}" for m in mods if m.startswith("corpus_pipeline.cli")]
    assert offenders == []


def test_importing_every_library_module_loads_no_dagster():
    code = (
        "import importlib, pkgutil, sys, corpus_pipeline\n"
        "for m in pkgutil.walk_packages(corpus_pipeline.__path__, 'corpus_pipeline.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('dagster', 'assets', 'resources'))\n"
        "print(bad); sys.exit(1 if bad else 0)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


#: The readers of an index: they read a published snapshot (``store.snapshots``), never a
#: partition's current files, so none of them builds a partition path or opens a manifest.
READERS = [
    "api.py",
    "lineage.py",
    "serve/app.py",
    "serve/web.py",
    "retrieval/search.py",
    "retrieval/lookup.py",
    "retrieval/evaluation.py",
    "quality/stats.py",
    "cli/versions.py",
    "cli/search.py",
    "cli/stats.py",
    "cli/lineage.py",
]
_CURRENT_FILES = {"partition_dir", "read_manifest", "read_partition", "read_table", "has_partition", "partition_files"}


def test_readers_read_snapshots_not_the_partitions_current_files():
    offenders = []
    for rel in READERS:
        path = LIB / rel
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
            if name in _CURRENT_FILES:
                offenders.append(f"{rel}:{node.lineno} {name}")
    assert offenders == [], "read through store.snapshots.Snapshot instead: " + ", ".join(offenders)


#: What a ``Snapshot`` reads by asset name; readers ask ``store.reader.SnapshotReader`` for
#: typed records (or narrow columns) instead.
_SNAPSHOT_READS = {"read", "rows", "dataset", "manifest", "has"}


def _snapshot_object(node: ast.expr) -> bool:
    """``snap``, ``snapshot`` or ``<anything>.snapshot``: what holds a Snapshot in the readers."""
    if isinstance(node, ast.Name):
        return node.id in ("snap", "snapshot")
    return isinstance(node, ast.Attribute) and node.attr == "snapshot"


def test_readers_read_through_the_typed_reader():
    """No reader spells an asset name to a snapshot: ``snap.read("parent_blocks", ...)`` and
    the like live in ``store.reader`` alone."""
    offenders = []
    for rel in READERS:
        for node in ast.walk(ast.parse((LIB / rel).read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _SNAPSHOT_READS
                and _snapshot_object(node.func.value)
            ):
                offenders.append(f"{rel}:{node.lineno} .{node.func.attr}()")
    assert offenders == [], "read through store.reader.SnapshotReader instead: " + ", ".join(offenders)


def test_the_store_is_below_retrieval():
    """``store/`` is what ``retrieval/`` reads: it imports nothing of it, at any depth of a
    module (keyword analysis, SQL literals and the ANN threshold live below both)."""
    offenders = []
    for path in sorted((LIB / "store").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("corpus_pipeline.retrieval"):
                offenders.append(f"{path.name}:{node.lineno} {node.module}")
            if isinstance(node, ast.Import):
                offenders += [
                    f"{path.name}:{node.lineno} {a.name}"
                    for a in node.names
                    if a.name.startswith("corpus_pipeline.retrieval")
                ]
    assert offenders == []


def _module_graph() -> dict[str, set[str]]:
    """Every library module and the library modules it imports, at any depth of it (in a
    function, under ``TYPE_CHECKING``); ``from package import submodule`` points at the
    submodule."""
    mods: dict[str, Path] = {}
    for p in LIB.rglob("*.py"):
        parts = list(p.relative_to(LIB.parent).with_suffix("").parts)
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        out: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                out |= {a.name for a in node.names if a.name in mods}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                for a in node.names:
                    out.add(f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base)
        graph[name] = {m for m in out if m in mods and m != name}
    return graph


def test_the_library_has_no_import_cycle():
    """No module imports, however late or only for types, a module that imports it back
    (kbconfig <-> quality, the embedding package <-> its cache, cli <-> cli.index were the
    last ones): each piece can be read, tested and replaced from the bottom up."""
    graph = _module_graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert cycles == []
