"""The quality suites of ``parent_blocks``, ``child_chunks`` and ``chunk_embeddings``.

Pure functions: tables in, one ``CheckOutcome`` per catalog check out. Each builds the
partition's frame(s) with the cross-table columns from ``frames`` (pandas), runs the
suite's GX expectations over it once (``engine.validate``), and folds the expectation
results into outcomes per check: counts, threshold, observed values, a few example rows
and a message that says what to change.

    check_parent_blocks(parents, texts, thresholds)
    check_child_chunks(children, parents, texts, thresholds)
    check_chunk_embeddings(embeddings, children, thresholds)

``texts`` is the ``texts`` table of ``parsed_blocks`` (doc_id, path, status, text).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pyarrow as pa

from corpus_pipeline.quality import frames as fr
from corpus_pipeline.quality.bounds import QUANTILES, TableThresholds, Thresholds
from corpus_pipeline.quality.catalog import checks_for
from corpus_pipeline.quality.engine import (
    ROW,
    Expectation,
    ExpectationResult,
    expectations_module,
    validate,
)
from corpus_pipeline.quality.outcome import MAX_EXAMPLES, CheckOutcome

_Q = {"p5": 0.05, "p50": 0.5, "p95": 0.95}
_PREVIEW = 80

Table = pa.Table | pd.DataFrame


@dataclass
class _Spec:
    """How one check reads: which frame, which columns identify a row in examples, the
    threshold to report, the noun for counts, and a hint for when it fails."""

    frame: str
    ids: list[str]
    threshold: dict[str, Any] = field(default_factory=dict)
    noun: str = "rows"
    hint: str | Callable[[list[dict[str, Any]]], str] = ""
    table_level: bool = False
    worst_first: str | None = None  # examples sorted by this column, largest first


def _gx() -> Any:
    return expectations_module()


def _e(check: str, rule: str, gx_expectation: Any) -> Expectation:
    return Expectation(check, rule, gx_expectation)


def _pair_gt(check: str, a: str, b: str, *, or_equal: bool, rule: str, mostly: float = 1.0) -> Expectation:
    return _e(
        check,
        rule,
        _gx().ExpectColumnPairValuesAToBeGreaterThanB(
            column_A=a, column_B=b, or_equal=or_equal, ignore_row_if="either_value_is_missing", mostly=mostly
        ),
    )


def _pair_eq(check: str, a: str, b: str, rule: str) -> Expectation:
    return _e(
        check,
        rule,
        _gx().ExpectColumnPairValuesToBeEqual(column_A=a, column_B=b, ignore_row_if="either_value_is_missing"),
    )


def _example(row: Mapping[str, Any], cols: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for c in cols:
        if c not in row:
            continue
        v = row[c]
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        elif isinstance(v, str) and len(v) > _PREVIEW:
            v = v[:_PREVIEW] + "…"
        elif hasattr(v, "item"):
            v = v.item()
        out[c.lstrip("_")] = None if (isinstance(v, float) and pd.isna(v)) else v
    return out


def _quantile_expectation(
    check: str, column: str, ranges: Mapping[str, tuple[float | None, float | None]]
) -> Expectation | None:
    qs = [q for q in QUANTILES if q in ranges]
    if not qs:
        return None
    return _e(
        check,
        f"{column} quantiles",
        _gx().ExpectColumnQuantileValuesToBeBetween(
            column=column,
            quantile_ranges={"quantiles": [_Q[q] for q in qs], "value_ranges": [list(ranges[q]) for q in qs]},
            allow_relative_error="lower",
        ),
    )


def _fold(
    asset: str,
    th: Thresholds,
    specs: Mapping[str, _Spec],
    results: Sequence[ExpectationResult],
    frames: Mapping[str, pd.DataFrame],
    extra_cols: Mapping[str, list[str]],
) -> list[CheckOutcome]:
    by_check: dict[str, list[ExpectationResult]] = {}
    for r in results:
        by_check.setdefault(r.check, []).append(r)
    outcomes = []
    for cd in checks_for(asset):
        spec = specs[cd.name]
        rs = by_check.get(cd.name, [])
        frame = frames[spec.frame]
        severity = th.severity_of(cd.name)
        errors = [r for r in rs if r.error]
        # Per broken rule: the rows that broke it, or (table-level rules such as a row
        # count) what was observed instead.
        broken = {
            r.rule: (r.unexpected_count if r.unexpected_count or not r.observed else f"observed {r.observed}")
            for r in rs
            if not r.success and not r.error
        }
        if spec.table_level:
            observed: dict[str, Any] = {r.rule: r.observed for r in rs}
            failed = sum(
                sum(1 for ok in _quantile_flags(r, spec.threshold) if not ok)
                for r in rs
                if not r.success and not r.error
            )
            checked = len(frame)
            rows: list[int] = []
        else:
            seen: dict[int, None] = {}
            for r in rs:
                if not r.success:
                    for i in r.rows:
                        seen.setdefault(i, None)
            rows = sorted(seen)
            # Row-level rules: the rows breaking the check's most broken rule (exact per rule;
            # every rule's own count is in observed["broken_rules"]).
            failed = max([len(rows)] + [max(1, r.unexpected_count) for r in rs if not r.success])
            checked = len(frame)
            observed = {"broken_rules": broken} if broken else {}
        passed = not broken and not errors and failed == 0
        examples = []
        if rows:
            cols = spec.ids + extra_cols.get(cd.name, [])
            lookup = frame.set_index(ROW, drop=False) if ROW in frame.columns else frame
            picked = lookup.loc[[i for i in rows if i in lookup.index]]
            if spec.worst_first and spec.worst_first in picked.columns:
                picked = picked.sort_values(spec.worst_first, ascending=False, kind="stable")
            for _, row in picked.head(MAX_EXAMPLES).iterrows():
                examples.append(_example(row.to_dict(), cols))
        if errors:
            message = f"{cd.name}: the check could not run: {errors[0].error}"
            observed["errors"] = [e.error for e in errors]
        elif passed:
            message = f"{cd.name}: ok over {checked} {spec.noun} ({cd.description})."
        else:
            what = "; ".join(f"{rule}: {n}" if n else rule for rule, n in broken.items())
            hint = spec.hint(examples) if callable(spec.hint) else spec.hint
            if spec.table_level:  # the quantile details are added by _with_quantiles
                message = f"{cd.name}: {hint}".strip()
            else:
                message = f"{cd.name}: {failed} of {checked} {spec.noun} fail ({what}). {hint}".strip()
        outcomes.append(
            CheckOutcome(
                name=cd.name,
                asset=asset,
                passed=passed,
                severity=severity,
                checked=checked,
                failed=failed if not errors else max(failed, 1),
                message=message,
                threshold=spec.threshold,
                observed=observed,
                examples=examples,
                engine="great_expectations",
            )
        )
    return outcomes


def _quantile_flags(r: ExpectationResult, threshold: Mapping[str, Any]) -> list[bool]:
    """Which quantiles of a failed quantile expectation were in range."""
    obs = r.observed or {}
    column = r.rule.split()[0]
    ranges = threshold.get(column, {})
    out = []
    for q, v in zip(obs.get("quantiles", []), obs.get("values", [])):
        name = next((k for k, x in _Q.items() if abs(x - q) < 1e-9), None)
        lo, hi = ranges.get(name, (None, None)) if name else (None, None)
        out.append((lo is None or v >= lo) and (hi is None or v <= hi))
    return out


def _run(
    suites: Mapping[str, tuple[pd.DataFrame, Sequence[Expectation | None]]], asset: str
) -> list[ExpectationResult]:
    """Validate each frame with its expectations (one GX suite per frame)."""
    results: list[ExpectationResult] = []
    for key, (frame, exps) in suites.items():
        results.extend(validate(frame, [e for e in exps if e is not None], suite_name=f"{asset}.{key}"))
    return results


def _with_row(df: pd.DataFrame) -> pd.DataFrame:
    return df.assign(**{ROW: range(len(df))})


def _quantile_threshold(tt: TableThresholds) -> dict[str, Any]:
    return {"char_count": dict(tt.char_count), "token_count": dict(tt.token_count)}


def _quantile_observed(df: pd.DataFrame) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for col in ("char_count", "token_count"):
        if col in df.columns and len(df):
            qs = df[col].quantile([_Q[q] for q in QUANTILES], interpolation="lower").tolist()
            out[col] = {q: int(v) for q, v in zip(QUANTILES, qs)}
    return out


# --------------------------------------------------------------------------- shared rules


def _span_rules(prefix: str, kind: str) -> list[Expectation]:
    gx = _gx()
    name = f"{prefix}_offsets_valid"
    return [
        _e(name, "start_offset >= 0", gx.ExpectColumnValuesToBeBetween(column="start_offset", min_value=0)),
        _pair_gt(name, "end_offset", "start_offset", or_equal=True, rule="end_offset >= start_offset"),
        # Source text is never empty; a derived chunk (an image with no alt text in a DOCX
        # or PDF) may sit at a zero-width position between two blocks.
        _pair_gt(name, "_span_end", "_span_start", or_equal=False, rule="end_offset > start_offset unless derived"),
        _e(name, "document known", gx.ExpectColumnValuesToNotBeNull(column="_doc_len")),
        _pair_gt(name, "_doc_len", "end_offset", or_equal=True, rule="end_offset <= len(document)"),
        _pair_eq(name, "text", "_source_span", rule=f"{kind} text == canonical_text[start:end]"),
        _pair_eq(name, "char_count", "_len", rule="char_count == len(text)"),
        _e(name, "overlap_chars >= 0", gx.ExpectColumnValuesToBeBetween(column="overlap_chars", min_value=0)),
        _pair_gt(name, "char_count", "overlap_chars", or_equal=True, rule="overlap_chars <= char_count"),
    ]


def _empty_rules(check: str) -> list[Expectation]:
    gx = _gx()
    return [
        _e(check, "text not null", gx.ExpectColumnValuesToNotBeNull(column="text")),
        _e(check, "text not blank", gx.ExpectColumnValuesToNotMatchRegex(column="text", regex=r"^\s*$")),
    ]


def _size_rules(check: str, tt: TableThresholds) -> list[Expectation]:
    return [
        _pair_gt(check, "_max_chars", "char_count", or_equal=True, rule="char_count <= plan max_chars"),
        _pair_gt(check, "_max_tokens", "token_count", or_equal=True, rule="token_count <= plan max_tokens + slack"),
    ]


def _size_threshold(tt: TableThresholds, th: Thresholds) -> dict[str, Any]:
    out: dict[str, Any] = {"default": tt.default.to_dict(), "token_slack": th.token_slack}
    if tt.overrides:
        out["overrides"] = {glob: lim.to_dict() for glob, lim in tt.overrides}
    out["exempt"] = "derived chunks and IMAGE / TABLE_IMAGE chunks"
    return out


def _size_hint(examples: list[dict[str, Any]]) -> str:
    return (
        "A strategy produced chunks over the bound of its plan: a chunking bug or a plan whose "
        "steps do not bound sizes. Examples show the largest offenders' ids; inspect them with "
        "`corpus lineage CHUNK_ID`."
    )


# --------------------------------------------------------------------------- parent_blocks


def check_parent_blocks(parents: Table, texts: Table | Mapping[str, str], thresholds: Thresholds) -> list[CheckOutcome]:
    """The parent_blocks suite over one partition."""
    gx = _gx()
    th, tt = thresholds, thresholds.parent
    canon = fr.canonical_texts(texts)
    df = fr.to_frame(parents)
    df = fr.add_span_columns(df, canon)
    df = fr.add_limit_columns(df, tt, th.token_slack, minimum=False)
    df = _with_row(df)
    docs = (
        _with_row(fr.add_coverage_column(fr.document_frame(texts), df))
        if not isinstance(texts, Mapping)
        else _with_row(fr.add_coverage_column(pd.DataFrame({"doc_id": list(canon), "path": None}), df))
    )
    rows = [
        *_empty_rules("parent_not_empty"),
        _e("parent_unique", "parent_id unique", gx.ExpectColumnValuesToBeUnique(column="parent_id")),
        _e(
            "parent_unique",
            "(doc_id, parent_index) unique",
            gx.ExpectCompoundColumnsToBeUnique(column_list=["doc_id", "parent_index"]),
        ),
        _e(
            "parent_unique",
            "(doc_id, start, end, text) unique",
            gx.ExpectCompoundColumnsToBeUnique(column_list=["doc_id", "start_offset", "end_offset", "text"]),
        ),
        *_span_rules("parent", "parent"),
        *_size_rules("parent_size_within_plan", tt),
        *(
            []
            if not len(df)
            else [
                _quantile_expectation("parent_quantiles", "char_count", tt.char_count),
                _quantile_expectation("parent_quantiles", "token_count", tt.token_count),
            ]
        ),
    ]
    doc_rules = [
        _e(
            "documents_have_parents",
            "parent blocks per document >= 1",
            gx.ExpectColumnValuesToBeBetween(column="_count", min_value=1),
        )
    ]
    frames = {"rows": df, "docs": docs}
    results = _run({"rows": (df, rows), "docs": (docs, doc_rules)}, "parent_blocks")
    ids = ["parent_id", "doc_path", "parent_index"]
    specs = {
        "parent_not_empty": _Spec(
            "rows",
            ids,
            {"text": "non-blank"},
            "parent blocks",
            "Empty parents come from a strategy that kept a blank span.",
        ),
        "parent_unique": _Spec(
            "rows",
            ids,
            {"unique": ["parent_id", "(doc_id, parent_index)", "(doc_id, start, end, text)"]},
            "parent blocks",
            "Duplicate parents: ids or spans repeat within the partition.",
        ),
        "parent_offsets_valid": _Spec(
            "rows",
            ids,
            {"text": "canonical_text[start_offset:end_offset] unless derived"},
            "parent blocks",
            "Offsets no longer point at the parent's text in the document's canonical text.",
        ),
        "parent_size_within_plan": _Spec(
            "rows", ids, _size_threshold(tt, th), "parent blocks", _size_hint, worst_first="char_count"
        ),
        "parent_quantiles": _Spec(
            "rows",
            [],
            _quantile_threshold(tt),
            "parent blocks",
            "The distribution of parent sizes is outside the configured ranges (kb.yaml quality.parent).",
            table_level=True,
        ),
        "documents_have_parents": _Spec(
            "docs",
            ["doc_id", "path"],
            {"min_parents_per_document": 1},
            "documents with text",
            "These documents have text but produced no parent block.",
        ),
    }
    extra = {
        "parent_size_within_plan": ["char_count", "_max_chars", "token_count", "_max_tokens"],
        "parent_offsets_valid": ["start_offset", "end_offset", "_doc_len", "char_count", "text"],
        "parent_not_empty": ["text"],
        "parent_unique": ["start_offset", "end_offset"],
        "documents_have_parents": ["_count"],
    }
    outcomes = _fold("parent_blocks", th, specs, results, frames, extra)
    return [_with_quantiles(o, df) for o in outcomes]


def _with_quantiles(o: CheckOutcome, df: pd.DataFrame) -> CheckOutcome:
    if not o.name.endswith("_quantiles"):
        return o
    observed = _quantile_observed(df)
    if not len(df):
        return CheckOutcome(
            **{**o.__dict__, "message": f"{o.name}: no rows in this partition; nothing to measure.", "observed": {}}
        )
    if not o.threshold.get("char_count") and not o.threshold.get("token_count"):
        return CheckOutcome(
            **{**o.__dict__, "message": f"{o.name}: no quantile ranges configured or derivable.", "observed": observed}
        )
    if o.passed or o.observed.get("errors"):
        return CheckOutcome(**{**o.__dict__, "observed": observed})
    out_of_range = []
    for col in ("char_count", "token_count"):
        for q, (lo, hi) in o.threshold.get(col, {}).items():
            v = observed.get(col, {}).get(q)
            if v is None:
                continue
            if lo is not None and v < lo:
                out_of_range.append(f"{col} {q} = {v} < {lo:g}")
            elif hi is not None and v > hi:
                out_of_range.append(f"{col} {q} = {v} > {hi:g}")
    hint = o.message[len(o.name) + 2 :]
    message = f"{o.name}: {', '.join(out_of_range) or 'a quantile is out of range'}. {hint}"
    return CheckOutcome(
        **{**o.__dict__, "observed": observed, "message": message, "failed": max(o.failed, len(out_of_range))}
    )


# --------------------------------------------------------------------------- child_chunks


def check_child_chunks(
    children: Table, parents: Table, texts: Table | Mapping[str, str], thresholds: Thresholds
) -> list[CheckOutcome]:
    """The child_chunks suite over one partition."""
    gx = _gx()
    th, tt = thresholds, thresholds.child
    canon = fr.canonical_texts(texts)
    df = fr.to_frame(children)
    pdf = fr.to_frame(parents, ["parent_id", "doc_id", "start_offset", "end_offset"])
    df = fr.add_span_columns(df, canon)
    df = fr.add_limit_columns(df, tt, th.token_slack, minimum=True)
    df = fr.add_parent_columns(df, pdf)
    df = _with_row(df)
    doc_frame = (
        fr.document_frame(texts)
        if not isinstance(texts, Mapping)
        else pd.DataFrame({"doc_id": list(canon), "path": None})
    )
    docs = _with_row(fr.add_coverage_column(doc_frame, df))
    mostly = max(0.0, 1.0 - tt.small_share)
    rows = [
        *_empty_rules("child_not_empty"),
        _e("child_unique", "chunk_id unique", gx.ExpectColumnValuesToBeUnique(column="chunk_id")),
        _e(
            "child_unique",
            "(doc_id, chunk_index) unique",
            gx.ExpectCompoundColumnsToBeUnique(column_list=["doc_id", "chunk_index"]),
        ),
        _e(
            "child_unique",
            "(doc_id, start, end, text) unique",
            gx.ExpectCompoundColumnsToBeUnique(column_list=["doc_id", "start_offset", "end_offset", "text"]),
        ),
        _e(
            "child_duplicate_text",
            "(doc_id, text) unique",
            gx.ExpectCompoundColumnsToBeUnique(column_list=["doc_id", "text"]),
        ),
        *_span_rules("child", "chunk"),
        _e("child_inside_parent", "parent exists", gx.ExpectColumnValuesToNotBeNull(column="_parent_start")),
        _pair_eq("child_inside_parent", "doc_id", "_parent_doc", rule="same document as the parent"),
        _pair_gt(
            "child_inside_parent", "_span_start", "_parent_start", or_equal=True, rule="start_offset >= parent start"
        ),
        _pair_gt("child_inside_parent", "_parent_end", "_span_end", or_equal=True, rule="end_offset <= parent end"),
        *_size_rules("child_size_within_plan", tt),
        _pair_gt(
            "child_size_above_minimum",
            "char_count",
            "_min_chars",
            or_equal=True,
            rule="char_count >= min_chars",
            mostly=mostly,
        ),
        _pair_gt(
            "child_size_above_minimum",
            "token_count",
            "_min_tokens",
            or_equal=True,
            rule="token_count >= min_tokens",
            mostly=mostly,
        ),
        _e("child_token_limit", "token_count not null", gx.ExpectColumnValuesToNotBeNull(column="token_count")),
        _e(
            "child_token_limit",
            f"token_count <= {th.token_limit}",
            gx.ExpectColumnValuesToBeBetween(column="token_count", max_value=th.token_limit),
        ),
        *(
            []
            if not len(df)
            else [
                _quantile_expectation("child_quantiles", "char_count", tt.char_count),
                _quantile_expectation("child_quantiles", "token_count", tt.token_count),
            ]
        ),
    ]
    doc_rules = [
        _e(
            "documents_have_chunks",
            "chunks per document >= 1",
            gx.ExpectColumnValuesToBeBetween(column="_count", min_value=1),
        )
    ]
    frames = {"rows": df, "docs": docs}
    results = _run({"rows": (df, rows), "docs": (docs, doc_rules)}, "child_chunks")
    ids = ["chunk_id", "doc_path", "chunk_index"]
    limit = th.token_limit
    min_threshold = {
        "default": {k: v for k, v in tt.default.to_dict().items() if k.startswith("min_")},
        "max_share_below": tt.small_share,
        "exempt": "each parent's last chunk (so each document's last), derived and image chunks",
    }
    specs = {
        "child_not_empty": _Spec(
            "rows", ids, {"text": "non-blank"}, "chunks", "Empty chunks waste an embedding and a search slot."
        ),
        "child_unique": _Spec(
            "rows",
            ids,
            {"unique": ["chunk_id", "(doc_id, chunk_index)", "(doc_id, start, end, text)"]},
            "chunks",
            "The same chunk appears twice: ids or spans repeat within the partition.",
        ),
        "child_duplicate_text": _Spec(
            "rows",
            ids,
            {"unique": "(doc_id, text)"},
            "chunks",
            "The same text is chunked twice in one document (repeated boilerplate, or a splitter emitting a span twice).",
        ),
        "child_offsets_valid": _Spec(
            "rows",
            ids,
            {"text": "canonical_text[start_offset:end_offset] unless derived"},
            "chunks",
            "Offsets no longer point at the chunk's text: lineage and highlighting would be wrong.",
        ),
        "child_inside_parent": _Spec(
            "rows",
            ids,
            {"span": "parent.start <= start < end <= parent.end (derived: parent exists, same document)"},
            "chunks",
            "Children must lie inside the parent block search elevates them to.",
        ),
        "child_size_within_plan": _Spec(
            "rows", ids, _size_threshold(tt, th), "chunks", _size_hint, worst_first="char_count"
        ),
        "child_size_above_minimum": _Spec(
            "rows",
            ids,
            min_threshold,
            "chunks",
            f"More than {tt.small_share:.0%} of the chunks are under the minimum: fragments retrieve poorly. Raise the plan's minimum or merge small pieces.",
        ),
        "child_token_limit": _Spec(
            "rows",
            ids,
            {"max_tokens": limit, "model_limit": "max_seq_length - 2"},
            "chunks",
            f"The embedding model silently truncates input over {limit} tokens, so the end of these chunks would never be "
            "searchable. Lower the child size (e.g. chunking.child.RECURSIVE.max_chars) or measure in tokens "
            f"(size_unit: tokens, max_tokens <= {limit}).",
            worst_first="token_count",
        ),
        "child_quantiles": _Spec(
            "rows",
            [],
            _quantile_threshold(tt),
            "chunks",
            "The distribution of chunk sizes is outside the configured ranges (kb.yaml quality.child).",
            table_level=True,
        ),
        "documents_have_chunks": _Spec(
            "docs",
            ["doc_id", "path"],
            {"min_chunks_per_document": 1},
            "documents with text",
            "These documents have text but produced no chunk: they can never be found.",
        ),
    }
    extra = {
        "child_size_within_plan": ["char_count", "_max_chars", "token_count", "_max_tokens", "strategy"],
        "child_size_above_minimum": ["char_count", "_min_chars", "token_count", "_min_tokens"],
        "child_token_limit": ["token_count", "char_count", "text"],
        "child_offsets_valid": ["start_offset", "end_offset", "_doc_len", "char_count", "text"],
        "child_inside_parent": ["parent_id", "start_offset", "end_offset", "_parent_start", "_parent_end"],
        "child_not_empty": ["text"],
        "child_unique": ["start_offset", "end_offset"],
        "child_duplicate_text": ["start_offset", "text"],
        "documents_have_chunks": ["_count"],
    }
    outcomes = _fold("child_chunks", th, specs, results, frames, extra)
    return [_with_quantiles(o, df) for o in outcomes]


# --------------------------------------------------------------------------- chunk_embeddings


def check_chunk_embeddings(embeddings: pa.Table, children: Table, thresholds: Thresholds) -> list[CheckOutcome]:
    """The chunk_embeddings suite over one partition."""
    gx = _gx()
    th = thresholds
    vec = fr.vector_columns(embeddings.column("vector"))
    df = embeddings.select(["chunk_id", "text_hash"]).to_pandas().reset_index(drop=True)
    df = pd.concat([df, vec], axis=1)
    cdf = fr.to_frame(children, ["chunk_id", "text_hash"])
    child_hash = cdf.drop_duplicates("chunk_id").set_index("chunk_id")["text_hash"]
    df = _with_row(df.assign(_child_text_hash=df["chunk_id"].map(child_hash).astype(object)))
    dim = th.embedding_dimension
    dim_rules: list[Expectation] = [
        _e("embedding_dimension", "vector not null", gx.ExpectColumnValuesToNotBeNull(column="_dim"))
    ]
    if dim is not None:
        dim_rules.append(
            _e(
                "embedding_dimension",
                f"dimension == {dim}",
                gx.ExpectColumnValuesToBeBetween(column="_dim", min_value=dim, max_value=dim),
            )
        )
    else:
        dim_rules.append(
            _e(
                "embedding_dimension",
                "one dimension",
                gx.ExpectColumnUniqueValueCountToBeBetween(column="_dim", min_value=0, max_value=1),
            )
        )
    rows = [
        *dim_rules,
        _e(
            "embedding_values_finite",
            "no NaN or inf",
            gx.ExpectColumnValuesToBeBetween(column="_nonfinite", max_value=0),
        ),
        _e(
            "embedding_values_finite",
            "norm > 0",
            gx.ExpectColumnValuesToBeBetween(column="_norm", min_value=0, strict_min=True),
        ),
        _e("embeddings_cover_chunks", "chunk_id unique", gx.ExpectColumnValuesToBeUnique(column="chunk_id")),
        _e("embeddings_cover_chunks", "chunk exists", gx.ExpectColumnValuesToNotBeNull(column="_child_text_hash")),
        _pair_eq("embeddings_cover_chunks", "text_hash", "_child_text_hash", rule="text_hash == chunk text_hash"),
        _e(
            "embeddings_cover_chunks",
            f"one vector per chunk ({len(cdf)})",
            gx.ExpectTableRowCountToEqual(value=len(cdf)),
        ),
    ]
    frames = {"rows": df}
    results = _run({"rows": (df, rows)}, "chunk_embeddings")
    ids = ["chunk_id"]
    specs = {
        "embedding_dimension": _Spec(
            "rows",
            ids,
            {"dimension": dim},
            "vectors",
            "Vectors of another size cannot be searched together: was the model changed without a new strategy version?",
        ),
        "embedding_values_finite": _Spec(
            "rows",
            ids,
            {"nonfinite": 0, "norm": "> 0"},
            "vectors",
            "NaN, infinite or all-zero vectors never match a query.",
        ),
        "embeddings_cover_chunks": _Spec(
            "rows",
            ids,
            {"vectors_per_chunk": 1, "chunks": len(cdf)},
            "vectors",
            "Every chunk needs exactly one vector for its current text.",
        ),
    }
    extra = {
        "embedding_dimension": ["_dim"],
        "embedding_values_finite": ["_nonfinite", "_norm"],
        "embeddings_cover_chunks": ["text_hash", "_child_text_hash"],
    }
    return _fold("chunk_embeddings", th, specs, results, frames, extra)


# --------------------------------------------------------------------------- entry points


def run_suite(asset: str, thresholds: Thresholds, **tables: Any) -> list[CheckOutcome]:
    """Dispatch by asset name: ``parent_blocks`` (parents, texts), ``child_chunks``
    (children, parents, texts), ``chunk_embeddings`` (embeddings, children)."""
    if asset == "parent_blocks":
        return check_parent_blocks(tables["parents"], tables["texts"], thresholds)
    if asset == "child_chunks":
        return check_child_chunks(tables["children"], tables["parents"], tables["texts"], thresholds)
    if asset == "chunk_embeddings":
        return check_chunk_embeddings(tables["embeddings"], tables["children"], thresholds)
    raise KeyError(f"no quality suite for asset {asset!r}")
