"""A local S3-compatible server for the object-store tests: moto's server mode (from PyPI),
started on 127.0.0.1 on a free port, one per test session.

``s3_env`` gives the environment a process needs to use it (the ``AWS_*`` variables that
boto, s3fs, pyarrow and LanceDB all read) and a fresh bucket per test.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    """A moto S3 server on 127.0.0.1; yields its endpoint URL."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        t0 = time.monotonic()
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            if proc.poll() is not None:
                raise RuntimeError(f"moto server exited with {proc.returncode}")
            assert time.monotonic() - t0 < 30, "moto server did not answer within 30 s"
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)


ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}


def environment(endpoint: str) -> dict[str, str]:
    return {**ENV, "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint}


def new_bucket(endpoint: str) -> str:
    import boto3

    name = f"corpus-{uuid.uuid4().hex[:12]}"
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=ENV["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=ENV["AWS_SECRET_ACCESS_KEY"],
        region_name=ENV["AWS_REGION"],
    )
    client.create_bucket(Bucket=name)
    return name


def s3_env(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point this process at the server (``AWS_*``) and return a new bucket's name."""
    import s3fs

    for k, v in environment(endpoint).items():
        monkeypatch.setenv(k, v)
    s3fs.S3FileSystem.clear_instance_cache()  # it caches instances made with other settings
    return new_bucket(endpoint)
