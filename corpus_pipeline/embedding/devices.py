"""Which torch device ``device:`` means (``embedding.device``, ``rerank.device``): the local
model, its ONNX backend and the local reranker all ask here."""

from __future__ import annotations

from typing import Any

from corpus_pipeline.errors import ModelError


def resolve_device(device: str = "auto", torch_module: Any = None) -> str:
    """The torch device for ``embedding.device``: ``auto`` is ``cuda`` when a GPU is
    visible, else ``mps`` (Apple), else ``cpu``; an explicit GPU that is not there is an
    error naming what torch sees."""
    if torch_module is None:
        import torch as torch_module
    cuda = bool(torch_module.cuda.is_available())
    if device == "auto":
        if cuda:
            return "cuda"
        mps = getattr(getattr(torch_module, "backends", None), "mps", None)
        return "mps" if mps is not None and mps.is_available() else "cpu"
    if device.startswith("cuda"):
        count = int(torch_module.cuda.device_count()) if cuda else 0
        index = int(device.partition(":")[2] or 0)
        if index >= count:
            raise ModelError(
                f"embedding.device = {device!r}, but torch sees {count} CUDA device(s); "
                "use 'auto' or 'cpu' (or install a CUDA build of torch)."
            )
    return device
