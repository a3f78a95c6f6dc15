"""The data-quality checks: one function each, declared with its asset, severity and threshold.

    @check("child_token_limit", asset="child_chunks", severity="ERROR", noun="chunks",
           summary="no chunk over the embedding model's token limit",
           threshold=lambda th: {"max_tokens": th.token_limit}, figure="token_count",
           fix=lambda th: "...")
    def child_token_limit(p: Partition, th: Thresholds) -> Finding:
        rows = p.children
        return Finding.rows(rows[rows["token_count"] > th.token_limit], {...})

A check is a function over the partition's tables (``quality.partition``) returning the
rows that fail and, per rule, how many rows broke it; ``quality.run`` turns that into a
``CheckOutcome`` whose message names the partition, the worst offender (document, chunk,
its figure and the limit) and what to change. Adding a check is one decorated function.
``ERROR`` checks block: a failure stops embedding and activation of the version; ``WARN``
checks report. ``kb.yaml`` may move any check between the two (``quality.severity``).

great-expectations is the engine where it serves: the distribution checks (quantiles of
sizes) are its ``ExpectColumnQuantileValuesToBeBetween`` (``quality.gx``); the row rules are
plain pandas (milliseconds). This module imports neither: kbconfig reads the check names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from corpus_pipeline.quality.finding import Finding
from corpus_pipeline.quality.thresholds import Thresholds

if TYPE_CHECKING:
    import pandas as pd

    from corpus_pipeline.quality.partition import Partition

Severity = Literal["ERROR", "WARN"]
ASSETS = ("parent_blocks", "child_chunks", "chunk_embeddings")


Validator = Callable[["Partition", "Thresholds"], Finding]


@dataclass(frozen=True)
class CheckDef:
    """The declaration of a check: its name (the Dagster check name and the key of
    ``quality.severity``), asset, default severity, what it asserts and how it reports."""

    name: str
    asset: str
    severity: Severity
    summary: str
    noun: str
    validate: Validator
    threshold: Callable[[Thresholds], dict[str, Any]] = lambda th: {}
    ids: tuple[str, ...] = ()  # columns that identify a row in examples
    columns: tuple[str, ...] = ()  # the values that broke the rule, shown in examples
    figure: str | None = None  # the column whose value is compared with the limit
    limit: str | Callable[[Thresholds], Any] | None = None  # a column name, or the limit's value
    fix: str | Callable[[Thresholds], str] = ""
    engine: str = "pandas"
    # "rows": a rule of each row (with its document's rows), run over a partition a group of
    # documents at a time and added up; "partition": of the whole table's ``reads`` columns.
    scope: Literal["rows", "partition"] = "rows"
    reads: tuple[str, ...] = ()
    unique_across: str | None = None  # an id column whose values must be unique across groups

    @property
    def description(self) -> str:
        return self.summary

    def fix_for(self, th: Thresholds) -> str:
        return self.fix(th) if callable(self.fix) else self.fix


_CHECKS: dict[str, CheckDef] = {}


def check(
    name: str, *, asset: str, severity: Severity, summary: str, noun: str, **kw: Any
) -> Callable[[Validator], Validator]:
    """Declare the decorated function as the check ``name`` of ``asset``."""
    if asset not in ASSETS:
        raise ValueError(f"check {name}: asset must be one of {ASSETS}, got {asset!r}")

    def register(fn: Validator) -> Validator:
        if name in _CHECKS:
            raise ValueError(f"check {name} is declared twice")
        _CHECKS[name] = CheckDef(name, asset, severity, summary, noun, fn, **kw)
        return fn

    return register


def all_checks() -> tuple[CheckDef, ...]:
    return tuple(_CHECKS.values())


def checks_for(asset: str) -> list[CheckDef]:
    """The checks of one asset, in declaration order."""
    if asset not in ASSETS:
        raise KeyError(f"no quality checks for asset {asset!r}; assets with checks: {', '.join(ASSETS)}")
    return [c for c in _CHECKS.values() if c.asset == asset]


def declaration(name: str) -> CheckDef:
    try:
        return _CHECKS[name]
    except KeyError:
        raise KeyError(f"unknown check {name!r}; checks are: {', '.join(_CHECKS)}") from None


def severity_of(th: Thresholds, check: str) -> str:
    """The severity of ``check`` for a KB: kb.yaml's ``quality.severity``, else its own."""
    return th.severity.get(check, declaration(check).severity)


