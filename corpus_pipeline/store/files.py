"""File operations on the warehouse, local or on an object store, each done one way.

A local path is a ``pathlib.Path`` (``UPath`` of a local folder is one); anything else is
an fsspec-backed ``UPath`` (``s3://``, ``gs://``, ``az://``, ``memory://``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from pathlib import Path
from typing import cast

from upath import UPath


def local_path(path: UPath | Path) -> Path | None:
    """The local path of ``path``, or None on an object store."""
    return Path(path) if isinstance(path, Path) else None


def put_bytes(path: UPath | Path, data: bytes) -> None:
    """Write ``path`` so that no reader ever sees part of it: a temporary sibling, fsynced,
    renamed over it locally; one PUT (atomic by the store) on an object store."""
    local = local_path(path)
    if local is None:
        with path.open("wb") as f:
            f.write(data)
        return
    local.parent.mkdir(parents=True, exist_ok=True)
    tmp = local.with_name(f".tmp-{local.name}-{uuid.uuid4().hex[:8]}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, local)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def put_text(path: UPath | Path, text: str) -> None:
    put_bytes(path, text.encode("utf-8"))


def remove_tree(path: UPath | Path) -> None:
    """Delete a folder and everything under it (nothing when it does not exist)."""
    local = local_path(path)
    if local is not None:
        shutil.rmtree(local, ignore_errors=True)
        return
    remote = cast(UPath, path)
    with contextlib.suppress(FileNotFoundError):
        remote.fs.rm(remote.path, recursive=True)
