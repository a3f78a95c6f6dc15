"""``kb.yaml``: the one file a user writes per knowledge base, validated before any work.

With no ``kb.yaml`` (or an empty one) every key takes its default. Unknown keys are errors
naming the key and the file: a typo must never fall back silently to a default.

    description: Operations runbooks for the trading platform
    include: ["**/*"]            # globs, relative to the KB folder
    exclude: ["drafts/**"]
    max_file_mb: 20              # larger files are recorded as failed, not read
    parsing: {max_uncompressed_mb: 50, max_memory_mb: 2048, timeout_s: 300}  # per document
    chunking:
      plan: "PARENT:STRUCTURE;CHILD:SEMANTIC,RECURSIVE"   # or "auto"
      parent: {RECURSIVE: {max_chars: 2200, overlap_chars: 180}}
      child:  {RECURSIVE: {max_chars: 800, overlap_chars: 120}}
      overrides:                 # per-document settings beat the KB's (first match wins)
        - match: "contracts/**/*.pdf"
          plan: "PARENT:RECURSIVE;CHILD:RECURSIVE"
    embedding:                   # see corpus_pipeline.embedding.settings
      model: multilingual-e5-small  # a packaged model, a local folder, or provider: openai + base_url
      batch_size: 32
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from upath import UPath

from corpus_pipeline.chunking import registry
from corpus_pipeline.chunking.plan import DEFAULT_PLAN, PipelineSettings, Plan, build_plan
from corpus_pipeline.embedding.settings import EmbeddingConfig
from corpus_pipeline.embedding.tokens import TokenCounter
from corpus_pipeline.errors import ConfigError, did_you_mean
from corpus_pipeline.globs import match_glob
from corpus_pipeline.llm.config import LLMConfig
from corpus_pipeline.quality.config import QualityConfig
from corpus_pipeline.retrieval.rerank import RerankConfig
from corpus_pipeline.retrieval.settings import SearchSettings
from corpus_pipeline.secrets import register_env_secrets
from corpus_pipeline.store.layout import check_kb_name
from corpus_pipeline.vision.config import VisionConfig

StrategySettings = dict[str, dict[str, Any]]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OverrideConfig(_Strict):
    match: str = Field(description="glob over the document's path relative to the KB folder")
    plan: str | None = None
    parent: StrategySettings | None = None
    child: StrategySettings | None = None


class ChunkingConfig(_Strict):
    plan: str = DEFAULT_PLAN
    parent: StrategySettings = Field(default_factory=dict)
    child: StrategySettings = Field(default_factory=dict)
    overrides: list[OverrideConfig] = Field(default_factory=list)


class RetentionConfig(_Strict):
    """``retention:`` — how many built strategy versions of the KB are kept (the active one
    always, counted first); older ones are retired, Parquet and LanceDB alike. A version
    that was never built does not count, and is purged once a newer one is built
    (``store.versions.failed_versions``). Not part of the version."""

    keep_versions: int = Field(2, ge=1, le=100)


class ParsingConfig(_Strict):
    """``parsing:`` — the bounds every document is parsed under (in a worker process, see
    ``corpus_pipeline.parsing.worker``); a document over one is recorded as failed with the
    key named, and the KB goes on. They shape parsing (a change re-parses what they stopped),
    not the strategy version.

    ``max_uncompressed_mb`` / ``max_uncompressed_total_mb`` bound a DOCX's zip members (each,
    and all together), read from the zip's declared sizes before anything is decompressed
    and enforced again while decompressing; ``max_memory_mb`` is the worker's data limit
    (RLIMIT_DATA: the parser's heap, its libraries included); ``timeout_s`` the wall-clock time
    per document; ``max_pages`` the pages of a PDF.
    """

    max_uncompressed_mb: float = Field(50, gt=0, le=16384)
    max_uncompressed_total_mb: float = Field(200, gt=0, le=65536)
    max_memory_mb: int = Field(2048, ge=256, le=262144)
    timeout_s: float = Field(300, gt=0, le=86400)
    max_pages: int = Field(10000, ge=1, le=1_000_000)


class KBConfig(_Strict):
    description: str = ""
    include: list[str] = Field(default_factory=lambda: ["**/*"])
    exclude: list[str] = Field(default_factory=list)
    max_file_mb: float = Field(20, gt=0, le=2048)
    parsing: ParsingConfig = Field(default_factory=ParsingConfig)
    chunking: ChunkingConfig = Field(default_factory=ChunkingConfig)
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    retention: RetentionConfig = Field(default_factory=RetentionConfig)
    vision: VisionConfig = Field(default_factory=VisionConfig)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    quality: QualityConfig = Field(default_factory=QualityConfig)  # judges chunks; not in strategy_version
    search: SearchSettings = Field(default_factory=SearchSettings)  # not in strategy_version
    rerank: RerankConfig = Field(default_factory=RerankConfig)  # not in strategy_version

    @field_validator("include", "exclude")
    @classmethod
    def _globs(cls, v: list[str]) -> list[str]:
        for g in v:
            if not g or g.startswith("/") or ".." in Path(g).parts:
                raise ValueError(f"glob {g!r} must be relative to the KB folder")
        return v


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The allowed keys of the (nested) model at ``loc``, for error messages."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = getattr(current, "model_fields", {}).get(part)
        if field is None:
            return []
        ann = field.annotation
        args = getattr(ann, "__args__", ())
        current = next((a for a in (ann, *args) if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if current is None:
            return []
    return list(getattr(current, "model_fields", {}))


def format_validation(exc: ValidationError, source: str) -> ConfigError:
    lines = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        key = ".".join(str(p) for p in loc)
        if err["type"] == "extra_forbidden":
            allowed = _fields_at(KBConfig, loc)
            lines.append(
                f"{source}: unknown key {key!r}; allowed here: {', '.join(allowed)}.{did_you_mean(loc[-1], allowed)}"
            )
        elif err["type"] == "missing":
            lines.append(f"{source}: {key} is required.")
        else:
            lines.append(f"{source}: {key} = {_quoted(err.get('input'))}: {err['msg']}.")
    return ConfigError("\n".join(lines))


class _StrictLoader(yaml.SafeLoader):
    """YAML as a configuration file needs it: a key written twice in one mapping is refused
    (PyYAML keeps the last silently, so a second ``chunking:`` would replace the first), and
    so are anchors and aliases (``*a``), which a configuration never needs and which can
    expand a few lines into gigabytes."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
            raise yaml.constructor.ConstructorError(
                None, None, "aliases (*name) are not allowed in kb.yaml; write the value out", mark
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"key {key!r} appears twice in one mapping (lines {seen[key]} and {line}); "
                    "keep one and merge what the two said",
                    key_node.start_mark,
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


#: Values quoted in configuration errors are cut to this many characters.
MAX_QUOTED_CHARS = 200


def _quoted(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= MAX_QUOTED_CHARS else text[:MAX_QUOTED_CHARS] + f"… ({len(text)} characters)"


#: A kb.yaml is a page of settings; anything far larger is a mistake or an attack.
_MAX_KB_YAML_BYTES = 1_000_000


def _bounded(text: str, limit: int = 2000) -> str:
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} characters)"


def load_kb_config(kb_dir: Path) -> KBConfig:
    """Read and validate ``<kb_dir>/kb.yaml``; defaults when it is missing or empty."""
    path = kb_dir / "kb.yaml"
    if not path.exists():
        return KBConfig()
    if not path.is_file():
        raise ConfigError(f"{path}: is not a file; kb.yaml must be a YAML file of settings")
    size = path.stat().st_size
    if size > _MAX_KB_YAML_BYTES:
        raise ConfigError(
            f"{path}: is {size:,} bytes, over the {_MAX_KB_YAML_BYTES:,} a kb.yaml may have; it holds settings, "
            "not data (questions go in questions.jsonl)"
        )
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_StrictLoader)  # a SafeLoader subclass
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid YAML: {_bounded(str(exc))}") from exc
    except RecursionError:  # [[[[...]]]] nested thousands deep
        raise ConfigError(f"{path}: not valid YAML: nested too deeply to read; kb.yaml needs a few levels") from None
    if raw is None:
        return KBConfig()
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of keys, got {type(raw).__name__}.")
    try:
        return KBConfig.model_validate(raw)
    except ValidationError as exc:
        raise format_validation(exc, str(path)) from None