def names() -> list[str]:
    return list(_CHECKS)


# --------------------------------------------------------------------------- shared rules

CHILD_IDS = ("chunk_id", "doc_path", "chunk_index")
PARENT_IDS = ("parent_id", "doc_path", "parent_index")


def _blank(df: pd.DataFrame) -> pd.Series:
    """Rows whose text is missing or blank (``Partition``'s ``_blank``, computed with the spans)."""
    return df["_blank"].astype(bool)


def _duplicated(df: pd.DataFrame, cols: list[str]) -> pd.Series:
    return df.duplicated(subset=cols, keep="first") if len(df) else df.index.to_series().astype(bool)


def _earlier(df: pd.DataFrame, id_col: str, seen: Any) -> pd.Series:
    """Rows whose ``id_col`` an earlier group of the partition had (``Partition.seen``)."""
    import pandas as pd

    # (a set lookup per row: pandas' isin copies the set on every call)
    return pd.Series([v in seen for v in df[id_col].tolist()] if len(seen) else False, index=df.index, dtype=bool)


def _unique_rules(df: pd.DataFrame, id_col: str, index_col: str, seen: Any = ()) -> dict[str, pd.Series]:
    """``seen``: the ids of the partition's earlier groups of documents (``Partition.seen``)."""
    return {
        f"{id_col} unique": _duplicated(df, [id_col]) | _earlier(df, id_col, seen),
        f"(doc_id, {index_col}) unique": _duplicated(df, ["doc_id", index_col]),
        "(doc_id, start, end, text) unique": _duplicated(df, ["doc_id", "start_offset", "end_offset", "text"]),
    }


def _span_rules(df: pd.DataFrame, kind: str) -> dict[str, pd.Series]:
    src = df["_exempt"]
    source_mismatch = (~src) & df["_source_match"].notna() & (df["_source_match"] == False)  # noqa: E712
    return {
        "start_offset >= 0": df["start_offset"] < 0,
        "end_offset >= start_offset": df["end_offset"] < df["start_offset"],
        # Source text is never empty; a derived chunk (an image without alt text in a DOCX
        # or PDF) may sit at a zero-width position between two blocks.
        "end_offset > start_offset unless derived": (~src) & (df["end_offset"] <= df["start_offset"]),
        "document known": df["_doc_len"].isna(),
        "end_offset <= len(document)": df["_doc_len"].notna() & (df["end_offset"] > df["_doc_len"]),
        f"{kind} text == canonical_text[start:end]": source_mismatch,
        "char_count == len(text)": df["char_count"] != df["_len"],
        "overlap_chars >= 0": df["overlap_chars"] < 0,
        "overlap_chars <= char_count": df["overlap_chars"] > df["char_count"],
    }


def _size_rules(df: pd.DataFrame) -> dict[str, pd.Series]:
    return {
        "char_count <= plan max_chars": df["_max_chars"].notna() & (df["char_count"] > df["_max_chars"]),
        "token_count <= plan max_tokens + slack": df["_max_tokens"].notna() & (df["token_count"] > df["_max_tokens"]),
    }


def _size_threshold(side: str) -> Callable[[Thresholds], dict[str, Any]]:
    def threshold(th: Thresholds) -> dict[str, Any]:
        tt = th.child if side == "child" else th.parent
        out: dict[str, Any] = {"default": tt.default.to_dict(), "token_slack": th.token_slack}
        if tt.overrides:
            out["overrides"] = {glob: lim.to_dict() for glob, lim in tt.overrides}
        out["exempt"] = "derived chunks and IMAGE / TABLE_IMAGE chunks"
        return out

    return threshold


_SIZE_FIX = (
    "A strategy produced pieces over the bound of its plan: a chunking bug, or a plan whose steps do not bound "
    "sizes. Inspect the worst with `corpus lineage CHUNK_ID`; end the pipeline with RECURSIVE to bound sizes."
)


def _quantiles(side: str, p: Partition, th: Thresholds) -> Finding:
    from corpus_pipeline.quality.gx import quantile_finding

    tt = th.child if side == "child" else th.parent
    df = p.children if side == "child" else p.parents
    found: Finding = quantile_finding(df, {"char_count": tt.char_count, "token_count": tt.token_count})
    return found


