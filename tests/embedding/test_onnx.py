"""``embedding.backend: onnx | onnx-int8``: the kb.yaml key, the execution providers, the errors,
a real export of a packaged model (all-MiniLM-L6-v2: the small one; e5-small takes the same path,
measured in benchmarks/embedders) with vectors against torch's, and a KB indexed and searched
with the ONNX backend through Dagster."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from corpus_pipeline.embedding import EmbeddingConfig
from corpus_pipeline.embedding import onnx_backend as ob
from corpus_pipeline.embedding.models import MINILM, require_model_folder
from corpus_pipeline.errors import ConfigError, ModelError
from corpus_pipeline.kbconfig import resolve_kb

pytest.importorskip("onnxruntime")

TEXTS = [
    "Harbor stores container images and scans them for vulnerabilities.",
    "Roll back a release with the previous image tag, then watch the error rate for ten minutes.",
    "x",
    "  leading and trailing spaces  ",
    "CPU 使用率过高时，先查看进程列表。" * 6,
    "word " * 400,  # over the window: truncated the same way
]


def _torch(cuda: bool, count: int = 0) -> SimpleNamespace:
    return SimpleNamespace(
        cuda=SimpleNamespace(is_available=lambda: cuda, device_count=lambda: count),
        backends=SimpleNamespace(mps=SimpleNamespace(is_available=lambda: False)),
    )


# ------------------------------------------------------------------------------ the key


def test_backend_key_defaults_to_torch_and_takes_the_three_values():
    assert EmbeddingConfig().backend == "torch"
    for b in ("torch", "onnx", "onnx-int8"):
        assert EmbeddingConfig(backend=b).backend == b


def test_a_bad_backend_in_kb_yaml_is_refused_naming_the_key(tmp_path):
    kb = tmp_path / "kb1"
    kb.mkdir()
    (kb / "kb.yaml").write_text("embedding:\n  backend: tensorrt\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"embedding\.backend") as err:
        resolve_kb(kb)
    assert "tensorrt" in str(err.value) and "onnx-int8" in str(err.value)


def test_a_backend_with_an_endpoint_is_refused(tmp_path):
    kb = tmp_path / "kb1"
    kb.mkdir()
    (kb / "kb.yaml").write_text("embedding:\n  provider: openai\n  model: m\n  backend: onnx\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"embedding\.backend = 'onnx' runs a local model"):
        resolve_kb(kb)


def test_fp32_onnx_shares_torch_vectors_int8_does_not():
    torch_cfg, onnx_cfg, int8 = (EmbeddingConfig(backend=b) for b in ("torch", "onnx", "onnx-int8"))
    assert onnx_cfg.vector_key == torch_cfg.vector_key == "multilingual-e5-small"
    assert onnx_cfg.version_input() == torch_cfg.version_input() == {}
    assert int8.vector_key == "multilingual-e5-small#onnx-int8-pc"  # per-channel int8's own vectors
    assert int8.version_input() == {"backend": "onnx-int8-pc"}


# ------------------------------------------------------------------------------ providers


def test_providers_follow_the_torch_device_logic():
    cpu = [ob.CPU]
    both = [ob.CUDA, ob.CPU]
    assert ob.onnx_providers("auto", both, _torch(cuda=True, count=1)) == [(ob.CUDA, {"device_id": 0}), ob.CPU]
    assert ob.onnx_providers("cuda:1", both, _torch(cuda=True, count=2)) == [(ob.CUDA, {"device_id": 1}), ob.CPU]
    assert ob.onnx_providers("auto", both, _torch(cuda=False)) == cpu
    assert ob.onnx_providers("cpu", both, _torch(cuda=True, count=1)) == cpu
    with pytest.raises(ModelError, match="torch sees 0 CUDA device"):
        ob.onnx_providers("cuda", both, _torch(cuda=False))


def test_a_gpu_without_the_cuda_provider_runs_on_the_cpu_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger=ob.__name__):
        assert ob.onnx_providers("auto", [ob.CPU], _torch(cuda=True, count=1)) == [ob.CPU]
    assert "onnxruntime-gpu" in caplog.text


def test_this_machine_runs_onnx_on_the_cpu():
    import onnxruntime

    assert ob.onnx_providers("auto", onnxruntime.get_available_providers()) == [ob.CPU]


# ------------------------------------------------------------------------------ errors


def test_missing_onnxruntime_names_the_folder_and_the_fix(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(ModelError) as err:
        ob.require_onnxruntime(tmp_path / "my-model")
    msg = str(err.value)
    assert str(tmp_path / "my-model") in msg and "pip install 'corpus-pipeline[onnx]'" in msg
    assert "embedding.backend: torch" in msg


def test_a_failed_export_names_the_folder_and_leaves_nothing(tmp_path):
    final = tmp_path / "cache" / "m-onnx-x1"

    def broken(tmp: Path) -> None:
        (tmp / "model.onnx").write_bytes(b"half")
        raise RuntimeError("unsupported operator aten::frobnicate")

    with pytest.raises(ModelError, match=r"cannot export to onnx the embedding model at .*my-model.*frobnicate"):
        ob._atomic_build(final, broken, "Export to ONNX", tmp_path / "my-model")
    assert not final.exists() and list((tmp_path / "cache").iterdir()) == []


def test_the_source_key_follows_the_folder_content(tmp_path):
    src = tmp_path / "model"
    src.mkdir()
    (src / "config.json").write_text("{}", encoding="utf-8")
    (src / "model.safetensors").write_bytes(b"weights-1")
    k1 = ob.source_key(src)
    assert ob.source_key(src) == k1
    (src / "onnx").mkdir()
    (src / "onnx" / "model.onnx").write_bytes(b"not read")
    assert ob.source_key(src) == k1
    (src / "model.safetensors").write_bytes(b"weights-2")
    assert ob.source_key(src) != k1
    assert ob.export_dir(src, int8=True, cache_root=tmp_path).name.endswith("-x1-int8-pc")


# ------------------------------------------------------------------------------ a real export


@pytest.fixture(scope="session")
def onnx_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """all-MiniLM-L6-v2 exported (fp32 and int8) once for the session, in its own cache root."""
    root = tmp_path_factory.mktemp("onnx-models")
    folder = require_model_folder(MINILM)
    ob.onnx_sentence_transformer(folder, device="cpu", int8=True, cache_root=root)
    return root


def _st_vectors(model, texts):
    return np.asarray(model.encode(texts, batch_size=4, normalize_embeddings=True, show_progress_bar=False))


@pytest.mark.slow
def test_export_is_cached_content_keyed_and_its_vectors_match_torch(onnx_cache):
    from sentence_transformers import SentenceTransformer

    folder = require_model_folder(MINILM)
    fp32_dir = ob.export_dir(folder, int8=False, cache_root=onnx_cache)
    int8_dir = ob.export_dir(folder, int8=True, cache_root=onnx_cache)
    assert (fp32_dir / "model.onnx").is_file() and (fp32_dir / "onnx-source.json").is_file()
    assert (int8_dir / "model.onnx").stat().st_size < (fp32_dir / "model.onnx").stat().st_size / 3
    assert not [p for p in onnx_cache.iterdir() if p.name.startswith(".")]  # no temporary folder left
    mtime = (fp32_dir / "model.onnx").stat().st_mtime_ns
    t0 = time.perf_counter()
    fp32 = ob.onnx_sentence_transformer(folder, device="auto", int8=False, cache_root=onnx_cache)
    int8 = ob.onnx_sentence_transformer(folder, device="auto", int8=True, cache_root=onnx_cache)
    assert time.perf_counter() - t0 < 30  # loaded, not exported again
    assert (fp32_dir / "model.onnx").stat().st_mtime_ns == mtime
    assert ob.session_providers(fp32) == [ob.CPU]
    reference = _st_vectors(SentenceTransformer(str(folder), device="cpu"), TEXTS)
    cos_fp32 = np.sum(_st_vectors(fp32, TEXTS) * reference, axis=1)
    cos_int8 = np.sum(_st_vectors(int8, TEXTS) * reference, axis=1)
    assert cos_fp32.min() > 0.9999, cos_fp32
    # close, but materially different (MiniLM loses more to int8 than e5: ~0.86 on a repeated word): its
    # own vector key
    assert 0.8 < cos_int8.min() < 0.9999, cos_int8


@pytest.mark.slow
def test_a_kb_indexed_and_searched_with_the_onnx_backend(onnx_cache, tiny_kb, corpus_home, monkeypatch):
    from dagster import instance_for_test

    from assets.definitions import build_definitions
    from assets.runner import index_kb
    from corpus_pipeline.retrieval import search_kb
    from corpus_pipeline.store.layout import Layout
    from corpus_pipeline.store.versions import register_version

    monkeypatch.setenv("CORPUS_MODEL_CACHE", str(onnx_cache))
    yaml_text = (tiny_kb / "kb.yaml").read_text(encoding="utf-8")
    (tiny_kb / "kb.yaml").write_text(
        yaml_text + f"embedding:\n  model: {MINILM}\n  backend: onnx\n  batch_size: 8\n", encoding="utf-8"
    )
    layout = Layout(corpus_home)
    kb = resolve_kb(layout.kb_dir("tiny"))
    assert kb.config.embedding.backend == "onnx"
    version = register_version(layout, kb)
    with instance_for_test() as instance:
        summary = index_kb(build_definitions(str(layout.home)), instance, layout, kb, version, say=lambda s: None)
    assert summary.status == "ok", summary.error
    assert summary.child_chunks > 0
    result = search_kb(
        layout, "tiny", version, "which port does the web console listen on", embedding=kb.config.embedding
    )
    assert result.results and "8443" in result.results[0].text
