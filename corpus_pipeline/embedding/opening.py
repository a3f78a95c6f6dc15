"""Opening a KB's embedder: its provider's row says which class, imported only now."""

from __future__ import annotations

import functools
import importlib

from corpus_pipeline.embedding.base import Embedder
from corpus_pipeline.embedding.providers import ProviderSpec, provider_spec
from corpus_pipeline.embedding.settings import EmbeddingConfig, embedding_config


def _construct(spec: ProviderSpec, config: EmbeddingConfig) -> Embedder:
    module, _, cls = spec.embedder.partition(":")
    factory = getattr(importlib.import_module(module), cls)
    embedder: Embedder = factory(config)
    return embedder


@functools.lru_cache(maxsize=4)
def _local(config: EmbeddingConfig) -> Embedder:
    return _construct(provider_spec(config.provider), config)


def open_embedder(config: EmbeddingConfig | str | None = None) -> Embedder:
    """The embedder of kb.yaml's ``embedding:`` section (or a bare local model name).

    Local models are loaded once per process and shared; a remote endpoint gets a fresh
    client (its key is read from the environment now), which the caller may ``close()``.
    """
    cfg = embedding_config(config)
    spec = provider_spec(cfg.provider)
    return _construct(spec, cfg) if spec.remote else _local(cfg)


def query_embedding(config: EmbeddingConfig, choice: str = "auto") -> EmbeddingConfig:
    """The embedding section that embeds a KB's queries (``search.query_backend``): a local
    model in torch may run in ONNX Runtime instead, whose fp32 vectors are torch's to float
    rounding (``embedding.settings``): ``choice`` "onnx", or "auto" on a CPU with
    onnxruntime installed once the model's export is on disk (a search never waits for the
    export, ~100 s the first time: ``prepare_query_runtime`` makes it, at a server's start).
    int8 and remote models are left as they embedded the KB."""
    if provider_spec(config.provider).remote or config.backend not in ("torch", "onnx"):
        return config
    if choice == "auto":
        choice = "onnx" if config.backend == "onnx" or (_onnx_on_cpu(config.device) and _exported(config)) else "torch"
    return config if choice == config.backend else config.model_copy(update={"backend": choice})


def prepare_query_runtime(config: EmbeddingConfig, choice: str = "auto") -> bool:
    """Export (once per machine) and load the ONNX model that ``query_embedding`` picks for
    "auto" when only its export is missing; True when it did (the searchers opened before
    should ``refresh_query_runtime``)."""
    if choice != "auto" or provider_spec(config.provider).remote or config.backend != "torch":
        return False
    if not _onnx_on_cpu(config.device) or _exported(config):
        return False
    open_embedder(config.model_copy(update={"backend": "onnx"}))  # (exports, then stays loaded: ``_local``)
    return True


def _exported(config: EmbeddingConfig) -> bool:
    from corpus_pipeline.embedding.models import require_model_folder
    from corpus_pipeline.embedding.onnx_backend import export_ready

    try:
        return export_ready(require_model_folder(config.model))
    except Exception:  # noqa: BLE001 - no folder: torch will say so when it loads
        return False


def _onnx_on_cpu(device: str) -> bool:
    import importlib.util

    from corpus_pipeline.embedding.devices import resolve_device

    try:
        return resolve_device(device) == "cpu" and importlib.util.find_spec("onnxruntime") is not None
    except Exception:  # noqa: BLE001 - an unusable device: torch says so when it loads
        return False
