"""The Dagster webserver, started headless on the instance `corpus index` uses, lists the
registered partitions over GraphQL."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from dagster import DagsterInstance

from corpus_pipeline.instance import prepare_dagster_home
from corpus_pipeline.store.layout import Layout

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
QUERY = "{ assetNodes { assetKey { path } partitionKeysByDimension { name partitionKeys } } }"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_graphql_lists_the_kb_and_version_partitions(corpus_home):
    home = prepare_dagster_home(Layout(corpus_home))
    with DagsterInstance.from_config(str(home)) as instance:
        instance.add_dynamic_partitions("kb", ["alpha", "beta"])
        instance.add_dynamic_partitions("strategy_version", ["p2-c2-0123abcd"])
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "dagster_webserver", "-h", "127.0.0.1", "-p", str(port), "-w", "workspace.yaml"],
        cwd=REPO,
        env={**os.environ, "DAGSTER_HOME": str(home)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        data = None
        while time.monotonic() < deadline:
            try:
                req = urllib.request.Request(
                    f"http://127.0.0.1:{port}/graphql",
                    data=json.dumps({"query": QUERY}).encode(),
                    headers={"content-type": "application/json"},
                )
                with urllib.request.urlopen(req, timeout=10) as resp:
                    data = json.load(resp)["data"]
                if data and data["assetNodes"]:
                    break
            except OSError:
                time.sleep(1)
        assert data, "the webserver did not answer within 120 s"
        nodes = {n["assetKey"]["path"][-1]: n["partitionKeysByDimension"] for n in data["assetNodes"]}
        assert nodes["parsed_blocks"] == [{"name": "default", "partitionKeys": ["alpha", "beta"]}]
        assert nodes["child_chunks"] == [
            {"name": "kb", "partitionKeys": ["alpha", "beta"]},
            {"name": "strategy_version", "partitionKeys": ["p2-c2-0123abcd"]},
        ]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