@dataclass(frozen=True)
class PlanChoice:
    """The chunking of a set of documents: the KB's (``match`` None) or one override's.

    ``parent`` / ``child`` are the typed settings written for each pipeline (an override's
    merged into the KB's, key by key); ``plan`` is built from them. With ``auto`` the plan of
    each document is recommended from its features, and ``plan`` is the general default.
    """

    match: str | None
    plan: Plan
    auto: bool
    parent: PipelineSettings
    child: PipelineSettings

    def _may_use(self, strategy: str, ask: str) -> bool:
        """Whether ``strategy`` under the user's child settings calls an LLM / embeds (for
        ``auto``: the recommender may pick it, with those settings)."""
        if strategy not in self.child.by_strategy:
            return False
        cls = registry.get(strategy)
        return bool(getattr(cls, ask)(self.child.config_for(strategy)))

    @property
    def llm_enabled(self) -> bool:
        """Whether the user switched LLM splitting on for the children (what ``auto`` may pick)."""
        return self._may_use("LLM", "calls_llm")

    @property
    def calls_llm(self) -> bool:
        """Whether a document under this choice may be chunked by a strategy calling an LLM."""
        return self.plan.calls_llm or (self.auto and self.llm_enabled)

    @property
    def needs_embedder(self) -> bool:
        if self.auto:  # the recommender may pick SEMANTIC: with the user's settings for it
            return self.plan.needs_embedder or self._may_use("SEMANTIC", "needs_embedder")
        return self.plan.needs_embedder