def _quantile_threshold(side: str) -> Callable[[Thresholds], dict[str, Any]]:
    def threshold(th: Thresholds) -> dict[str, Any]:
        tt = th.child if side == "child" else th.parent
        return {"char_count": dict(tt.char_count), "token_count": dict(tt.token_count)}

    return threshold


# --------------------------------------------------------------------------- parent_blocks


@check(
    "parent_not_empty", asset="parent_blocks", severity="ERROR", noun="parent blocks",
    summary="no parent block is empty or blank", ids=PARENT_IDS, columns=("text",),
    threshold=lambda th: {"text": "non-blank"}, fix="Empty parents come from a strategy that kept a blank span.",
)  # fmt: skip
def parent_not_empty(p: Partition, th: Thresholds) -> Finding:
    return Finding.rows({"text not blank": _blank(p.parents)}, p.parents)


@check(
    "parent_unique", asset="parent_blocks", severity="ERROR", noun="parent blocks",
    summary="parent ids, (doc, index) and (doc, span, text) are unique", ids=PARENT_IDS,
    columns=("start_offset", "end_offset"),
    threshold=lambda th: {"unique": ["parent_id", "(doc_id, parent_index)", "(doc_id, start, end, text)"]},
    fix="Duplicate parents: ids or spans repeat within the partition.", unique_across="parent_id",
)  # fmt: skip
def parent_unique(p: Partition, th: Thresholds) -> Finding:
    return Finding.rows(_unique_rules(p.parents, "parent_id", "parent_index", p.seen("parent_id")), p.parents)


@check(
    "parent_offsets_valid", asset="parent_blocks", severity="ERROR", noun="parent blocks",
    summary="0 <= start < end <= len(document); text == canonical_text[start:end] unless derived; char_count == len(text)",
    ids=PARENT_IDS, columns=("start_offset", "end_offset", "_doc_len", "char_count", "text"),
    threshold=lambda th: {"text": "canonical_text[start_offset:end_offset] unless derived"},
    fix="Offsets no longer point at the parent's text in the document's canonical text.",
)  # fmt: skip
def parent_offsets_valid(p: Partition, th: Thresholds) -> Finding:
    return Finding.rows(_span_rules(p.parents, "parent"), p.parents)


@check(
    "parent_size_within_plan", asset="parent_blocks", severity="ERROR", noun="parent blocks",
    summary="every parent within the parent pipeline's size bound (derived parents exempt)", ids=PARENT_IDS,
    columns=("char_count", "_max_chars", "token_count", "_max_tokens", "strategy"), figure="char_count",
    limit="_max_chars", threshold=_size_threshold("parent"), fix=_SIZE_FIX,
)  # fmt: skip
def parent_size_within_plan(p: Partition, th: Thresholds) -> Finding:
    return Finding.rows(_size_rules(p.parents), p.parents)


@check(
    "parent_quantiles", asset="parent_blocks", severity="WARN", noun="parent blocks",
    summary="p5/p50/p95 of char_count and token_count in range", threshold=_quantile_threshold("parent"),
    fix="The distribution of parent sizes is outside the configured ranges (kb.yaml quality.parent).",
    engine="great_expectations", scope="partition", reads=("char_count", "token_count"),
)  # fmt: skip
def parent_quantiles(p: Partition, th: Thresholds) -> Finding:
    return _quantiles("parent", p, th)


@check(
    "documents_have_parents", asset="parent_blocks", severity="ERROR", noun="documents with text",
    summary="every parsed document with text yields a parent block", ids=("doc_id", "path"), columns=("_count",),
    threshold=lambda th: {"min_parents_per_document": 1}, fix="These documents have text but produced no parent block.",
)  # fmt: skip
def documents_have_parents(p: Partition, th: Thresholds) -> Finding:
    docs = p.documents
    counts: Any = p.parents.groupby("doc_id").size() if len(p.parents) else {}
    docs = docs.assign(_count=docs["doc_id"].map(counts).fillna(0).astype(int))
    return Finding.rows({"parent blocks per document >= 1": docs["_count"] < 1}, docs)


# --------------------------------------------------------------------------- child_chunks


