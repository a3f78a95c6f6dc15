"""Shared fixtures: an isolated CORPUS_HOME with a tiny English + Chinese KB."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")

TINY_EN = textwrap.dedent(
    """\
    # Harbor backup appliance

    Harbor keeps encrypted copies of your servers. The web console listens on port 8443.

    ## Restoring a file

    Open the console, choose the snapshot, and press Restore. Restores of files under 2 GB
    finish in less than a minute. Larger restores run in the background.

    ## Retention

    Daily snapshots are kept for 30 days and monthly snapshots for 12 months.
    """
)

TINY_ZH = textwrap.dedent(
    """\
    CPU高负载问题排查

    问题现象：CPU 使用率持续 5 分钟超过 85%，交易延迟升高。

    排查步骤：先用 top 命令定位进程，再用 top -Hp 定位线程，最后用 jstack 导出线程栈。

    解决方案：如果是流量突增，先扩容到 16 个实例；如果是代码死循环，立即回滚最近一次发布。
    """
)


@pytest.fixture
def corpus_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty CORPUS_HOME (and DAGSTER_HOME under it) for one test."""
    home = tmp_path / "corpus"
    (home / "kbs").mkdir(parents=True)
    monkeypatch.setenv("CORPUS_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))
    return home


@pytest.fixture
def tiny_kb(corpus_home: Path) -> Path:
    """A KB ``tiny`` with one English markdown file and one Chinese text file."""
    kb = corpus_home / "kbs" / "tiny"
    kb.mkdir()
    (kb / "harbor.md").write_text(TINY_EN, encoding="utf-8")
    (kb / "cpu.txt").write_text(TINY_ZH, encoding="utf-8")
    (kb / "kb.yaml").write_text(
        "description: tiny test KB\n"
        "chunking:\n"
        "  plan: PARENT:RECURSIVE;CHILD:RECURSIVE\n"
        "  parent: {RECURSIVE: {max_chars: 300, overlap_chars: 40}}\n"
        "  child: {RECURSIVE: {max_chars: 120, overlap_chars: 20}}\n",
        encoding="utf-8",
    )
    return kb


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A local S3-compatible server (moto) on 127.0.0.1 for the session."""
    from tests.support.s3_server import moto_server

    with moto_server() as endpoint:
        yield endpoint


@pytest.fixture
def s3_warehouse(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """``CORPUS_WAREHOUSE`` on a new bucket of the local S3 server: ``s3://<bucket>/warehouse``."""
    from tests.support.s3_server import s3_env

    url = f"s3://{s3_env(s3_endpoint, monkeypatch)}/warehouse"
    monkeypatch.setenv("CORPUS_WAREHOUSE", url)
    return url
