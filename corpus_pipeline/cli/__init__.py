"""The ``corpus`` command, for people and scripts (``--json`` wherever it prints data).

    corpus index [--kb NAME ...] [--json]        materialize KBs through Dagster
    corpus search QUERY --kb NAME [--top-k N]    hybrid search over the active version
    corpus strategies | preview | recommend      chunking (no Dagster, starts fast)
    corpus ui [--port N]                         the Dagster UI on the same instance
    corpus serve [--port N]                      search over HTTP (JSON API, Dify), /docs

Commands that need Dagster import it inside the command, so the others start fast.
Exit codes: 0 ok, 1 a run or search failed (or a KB held no documents), 2 invalid input
(config, arguments); 130 Ctrl-C, 143 SIGTERM (one line on stderr, no traceback); 141 when
stdout was closed by its reader (``corpus search ... | head -1``: the rest is dropped quietly).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType
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


class _Terminated(KeyboardInterrupt):
    """SIGTERM, answered as Ctrl-C is (Python's default would end the process without a word)."""


def _on_sigterm(_signo: int, _frame: FrameType | None) -> None:
    raise _Terminated


def main(argv: Sequence[str] | None = None) -> int:
    """``corpus``: the command's exit code. Ctrl-C (130) and SIGTERM (143) end it with one line
    on stderr, a closed stdout (141, SIGPIPE's) with none: never a traceback."""
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if in_main else None
    _COMMAND[0] = "corpus"
    try:
        code = _main(argv, answer_sigterm=in_main)
        sys.stdout.flush()  # (here, where a closed pipe is caught, not at exit)
        return code
    except BrokenPipeError:
        _discard_stdout()
        return 128 + 13  # SIGPIPE's: what `seq 1 1000000 | head -1` reports of seq
    except KeyboardInterrupt as exc:
        signo = signal.SIGTERM if isinstance(exc, _Terminated) else signal.SIGINT
        if in_main:  # a second signal while exiting ends the process at once, without a word
            for s in (signal.SIGINT, signal.SIGTERM):
                signal.signal(s, signal.SIG_DFL)
            previous = None
        try:
            print(f"{_COMMAND[0]}: interrupted by {signo.name}", file=sys.stderr, flush=True)
            sys.stdout.flush()
        except (BrokenPipeError, ValueError):
            _discard_stdout()
        return 128 + signo
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


#: What the interrupted line is prefixed with: ``corpus search`` once the arguments are read.
_COMMAND = ["corpus"]


def _discard_stdout() -> None:
    """Whatever is still buffered for a stdout nobody reads goes nowhere (Python would report
    it at exit)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _main(argv: Sequence[str] | None, *, answer_sigterm: bool) -> int:
    from corpus_pipeline.store.memory import use_returning_pool

    use_returning_pool()  # before anything imports pyarrow: freed Arrow pages go back to the system
    from corpus_pipeline.cli.engine import dagster_indexer
    from corpus_pipeline.indexer import use_indexer

    use_indexer(dagster_indexer)  # (the composition root: `corpus index`, `corpus serve`)
    parser = build_parser()
    args = parser.parse_args(argv)
    _COMMAND[0] = f"corpus {args.command}"
    if answer_sigterm and args.command not in ("serve", "ui"):  # (those stop gracefully on SIGTERM, exit 0)
        signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:
        return _fail(args, "invalid_configuration", mask(str(exc)), 2)
    except CorpusError as exc:
        code = re.sub(r"(?<!^)(?=[A-Z])", "_", type(exc).__name__).lower()  # StoreError -> store_error
        return _fail(args, code, mask(str(exc)), 1)  # no key, whatever its shape


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