@check(
    "child_not_empty", asset="child_chunks", severity="ERROR", noun="chunks", summary="no chunk is empty or blank",
    ids=CHILD_IDS, columns=("text",), threshold=lambda th: {"text": "non-blank"},
    fix="Empty chunks waste an embedding and a search slot.",
)  # fmt: skip
def child_not_empty(p: Partition, th: Thresholds) -> Finding:
    return Finding.rows({"text not blank": _blank(p.children)}, p.children)


@check(
    "child_unique", asset="child_chunks", severity="ERROR", noun="chunks",
    summary="chunk ids, (doc, index) and (doc, span, text) are unique", ids=CHILD_IDS,
    columns=("start_offset", "end_offset"),
    threshold=lambda th: {"unique": ["chunk_id", "(doc_id, chunk_index)", "(doc_id, start, end, text)"]},
    fix="The same chunk appears twice: ids or spans repeat within the partition.", unique_across="chunk_id",
)  # fmt: skip
def child_unique(p: Partition, th: Thresholds) -> Finding:
    return Finding.rows(_unique_rules(p.children, "chunk_id", "chunk_index", p.seen("chunk_id")), p.children)


@check(
    "child_duplicate_text", asset="child_chunks", severity="WARN", noun="chunks",
    summary="no text repeated within one document", ids=CHILD_IDS, columns=("start_offset", "text"),
    threshold=lambda th: {"unique": "(doc_id, text)"},
    fix="The same text is chunked twice in one document (repeated boilerplate, or a splitter emitting a span twice).",
)  # fmt: skip
def child_duplicate_text(p: Partition, th: Thresholds) -> Finding:
    return Finding.rows({"(doc_id, text) unique": _duplicated(p.children, ["doc_id", "text"])}, p.children)


@check(
    "child_offsets_valid", asset="child_chunks", severity="ERROR", noun="chunks",
    summary="0 <= start < end <= len(document); text == canonical_text[start:end] unless derived; char_count == len(text)",
    ids=CHILD_IDS, columns=("start_offset", "end_offset", "_doc_len", "char_count", "text"),
    threshold=lambda th: {"text": "canonical_text[start_offset:end_offset] unless derived"},
    fix="Offsets no longer point at the chunk's text: lineage and highlighting would be wrong.",
)  # fmt: skip
def child_offsets_valid(p: Partition, th: Thresholds) -> Finding:
    return Finding.rows(_span_rules(p.children, "chunk"), p.children)


@check(
    "child_inside_parent", asset="child_chunks", severity="ERROR", noun="chunks",
    summary="every chunk's parent exists, same document, span inside the parent's own span", ids=CHILD_IDS,
    columns=("parent_id", "start_offset", "end_offset", "_parent_own_start", "_parent_end"),
    threshold=lambda th: {"span": "parent own start <= start < end <= parent end (derived: parent exists, same document)"},
    fix="Children must lie inside the parent block search elevates them to.",
)  # fmt: skip
def child_inside_parent(p: Partition, th: Thresholds) -> Finding:
    df = p.children
    src = ~df["_exempt"]
    return Finding.rows(
        {
            "parent exists": df["_parent_start"].isna(),
            "same document as the parent": df["_parent_doc"].notna() & (df["doc_id"] != df["_parent_doc"]),
            "start_offset >= parent own start": src & df["_parent_own_start"].notna() & (df["start_offset"] < df["_parent_own_start"]),
            "end_offset <= parent end": src & df["_parent_end"].notna() & (df["end_offset"] > df["_parent_end"]),
        },
        df,
    )  # fmt: skip


@check(
    "child_size_within_plan", asset="child_chunks", severity="ERROR", noun="chunks",
    summary="every chunk within the child pipeline's size bound (derived and IMAGE/TABLE_IMAGE chunks exempt)",
    ids=CHILD_IDS, columns=("char_count", "_max_chars", "token_count", "_max_tokens", "strategy"),
    figure="char_count", limit="_max_chars", threshold=_size_threshold("child"), fix=_SIZE_FIX,
)  # fmt: skip
def child_size_within_plan(p: Partition, th: Thresholds) -> Finding:
    return Finding.rows(_size_rules(p.children), p.children)


