"""Each quality check fails on a small literal partition built to break it, and a clean
partition passes every check; the stated exceptions (image chunks, a parent's last
chunk) are tolerated."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from corpus_pipeline.quality.checks import all_checks, declaration
from corpus_pipeline.quality.run import (
    check_child_chunks,
    check_chunk_embeddings,
    check_parent_blocks,
)
from corpus_pipeline.quality.thresholds import SizeLimits, TableThresholds, Thresholds

DOC = "Alpha beta gamma delta. Epsilon zeta eta theta. Iota kappa lambda mu. Nu xi omicron pi rho."
OTHER = "Sigma tau upsilon phi. Chi psi omega."
TEXTS = {"d1": DOC, "d2": OTHER}
THRESHOLDS = Thresholds(
    token_limit=20,
    token_slack=0,
    child=TableThresholds(default=SizeLimits(max_chars=50, min_chars=10), small_share=0.0),
    parent=TableThresholds(default=SizeLimits(max_chars=120)),
    embedding_dimension=4,
)


def _h(t: str) -> str:
    return hashlib.sha256(t.encode()).hexdigest()


def _parents() -> pd.DataFrame:
    rows = []
    for i, (doc, text) in enumerate(TEXTS.items()):
        rows.append(
            {
                "parent_id": f"p{i}",
                "parent_index": 0,
                "doc_id": doc,
                "doc_path": f"{doc}.md",
                "text": text,
                "start_offset": 0,
                "end_offset": len(text),
                "char_count": len(text),
                "token_count": len(text.split()),
                "overlap_chars": 0,
                "derived": False,
                "strategy": "RECURSIVE",
            }
        )
    return pd.DataFrame(rows)


def _child(cid: str, pid: str, doc: str, idx: int, start: int, end: int, **kw: Any) -> dict[str, Any]:
    text = kw.pop("text", TEXTS[doc][start:end])
    row = {
        "chunk_id": cid,
        "parent_id": pid,
        "chunk_index": idx,
        "chunk_type": "TEXT",
        "doc_id": doc,
        "doc_path": f"{doc}.md",
        "text": text,
        "start_offset": start,
        "end_offset": end,
        "char_count": len(text),
        "token_count": len(text.split()),
        "overlap_chars": 0,
        "derived": False,
        "strategy": "RECURSIVE",
        "text_hash": _h(text),
    }
    row.update(kw)
    return row


def _children() -> pd.DataFrame:
    return pd.DataFrame(
        [
            _child("c0", "p0", "d1", 0, 0, 47),  # "Alpha ... theta."
            _child("c1", "p0", "d1", 1, 48, 90),  # "Iota ... rho."
            _child("c2", "p1", "d2", 0, 0, 37),
            # An image chunk: derived text (a description), the span of the image in the
            # source, longer than the plan's max_chars: tolerated by the size and offset rules.
            _child(
                "c3",
                "p1",
                "d2",
                1,
                23,
                37,
                chunk_type="IMAGE",
                derived=True,
                text="[image] a diagram of the sigma to omega pipeline with three stages and arrows",
            ),
        ]
    )


def _embeddings(children: pd.DataFrame, dim: int = 4) -> pa.Table:
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(len(children), dim)).astype(np.float32)
    return pa.table(
        {
            "chunk_id": children["chunk_id"].tolist(),
            "model": ["m"] * len(children),
            "text_hash": children["text_hash"].tolist(),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vecs.reshape(-1)), dim),
        }
    )


def _texts(extra: dict[str, str] | None = None) -> pa.Table:
    docs = {**TEXTS, **(extra or {})}
    return pa.table(
        {
            "doc_id": list(docs),
            "path": [f"{d}.md" for d in docs],
            "status": ["OK"] * len(docs),
            "text": list(docs.values()),
        }
    )


def _by_name(outcomes) -> dict[str, Any]:
    return {o.name: o for o in outcomes}


def _run_all(
    parents=None, children=None, texts=None, embeddings=None, th=THRESHOLDS, asset: str | None = None
) -> dict[str, Any]:
    """The suites of every asset (or of one: GX costs ~0.1-1 s per suite)."""
    parents = _parents() if parents is None else parents
    children = _children() if children is None else children
    texts = _texts() if texts is None else texts
    embeddings = _embeddings(children) if embeddings is None else embeddings
    out = {}
    if asset in (None, "parent_blocks"):
        out.update(_by_name(check_parent_blocks(parents, texts, th)))
    if asset in (None, "child_chunks"):
        out.update(_by_name(check_child_chunks(children, parents, texts, th)))
    if asset in (None, "chunk_embeddings"):
        out.update(_by_name(check_chunk_embeddings(embeddings, children, th)))
    return out


def test_a_clean_partition_passes_every_check_and_reports_every_catalog_check():
    outcomes = _run_all()
    assert set(outcomes) == {c.name for c in all_checks()}
    failed = {n: o.message for n, o in outcomes.items() if not o.passed}
    assert failed == {}
    assert outcomes["child_token_limit"].checked == 4 and outcomes["child_token_limit"].threshold["max_tokens"] == 20
    assert outcomes["child_token_limit"].severity == "ERROR" and outcomes["child_token_limit"].blocking
    assert outcomes["child_quantiles"].severity == "WARN"


def _set(df: pd.DataFrame, row: int, **values: Any) -> pd.DataFrame:
    df = df.copy()
    for k, v in values.items():
        df.at[row, k] = v
    return df


def _vectors(values: list[list[float]], children: pd.DataFrame) -> pa.Table:
    return pa.table(
        {
            "chunk_id": children["chunk_id"].tolist()[: len(values)],
            "model": ["m"] * len(values),
            "text_hash": children["text_hash"].tolist()[: len(values)],
            "vector": pa.array(values, pa.list_(pa.float32())),
        }
    )


def _th(**changes: Any) -> Thresholds:
    return dataclasses.replace(THRESHOLDS, **changes)


OK4 = [[0.5, 0.5, 0.5, 0.5]]

BREAKERS: list[tuple[str, Callable[[], dict[str, Any]]]] = [
    ("parent_not_empty", lambda: {"parents": _set(_parents(), 1, text="  \n ")}),
    ("parent_unique", lambda: {"parents": pd.concat([_parents(), _parents().iloc[[0]]], ignore_index=True)}),
    ("parent_offsets_valid", lambda: {"parents": _set(_parents(), 0, start_offset=3)}),
    ("parent_offsets_valid", lambda: {"parents": _set(_parents(), 1, end_offset=500)}),
    ("parent_offsets_valid", lambda: {"parents": _set(_parents(), 1, char_count=7)}),
    ("parent_size_within_plan", lambda: {"th": _th(parent=TableThresholds(default=SizeLimits(max_chars=60)))}),
    (
        "parent_quantiles",
        lambda: {"th": _th(parent=TableThresholds(default=SizeLimits(max_chars=120), char_count={"p50": (100, None)}))},
    ),
    ("documents_have_parents", lambda: {"texts": _texts({"d3": "A third document with text but no parent."})}),
    ("child_not_empty", lambda: {"children": _set(_children(), 1, text="   ")}),
    ("child_unique", lambda: {"children": _set(_children(), 1, chunk_id="c0")}),
    (
        "child_unique",
        lambda: {"children": pd.concat([_children(), _children().iloc[[0]].assign(chunk_id="c9")], ignore_index=True)},
    ),
    (
        "child_duplicate_text",
        lambda: {
            "children": pd.concat(
                [_children(), _children().iloc[[0]].assign(chunk_id="c9", chunk_index=7)], ignore_index=True
            )
        },
    ),
    ("child_offsets_valid", lambda: {"children": _set(_children(), 1, start_offset=49)}),
    ("child_offsets_valid", lambda: {"children": _set(_children(), 2, start_offset=30, end_offset=20)}),
    ("child_offsets_valid", lambda: {"children": _set(_children(), 0, doc_id="unknown-doc")}),
    ("child_inside_parent", lambda: {"children": _set(_children(), 1, parent_id="missing")}),
    ("child_inside_parent", lambda: {"children": _set(_children(), 2, parent_id="p0")}),
    (
        "child_inside_parent",
        lambda: {"parents": _set(_parents(), 0, end_offset=60, text=DOC[:60], char_count=60)},
    ),
    (
        "child_size_within_plan",
        lambda: {"th": _th(child=TableThresholds(default=SizeLimits(max_chars=40, min_chars=1)))},
    ),
    ("child_size_within_plan", lambda: {"th": _th(child=TableThresholds(default=SizeLimits(max_tokens=5)))}),
    (
        "child_size_above_minimum",
        lambda: {"th": _th(child=TableThresholds(default=SizeLimits(max_chars=50, min_chars=48)))},
    ),
    ("child_token_limit", lambda: {"children": _set(_children(), 0, token_count=300)}),
    ("child_token_limit", lambda: {"children": _set(_children(), 3, token_count=21)}),  # image chunks are embedded too
    (
        "child_quantiles",
        lambda: {"th": _th(child=TableThresholds(default=SizeLimits(max_chars=50), token_count={"p95": (None, 5)}))},
    ),
    ("documents_have_chunks", lambda: {"children": _children().iloc[:2].reset_index(drop=True)}),
    ("embedding_dimension", lambda: {"embeddings": _embeddings(_children(), dim=3)}),
    ("embedding_dimension", lambda: {"embeddings": _vectors(OK4 * 3 + [[0.5, 0.5, 0.5]], _children())}),
    (
        "embedding_values_finite",
        lambda: {"embeddings": _vectors(OK4 * 3 + [[0.5, float("nan"), 0.5, 0.5]], _children())},
    ),
    ("embedding_values_finite", lambda: {"embeddings": _vectors(OK4 * 3 + [[0.0, 0.0, 0.0, 0.0]], _children())}),
    ("embeddings_cover_chunks", lambda: {"embeddings": _vectors(OK4 * 3, _children())}),
    ("embeddings_cover_chunks", lambda: {"embeddings": _embeddings(_set(_children(), 2, text_hash="stale"))}),
]


@pytest.mark.parametrize(("check", "breaker"), BREAKERS, ids=[f"{c}-{i}" for i, (c, _) in enumerate(BREAKERS)])
def test_each_check_fails_on_a_frame_built_to_break_it(check, breaker):
    outcomes = _run_all(**breaker(), asset=declaration(check).asset)
    o = outcomes[check]
    assert not o.passed, o.message
    assert o.failed >= 1 and check in o.message
    assert o.engine == ("great_expectations" if check.endswith("_quantiles") else "pandas")


def test_a_failure_names_the_partition_the_document_the_chunk_the_figure_the_limit_and_the_fix():
    children = _set(_set(_children(), 0, token_count=300), 1, token_count=40)
    o = _by_name(check_child_chunks(children, _parents(), _texts(), THRESHOLDS, "ops|p2-c2-1234abcd"))[
        "child_token_limit"
    ]
    assert (o.passed, o.failed, o.checked, o.severity, o.partition) == (False, 2, 4, "ERROR", "ops|p2-c2-1234abcd")
    assert [e["chunk_id"] for e in o.examples] == ["c0", "c1"]  # worst first
    assert o.examples[0]["token_count"] == 300 and o.examples[0]["doc_path"] == "d1.md"
    assert o.message.startswith(
        "child_token_limit on ops|p2-c2-1234abcd: 2 of 4 chunks fail the rule (no chunk over the embedding model's "
        "token limit (the model would silently truncate it)): token_count <= 20 broken by 2 chunks."
    )
    assert "Worst: d1.md chunk c0 (#0): token_count 300, limit 20." in o.message
    assert "silently truncates" in o.message and "size_unit: tokens" in o.message


def test_chunks_cut_again_to_fit_the_model_are_reported_by_a_warning():
    meta = '{"recut_from_tokens": 331, "recut_limit": 254, "recut_part": "1/2"}'
    children = _set(_set(_children().assign(metadata="{}"), 0, metadata=meta), 1, metadata=meta.replace("1/2", "2/2"))
    o = _by_name(check_child_chunks(children, _parents(), _texts(), THRESHOLDS, "kb|v"))["child_recut"]
    assert (o.passed, o.severity, o.blocks, o.failed) == (False, "WARN", False, 2)
    assert o.observed["recut_chunks"] == 1  # one chunk, cut into two parts
    assert "Worst: d1.md chunk c0 (#0): recut_from 331, limit 254." in o.message and "size_unit: tokens" in o.message


def test_the_last_chunk_of_a_parent_may_be_small_and_derived_chunks_are_exempt_from_the_plan_bound():
    th = _th(child=TableThresholds(default=SizeLimits(max_chars=50, min_chars=44)))
    # c0 (47 chars) is above 44; c1 (42) is p0's last chunk; c2 (37) is p1's only text
    # chunk but c3 (an image, derived) comes after it; derived chunks are exempt.
    outcomes = _by_name(check_child_chunks(_children(), _parents(), _texts(), th))
    assert outcomes["child_size_above_minimum"].passed
    assert outcomes["child_size_within_plan"].passed  # c3 is 78 chars: an image chunk
    assert outcomes["child_offsets_valid"].passed  # c3's text is not its source span


def test_quantile_failures_say_which_quantile_and_by_how_much():
    th = _th(
        child=TableThresholds(default=SizeLimits(max_chars=50), char_count={"p50": (None, 30), "p95": (None, 100)})
    )
    o = _by_name(check_child_chunks(_children(), _parents(), _texts(), th))["child_quantiles"]
    assert not o.passed and o.severity == "WARN" and not o.blocks
    assert "char_count p50 = 42 > 30" in o.message
    assert o.observed["char_count"] == {"p5": 37, "p50": 42, "p95": 47}


def test_severity_set_in_kb_yaml_makes_a_warning_block():
    th = _th(
        child=TableThresholds(default=SizeLimits(max_chars=50), char_count={"p50": (None, 30)}),
        severity={"child_quantiles": "ERROR"},
    )
    o = _by_name(check_child_chunks(_children(), _parents(), _texts(), th))["child_quantiles"]
    assert o.severity == "ERROR" and o.blocks


def test_an_empty_partition_fails_only_the_document_coverage():
    empty_children = _children().iloc[0:0]
    outcomes = _by_name(check_child_chunks(empty_children, _parents(), _texts(), THRESHOLDS))
    assert {n for n, o in outcomes.items() if not o.passed} == {"documents_have_chunks"}
    assert outcomes["documents_have_chunks"].failed == 2


def test_vector_columns_are_the_same_computed_a_block_at_a_time(monkeypatch):
    """``vector_columns`` converts vectors to float64 a block at a time (its memory must
    not grow with the partition): the per-row figures do not depend on the block size."""
    import numpy as np
    import pyarrow as pa

    from corpus_pipeline.quality import partition

    rows = [[3.0, 4.0], [float("nan"), 1.0], [0.0, 0.0], [float("inf"), float("-inf")], [1.0, 0.0]]
    arr = pa.FixedSizeListArray.from_arrays(pa.array(np.array(rows, dtype=np.float32).ravel()), 2)
    whole = partition.vector_columns(arr)
    monkeypatch.setattr(partition, "VECTOR_BLOCK_ROWS", 2)
    blocks = partition.vector_columns(arr)
    assert blocks.equals(whole)
    assert blocks["_nonfinite"].tolist() == [0, 1, 0, 2, 0]
    assert blocks["_norm"].tolist() == [5.0, 1.0, 0.0, 0.0, 1.0]


def test_vector_columns_of_a_chunked_sliced_column_with_a_null_are_its_rows():
    """A partition's vector column comes in chunks (one per Parquet file), a chunk may be a
    slice (an offset into its buffers), and a vector may be null: checked chunk by chunk,
    without ``combine_chunks`` (a copy of every vector), the figures are each row's."""
    import numpy as np
    import pyarrow as pa

    from corpus_pipeline.quality import partition

    rows = [[3.0, 4.0], [float("nan"), 1.0], [0.0, 0.0], [float("inf"), float("-inf")], [1.0, 0.0], [0.0, 2.0]]
    values = pa.array(np.array(rows, dtype=np.float32).ravel())
    mask = pa.array([False, False, True, False, False, False])
    arr = pa.FixedSizeListArray.from_arrays(values, 2, mask=mask)
    whole = partition.vector_columns(arr)
    chunked = pa.chunked_array([arr.slice(0, 1), arr.slice(1, 3), arr.slice(4)])
    assert [c.offset for c in chunked.chunks] == [0, 1, 4]
    split = partition.vector_columns(chunked)
    assert split.equals(whole)
    assert split["_norm"].tolist()[:2] == [5.0, 1.0] and np.isnan(split["_norm"][2])
    assert split["_norm"].tolist()[3:] == [0.0, 1.0, 2.0]
    assert partition.vector_columns(pa.chunked_array([], arr.type)).empty