@dataclass(frozen=True)
class KnowledgeBase:
    """A KB with its validated configuration and plans: everything chunking needs.

    ``config`` is kb.yaml as validated at the edge (it is what a version registers); the
    chunking settings in it are read once, into ``default`` and ``overrides``, and nothing
    downstream reads them again.
    """

    name: str
    path: Path
    config: KBConfig
    default: PlanChoice
    overrides: tuple[PlanChoice, ...] = ()

    @property
    def plan(self) -> Plan:
        return self.default.plan

    @property
    def auto(self) -> bool:
        return self.default.auto

    @property
    def choices(self) -> tuple[PlanChoice, ...]:
        return (self.default, *self.overrides)

    @property
    def plans(self) -> list[Plan]:
        return [c.plan for c in self.choices]

    @property
    def calls_llm(self) -> bool:
        return any(c.calls_llm for c in self.choices)

    @property
    def needs_embedder(self) -> bool:
        return any(c.needs_embedder for c in self.choices)

    def choice_for(self, rel_path: str) -> PlanChoice:
        """The first override whose glob matches the document's path, else the KB's."""
        for ov in self.overrides:
            if ov.match is not None and match_glob(rel_path, ov.match):
                return ov
        return self.default

    def plan_for(self, rel_path: str) -> tuple[Plan, str | None]:
        """The configured plan for one document and the override glob that chose it. For
        ``auto`` choices this is the default; see ``plan_for_document``."""
        choice = self.choice_for(rel_path)
        return choice.plan, choice.match

    def is_auto(self, rel_path: str) -> bool:
        return self.choice_for(rel_path).auto

    def plan_for_document(
        self,
        rel_path: str,
        text: str,
        fmt: str,
        blocks: Sequence[Any] = (),
        token_counter: TokenCounter | None = None,
    ) -> tuple[Plan, list[str]]:
        """The plan that chunks this document, and why (the recommender's reasons for
        ``auto``; empty otherwise). Deterministic: same document, same plan."""
        choice = self.choice_for(rel_path)
        if not choice.auto:
            return choice.plan, []
        from corpus_pipeline.chunking.recommend import recommend

        rec = recommend(text, fmt, blocks, token_counter=token_counter, llm_enabled=choice.llm_enabled)
        where = "auto plan"
        # the user's settings win over the recommendation's, key by key
        parent = PipelineSettings.parse(rec.parent_settings, pipeline="parent", where=where, validate=False)
        child = PipelineSettings.parse(rec.child_settings, pipeline="child", where=where, validate=False)
        chosen = build_plan(rec.snapshot, parent.merged(choice.parent), child.merged(choice.child), where=where)
        return chosen, list(rec.reasons)


def resolve_kb(kb_dir: Path) -> KnowledgeBase:
    """Load ``kb.yaml`` and build the KB's plans; raises ConfigError before any work."""
    check_kb_name(kb_dir.name)
    if not kb_dir.is_dir():
        raise ConfigError(unknown_kb_message(kb_dir))
    return kb_from_config(kb_dir, load_kb_config(kb_dir))


