"""The ``corpus`` command, for people and scripts (``--json`` wherever it prints data).

    corpus index [--kb NAME ...] [--json]        materialize KBs through Dagster
    corpus search QUERY --kb NAME [--top-k N]    hybrid search over the active version
    corpus strategies | preview | recommend      chunking (no Dagster, starts fast)
    corpus ui [--port N]                         the Dagster UI on the same instance
    corpus serve [--port N]                      search over HTTP (JSON API, Dify), /docs

Commands that need Dagster import it inside the command, so the others start fast.
Exit codes: 0 ok, 1 a run or search failed, 2 invalid input (config, arguments).
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
from collections.abc import Sequence
from typing import Any

from corpus_pipeline.errors import ConfigError, CorpusError
from corpus_pipeline.secrets import mask

# Sub-command modules; each has register(subparsers) adding its parsers with func=...
_COMMAND_MODULES = (
    "corpus_pipeline.cli.index",
    "corpus_pipeline.cli.search",
    "corpus_pipeline.cli.versions",
    "corpus_pipeline.cli.evaluate",
    "corpus_pipeline.cli.chunking",
    "corpus_pipeline.cli.stats",
    "corpus_pipeline.cli.lineage",
    "corpus_pipeline.cli.serve",
)


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, ensure_ascii=False, indent=2, default=str)
    sys.stdout.write("\n")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="corpus", description="Index folders of documents for RAG retrieval.")
    parser.add_argument("--version", action="version", version=f"corpus {_version()}", help="print the version")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in _COMMAND_MODULES:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        mod.register(sub)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("corpus-pipeline")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree without installing
        return "unknown"


def _fail(args: argparse.Namespace, code: str, message: str, status: int) -> int:
    """An error: on stderr, and also as JSON on stdout under ``--json`` (what a script reads)."""
    if getattr(args, "json", False):
        print_json({"error": {"code": code, "command": args.command, "message": message}, "exit_code": status})
    prefix = "invalid configuration:\n" if code == "invalid_configuration" else ""
    print(f"corpus {args.command}: {prefix}{message}", file=sys.stderr)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    from corpus_pipeline.store.memory import use_returning_pool

    use_returning_pool()  # before anything imports pyarrow: freed Arrow pages go back to the system
    from corpus_pipeline.cli.engine import dagster_indexer
    from corpus_pipeline.indexer import use_indexer

    use_indexer(dagster_indexer)  # (the composition root: `corpus index`, `corpus serve`)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:
        return _fail(args, "invalid_configuration", mask(str(exc)), 2)
    except CorpusError as exc:
        code = re.sub(r"(?<!^)(?=[A-Z])", "_", type(exc).__name__).lower()  # StoreError -> store_error
        return _fail(args, code, mask(str(exc)), 1)  # no key, whatever its shape
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