def _of_docs(table: Any, docs: set[str]) -> Any:
    if isinstance(table, pd.DataFrame):
        return table[table["doc_id"].isin(docs)].reset_index(drop=True)
    return table.filter(pa.compute.is_in(table.column("doc_id"), value_set=pa.array(sorted(docs))))


_GROUPED = [
    *[(c, b) for c, b in BREAKERS if declaration(c).asset != "chunk_embeddings"],
    ("child_unique", lambda: {"children": _set(_children(), 2, chunk_id="c0")}),  # across two groups
    ("parent_unique", lambda: {"parents": _set(_parents(), 1, parent_id="p0")}),
    ("clean", dict),
]


@pytest.mark.parametrize(("check", "breaker"), _GROUPED, ids=[f"{c}-{i}" for i, (c, _) in enumerate(_GROUPED)])
def test_a_partition_checked_a_document_at_a_time_gets_the_outcomes_of_one_checked_whole(check, breaker):
    """``CheckRun`` over groups of whole documents (what a merge that streams its partition
    runs) says what the whole partition's check says: pass or fail, counts, message, examples;
    an id repeated in two groups is a duplicate too."""
    from corpus_pipeline.quality.run import CheckRun

    args = {"parents": _parents(), "children": _children(), "texts": _texts(), "th": THRESHOLDS, **breaker()}
    th = args.pop("th")
    for asset, names in (("parent_blocks", ("parents", "texts")), ("child_chunks", ("children", "parents", "texts"))):
        tables = {n: args[n] for n in names}
        whole = _by_name(_run_checks(asset, th, tables))
        run = CheckRun(asset, th, "kb|v")
        docs = sorted(
            {
                d
                for t in tables.values()
                for d in (t["doc_id"] if isinstance(t, pd.DataFrame) else t.column("doc_id").to_pylist())
            }
        )
        for doc in docs:
            run.add(**{n: _of_docs(t, {doc}) for n, t in tables.items()})
        grouped = _by_name(run.outcomes())
        for name, o in whole.items():
            g = grouped[name]
            assert (g.passed, g.failed, g.checked) == (o.passed, o.failed, o.checked), name
            if name == "child_inside_parent" and not o.passed:
                # A child naming another document's parent: in its own group that parent
                # is not there, so the rule it breaks is "parent exists" (not "same document").
                continue
            assert (g.message, g.examples) == (o.message, o.examples), name
        if check != "clean" and declaration(check).asset == asset:
            assert not grouped[check].passed