def require_known_kb(kbs_dir: Path, versions_dir: UPath | Path, name: str) -> str:
    """``name`` if it is a KB folder or has registered versions; else the unknown-KB error."""
    check_kb_name(name)
    if not (kbs_dir / name).is_dir() and not (versions_dir / name).is_dir():
        raise ConfigError(unknown_kb_message(kbs_dir / name))
    return name


def unknown_kb_message(kb_dir: Path) -> str:
    """No such KB: which ones there are, and the nearest name."""
    parent = kb_dir.parent
    known = (
        sorted(p.name for p in parent.iterdir() if p.is_dir() and not p.name.startswith(".")) if parent.is_dir() else []
    )
    hint = did_you_mean(kb_dir.name, known)
    listed = ", ".join(known) if known else "none yet"
    return (
        f"no knowledge base {kb_dir.name!r} (no folder {kb_dir}).{hint} Knowledge bases here: {listed}. "
        "A knowledge base is a folder of documents under $CORPUS_HOME/kbs/."
    )


def kb_from_config(kb_dir: Path, cfg: KBConfig) -> KnowledgeBase:
    """Build a KB's typed settings and plans from an already validated configuration:
    each override's settings merged into the KB's, key by key, then validated."""
    name = check_kb_name(kb_dir.name)
    # every key this KB may send is known before any call: masked in all it stores or prints
    register_env_secrets(c.api_key_env for c in (cfg.llm, cfg.vision, cfg.embedding, cfg.rerank))
    _check_model_path(cfg.embedding, kb_dir / "kb.yaml")
    where = f"{kb_dir / 'kb.yaml'}: chunking"
    ch = cfg.chunking
    parent = PipelineSettings.parse(ch.parent, pipeline="parent", where=f"{where}.parent")
    child = PipelineSettings.parse(ch.child, pipeline="child", where=f"{where}.child")
    default = PlanChoice(
        None, build_plan(_plan_text(ch.plan), parent, child, where=where), _is_auto(ch.plan), parent, child
    )
    overrides = []
    for i, ov in enumerate(ch.overrides):
        w = f"{where}.overrides[{i}]"
        ov_parent = PipelineSettings.parse(ov.parent, pipeline="parent", where=f"{w}.parent", validate=False)
        ov_child = PipelineSettings.parse(ov.child, pipeline="child", where=f"{w}.child", validate=False)
        p = parent.merged(ov_parent).validate(f"{w}.parent")
        c = child.merged(ov_child).validate(f"{w}.child")
        text = ov.plan or ch.plan
        overrides.append(PlanChoice(ov.match, build_plan(_plan_text(text), p, c, where=w), _is_auto(text), p, c))
    return KnowledgeBase(name, kb_dir, cfg, default, tuple(overrides))


def _check_model_path(embedding: EmbeddingConfig, source: Path) -> None:
    """A local model written as a path must be a sentence-transformers folder, refused here
    (before anything runs) rather than when the first batch is embedded. Names (packaged,
    ``org/name`` of the hub) are looked up when the model is opened."""
    model = embedding.model
    if embedding.provider != "sentence-transformers" or not model.startswith(("/", "./", "../", "~")):
        return
    folder = Path(model).expanduser()
    markers = ("modules.json", "config_sentence_transformers.json", "config.json")
    if not folder.is_dir() or not any((folder / m).is_file() for m in markers):
        what = (
            "does not exist"
            if not folder.exists()
            else "is not a sentence-transformers model folder (no " + (", ".join(markers) + ")")
        )
        raise ConfigError(
            f"{source}: embedding.model = {model!r} {what}; give the folder of a sentence-transformers model, "
            "a packaged model name (multilingual-e5-small, all-MiniLM-L6-v2), or provider: openai for an endpoint."
        )


def _is_auto(plan: str) -> bool:
    return plan.strip().lower() == "auto"


def _plan_text(plan: str) -> str:
    # "auto" picks a plan per document from its features (the recommender); the KB-level
    # plan object is then the general-purpose default, used until a document is seen.
    return DEFAULT_PLAN if _is_auto(plan) else plan