def _min_threshold(th: Thresholds) -> dict[str, Any]:
    tt = th.child
    return {
        "default": {k: v for k, v in tt.default.to_dict().items() if k.startswith("min_")},
        "max_share_below": tt.small_share,
        "exempt": "each parent's last chunk (so each document's last), derived and image chunks",
    }


@check(
    "child_size_above_minimum", asset="child_chunks", severity="WARN", noun="chunks",
    summary="at most a share (quality.child.small_share) of the chunks under the plan's minimum size; each "
    "parent's last chunk, derived and image chunks exempt",
    ids=CHILD_IDS, columns=("char_count", "_min_chars", "token_count", "_min_tokens"), threshold=_min_threshold,
    fix=lambda th: (
        f"More than {th.child.small_share:.0%} of the chunks that have a minimum are under it: fragments "
        "retrieve poorly. Lower the plan's minimum, merge small pieces, or raise quality.child.small_share."
    ),
)  # fmt: skip
def child_size_above_minimum(p: Partition, th: Thresholds) -> Finding:
    df = p.children
    rules = {
        "char_count >= min_chars": df["_min_chars"].notna() & (df["char_count"] < df["_min_chars"]),
        "token_count >= min_tokens": df["_min_tokens"].notna() & (df["token_count"] < df["_min_tokens"]),
    }
    # a share of small chunks is allowed: a rule fails when more than that share of the rows it applies to break it
    applies = {rule: int((df["_min_chars"] if "chars" in rule else df["_min_tokens"]).notna().sum()) for rule in rules}
    return Finding.rows(rules, df, applies=applies, share=th.child.small_share)


@check(
    "child_token_limit", asset="child_chunks", severity="ERROR", noun="chunks",
    summary="no chunk over the embedding model's token limit (the model would silently truncate it)",
    ids=CHILD_IDS, columns=("token_count", "char_count", "text"), figure="token_count",
    limit=lambda th: th.token_limit,
    threshold=lambda th: {"max_tokens": th.token_limit, "model_limit": "max_seq_length - 2"},
    fix=lambda th: (
        f"The embedding model silently truncates input over {th.token_limit} tokens, so the end of these chunks "
        "would never be searchable. Lower the child size (e.g. chunking.child.RECURSIVE.max_chars) or measure in "
        f"tokens (size_unit: tokens, max_tokens <= {th.token_limit}), or raise quality.token_limit up to the model's."
    ),
)  # fmt: skip
def child_token_limit(p: Partition, th: Thresholds) -> Finding:
    df = p.children
    return Finding.rows(
        {"token_count not null": df["token_count"].isna(), f"token_count <= {th.token_limit}": df["token_count"] > th.token_limit},
        df,
    )  # fmt: skip


@check(
    "child_recut", asset="child_chunks", severity="WARN", noun="chunks",
    summary="no chunk had to be cut again to fit the embedding model's window", ids=CHILD_IDS,
    columns=("_recut_from", "token_count", "strategy"), figure="_recut_from", limit="_recut_limit",
    threshold=lambda th: {"recut_chunks": 0},
    fix=(
        "The child pipeline makes chunks larger than the embedding model reads; they were cut again at sentence and "
        "word boundaries so nothing is truncated, but the plan's size does not say what is indexed. Size the "
        "children in the model's tokens (size_unit: tokens, max_tokens under the model's window) or lower max_chars."
    ),
)  # fmt: skip
def child_recut(p: Partition, th: Thresholds) -> Finding:
    import json

    import pandas as pd

    df = p.children
    raw = df["metadata"] if "metadata" in df.columns else df.index.to_series().map(lambda _: "{}")
    raw = raw.fillna("{}")
    # Only the rows whose JSON mentions a recut are parsed (json.loads of every chunk's
    # metadata was ~1 s at 256k chunks); the others have none of its keys.
    cut = raw.map(lambda m: not isinstance(m, str) or "recut" in m).astype(bool)
    meta = pd.Series([{}] * len(raw), index=raw.index, dtype=object)
    if cut.any():
        meta[cut] = raw[cut].map(lambda m: json.loads(m) if isinstance(m, str) else (m or {}))
    df = df.assign(
        _recut_from=meta.map(lambda m: m.get("recut_from_tokens")).astype(float),
        _recut_limit=meta.map(lambda m: m.get("recut_limit")).astype(float),
    )
    found = Finding.rows({"parts of chunks cut again to fit the model": df["_recut_from"].notna()}, df)
    found.observed = {"recut_chunks": int(meta.map(lambda m: str(m.get("recut_part", "")).startswith("1/")).sum())}
    return found