def _run_checks(asset: str, th: Thresholds, tables: dict[str, Any]) -> list[Any]:
    from corpus_pipeline.quality.run import run_checks

    return run_checks(asset, th, "kb|v", **tables)


_EMBEDDINGS_GROUPED = [
    *[(c, b) for c, b in BREAKERS if declaration(c).asset == "chunk_embeddings"],
    ("embeddings_cover_chunks", lambda: {"embeddings": _set_ids(_embeddings(_children()), 3, "c0")}),
    ("clean", dict),
]


def _set_ids(table: pa.Table, row: int, chunk_id: str) -> pa.Table:
    ids = table.column("chunk_id").to_pylist()
    ids[row] = chunk_id
    return table.set_column(table.schema.get_field_index("chunk_id"), "chunk_id", pa.array(ids))


@pytest.mark.parametrize(
    ("check", "breaker"), _EMBEDDINGS_GROUPED, ids=[f"{c}-{i}" for i, (c, _) in enumerate(_EMBEDDINGS_GROUPED)]
)
def test_embeddings_checked_a_slice_of_rows_at_a_time_get_the_outcomes_of_the_whole(check, breaker):
    """What ``embed_merge`` runs as it streams its partition: ``CheckRun`` over consecutive
    slices of the vectors, each with the same rows of the children. The outcomes are those of
    the whole table; a chunk id repeated in two slices is a duplicate; vectors missing at the
    end fail the count (its message names the last slice's count, not the partition's)."""
    from corpus_pipeline.quality.run import CheckRun

    args = {"children": _children(), **breaker()}
    children = args["children"]
    embeddings = args.get("embeddings", _embeddings(children))
    whole = _by_name(_run_checks("chunk_embeddings", THRESHOLDS, {"embeddings": embeddings, "children": children}))
    run = CheckRun("chunk_embeddings", THRESHOLDS, "kb|v")
    n = max(len(children), embeddings.num_rows)
    for start in range(0, n, 2):
        last = start + 2 >= n
        kids = children.iloc[start:] if last else children.iloc[start : start + 2]
        run.add(
            embeddings=embeddings.slice(start) if last else embeddings.slice(start, 2),
            children=kids.reset_index(drop=True),
        )
    grouped = _by_name(run.outcomes())
    counted = check == "embeddings_cover_chunks" and embeddings.num_rows != len(children)
    # A vector naming a chunk of another slice: in its own slice that chunk is not there, so
    # the second rule it breaks is "chunk exists" (not "text_hash == chunk text_hash").
    elsewhere = check == "embeddings_cover_chunks" and embeddings.column("chunk_id").to_pylist() != list(
        children["chunk_id"]
    )
    for name, o in whole.items():
        g = grouped[name]
        assert (g.passed, g.failed, g.checked) == (o.passed, o.failed, o.checked), name
        if not ((counted or elsewhere) and name == check):
            assert (g.message, g.examples) == (o.message, o.examples), name
    if check != "clean":
        assert not grouped[check].passed
    if elsewhere and embeddings.num_rows == len(children):
        assert grouped[check].observed["broken_rules"].get("chunk_id unique") == 1


def test_a_failure_says_its_rule_in_words_with_figures_that_agree():
    """Issue 41: "3 of 125 chunks fail … More than 10% of the chunks are under the minimum"
    and "(doc_id, text) unique: 219" said nothing, or contradicted their own figures."""
    th = _th(child=TableThresholds(default=SizeLimits(max_chars=50, min_chars=48), small_share=0.1))
    o = _by_name(check_child_chunks(_children(), _parents(), _texts(), th, "kb|v"))["child_size_above_minimum"]
    assert not o.passed
    applies = 1  # c0 only: c1 and c2 end their parents, c3 is an image
    assert f"{o.failed} of {o.checked} chunks fail the rule (at most a share" in o.message, o.message
    assert f"char_count >= min_chars broken by 1 of the {applies} chunks it applies to (100.0%), " in o.message
    assert "more than the 10% allowed" in o.message and "More than 10% of the chunks that have a minimum" in o.message
    dup = pd.concat([_children(), _children().iloc[[0]].assign(chunk_id="c9", chunk_index=7)], ignore_index=True)
    o = _by_name(check_child_chunks(dup, _parents(), _texts(), THRESHOLDS, "kb|v"))["child_duplicate_text"]
    assert "1 of 5 chunks fail the rule (no text repeated within one document): " in o.message, o.message
    assert "(doc_id, text) unique broken by 1 chunk." in o.message