@check(
    "child_quantiles", asset="child_chunks", severity="WARN", noun="chunks",
    summary="p5/p50/p95 of char_count and token_count in range", threshold=_quantile_threshold("child"),
    fix="The distribution of chunk sizes is outside the configured ranges (kb.yaml quality.child).",
    engine="great_expectations", scope="partition", reads=("char_count", "token_count"),
)  # fmt: skip
def child_quantiles(p: Partition, th: Thresholds) -> Finding:
    return _quantiles("child", p, th)


@check(
    "documents_have_chunks", asset="child_chunks", severity="ERROR", noun="documents with text",
    summary="every parsed document with text yields a chunk", ids=("doc_id", "path"), columns=("_count",),
    threshold=lambda th: {"min_chunks_per_document": 1},
    fix="These documents have text but produced no chunk: they can never be found.",
)  # fmt: skip
def documents_have_chunks(p: Partition, th: Thresholds) -> Finding:
    docs = p.documents
    counts: Any = p.children.groupby("doc_id").size() if len(p.children) else {}
    docs = docs.assign(_count=docs["doc_id"].map(counts).fillna(0).astype(int))
    return Finding.rows({"chunks per document >= 1": docs["_count"] < 1}, docs)


# --------------------------------------------------------------------------- chunk_embeddings


@check(
    "embedding_dimension", asset="chunk_embeddings", severity="ERROR", noun="vectors",
    summary="every vector has the model's dimension", ids=("chunk_id",), columns=("_dim",), figure="_dim",
    limit=lambda th: th.embedding_dimension, threshold=lambda th: {"dimension": th.embedding_dimension},
    fix="Vectors of another size cannot be searched together: was the model changed without a new strategy version?",
)  # fmt: skip
def embedding_dimension(p: Partition, th: Thresholds) -> Finding:
    df = p.embeddings
    rules = {"vector not null": df["_dim"].isna()}
    if th.embedding_dimension is not None:
        rules[f"dimension == {th.embedding_dimension}"] = df["_dim"].notna() & (df["_dim"] != th.embedding_dimension)
    else:
        common = df["_dim"].mode()
        rules["one dimension"] = df["_dim"].notna() & (df["_dim"] != (common.iloc[0] if len(common) else 0))
    return Finding.rows(rules, df)


@check(
    "embedding_values_finite", asset="chunk_embeddings", severity="ERROR", noun="vectors",
    summary="no NaN or infinite value, no all-zero vector", ids=("chunk_id",), columns=("_nonfinite", "_norm"),
    threshold=lambda th: {"nonfinite": 0, "norm": "> 0"}, fix="NaN, infinite or all-zero vectors never match a query.",
)  # fmt: skip
def embedding_values_finite(p: Partition, th: Thresholds) -> Finding:
    df = p.embeddings
    return Finding.rows(
        {"no NaN or inf": df["_nonfinite"] > 0, "norm > 0": df["_norm"].notna() & (df["_norm"] <= 0)}, df
    )


@check(
    "embeddings_cover_chunks", asset="chunk_embeddings", severity="ERROR", noun="vectors",
    summary="exactly one vector per child chunk, for the chunk's current text", ids=("chunk_id",),
    columns=("text_hash", "_child_text_hash"), threshold=lambda th: {"vectors_per_chunk": 1},
    fix="Every chunk needs exactly one vector for its current text.", unique_across="chunk_id",
)  # fmt: skip
def embeddings_cover_chunks(p: Partition, th: Thresholds) -> Finding:
    df = p.embeddings
    found = Finding.rows(
        {
            "chunk_id unique": _duplicated(df, ["chunk_id"]) | _earlier(df, "chunk_id", p.seen("chunk_id")),
            "chunk exists": df["_child_text_hash"].isna(),
            "text_hash == chunk text_hash": df["_child_text_hash"].notna()
            & (df["text_hash"] != df["_child_text_hash"]),
        },
        df,
    )
    if len(df) != p.child_count:
        found.broken[f"one vector per chunk ({p.child_count})"] = f"observed {len(df)}"
    return found
