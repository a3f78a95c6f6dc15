"""Search filters on a hand-made LanceDB table: each filter restricts both channels before
their top k (a chunk the unfiltered top k never reaches is found), values are SQL literals
whatever they hold, globs mean what kb.yaml's include/exclude mean, bad keys are refused."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from corpus_pipeline.errors import ConfigError
from corpus_pipeline.globs import match_glob
from corpus_pipeline.retrieval import Searcher, SearchFilters, SearchSettings
from corpus_pipeline.retrieval.filters import path_regex
from corpus_pipeline.store.lance import open_search_table, write_search_table
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.parquet import write_partition

from .tiny_index import FakeEmbedder

QUERY = "disk alarm threshold"
QVEC = [1.0, 0.0, 0.0, 0.0]
# 12 strong decoys (close vectors, the query's words) and, far below them, one chunk per
# filter kind: the unfiltered top 5 of each channel holds none of the targets. Fillers (far
# from the query) keep the table's mean vector, the vector gate's baseline, below the targets.
DECOYS = [
    (f"d{i}", f"notes/n{i}.md", "Ops > Alarms", "TEXT", "disk alarm threshold disk alarm", [1.0, 0.05 * i, 0, 0])
    for i in range(12)
]
FILLERS = [
    (f"f{i}", f"misc/f{i}.md", "Misc", "TEXT", "unrelated filler about cooking", [0, 0, 1, 0.1 * i]) for i in range(30)
]
TARGETS = [
    # chunk, path, section, type, text, vector
    ("t_path", "guides/install/ports.md", "Other", "TEXT", "the disk alarm threshold and many other words " * 3),
    ("t_pdf", "manual.pdf", "Other", "TEXT", "a disk alarm threshold among many other words " * 3),
    ("t_sec", "notes/x.md", "Guide > Install > Ports", "TEXT", "disk alarm threshold plus other words here " * 3),
    ("t_img", "notes/y.md", "Other", "IMAGE", "picture of a disk alarm threshold with words " * 3),
    ("t_odd", "scan.txt", "Other", "TEXT", "scanned disk alarm threshold page and other words " * 3),
    ("t_near", "guides/install.md", "Guide > Installation", "TEXT", "disk alarm threshold and unrelated words " * 3),
]


def _build(tmp_path, extra=()):
    chunks = [*DECOYS, *FILLERS, *[(*t, [0.8, 0.6, 0.0, 0.0]) for t in TARGETS], *extra]
    rows = []
    for i, (cid, path, section, ctype, text, _) in enumerate(chunks):
        rows.append(
            {
                "chunk_id": cid,
                "parent_id": f"P{cid}",
                "chunk_index": i,
                "chunk_type": ctype,
                "kb": "ops",
                "strategy_version": "v1",
                "doc_id": path,
                "doc_path": path,
                "text": text,
                "start_offset": 0,
                "end_offset": len(text),
                "char_count": len(text),
                "token_count": 10,
                "section_path": section,
                "page_num": None,
                "block_index": i,
                "strategy": "RECURSIVE",
                "metadata": "{}",
            }
        )
    vectors = np.asarray([c[5] for c in chunks], dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    layout = Layout(tmp_path)
    write_search_table(layout, "ops", "v1", pa.Table.from_pylist(rows), vectors)
    # The documents table: scan.txt is a PDF by its content (as discovery sniffs it).
    write_partition(
        layout.partition_dir("documents", "ops"),
        pa.Table.from_pylist(
            [{"path": p, "format": "pdf" if p == "scan.txt" else None} for p in sorted({c[1] for c in chunks})]
        ),
    )
    return layout


def _searcher(layout, **settings):
    s = SearchSettings(**{"vector_top_k": 5, "keyword_top_k": 5, "candidate_top_k": 10, **settings})
    return Searcher(
        layout,
        "ops",
        "v1",
        embedding="fake",
        settings=s,
        parents_file=layout.home / "none.parquet",
        embedder=FakeEmbedder({QUERY: QVEC}),
    )


@pytest.fixture
def layout(tmp_path):
    return _build(tmp_path)


@pytest.mark.parametrize(
    ("filters", "target"),
    [
        ({"path": "guides/*/*.md"}, "t_path"),
        ({"format": ["pdf"], "path": "manual*"}, "t_pdf"),
        ({"section": "Guide > Install"}, "t_sec"),
        ({"chunk_type": ["image"]}, "t_img"),
    ],
)
def test_a_filter_restricts_both_channels_before_their_top_k(layout, filters, target):
    s = _searcher(layout)
    unfiltered = s.candidates(QUERY)
    assert unfiltered and all(h.chunk_id.startswith("d") for h in unfiltered)  # no target in either top 5
    hits = s.candidates(QUERY, filters=SearchFilters(**filters))
    assert [h.chunk_id for h in hits] == [target]
    assert set(hits[0].channels) == {"vector", "keyword"}  # each channel found it among the filtered rows
    result = s.search(QUERY, filters=SearchFilters(**filters))
    assert [r.hits[0].chunk_id for r in result.results] == [target]
    assert result.to_dict()["filters"] == SearchFilters(**filters).to_dict()


def test_the_format_is_the_documents_one_where_the_content_decided_it(layout):
    s = _searcher(layout)
    pdfs = {h.chunk_id for h in s.candidates(QUERY, filters=SearchFilters(format=["pdf"]))}
    assert pdfs == {"t_pdf", "t_odd"}  # scan.txt is a PDF by content (the documents table)
    texts = {h.chunk_id for h in s.candidates(QUERY, filters=SearchFilters(format=["txt"]))}
    assert texts == set()  # ... so not a text file
    md = {
        h.chunk_id
        for h in _searcher(layout, vector_top_k=50, keyword_top_k=50, candidate_top_k=50).candidates(
            QUERY, filters=SearchFilters(format=["md"])
        )
    }
    assert md == {c[0] for c in DECOYS} | {"t_path", "t_sec", "t_img", "t_near"}  # fillers: no keyword, gated


def test_the_section_prefix_counts_whole_segments(layout):
    s = _searcher(layout)
    assert {h.chunk_id for h in s.candidates(QUERY, filters=SearchFilters(section="Guide > Install"))} == {"t_sec"}
    got = {h.chunk_id for h in s.candidates(QUERY, filters=SearchFilters(section="Guide"))}
    assert got == {"t_sec", "t_near"}
    exact = s.candidates(QUERY, filters=SearchFilters(section="Guide > Install > Ports"))
    assert [h.chunk_id for h in exact] == ["t_sec"]


def test_filters_combine_with_and(layout):
    s = _searcher(layout)
    assert s.candidates(QUERY, filters=SearchFilters(path="guides/**", chunk_type=["IMAGE"])) == []
    both = s.candidates(QUERY, filters=SearchFilters(path="guides/**", section="Guide > Installation"))
    assert [h.chunk_id for h in both] == ["t_near"]


# ---------------------------------------------------------------- values are literals

ODD = [
    ("q1", "it's 100%_done.md", "Q&A > 50% off_sale", "TEXT", "disk alarm threshold odd name", [0.2, 0.9, 0.1, 0]),
    ("q2", "it's 100xxdone.md", "Q&A > 50xx offXsale", "TEXT", "disk alarm threshold near name", [0.2, 0.9, 0.1, 0]),
    ("q3", "back\\slash [1].md", "a\\b", "TEXT", "disk alarm threshold slash", [0.2, 0.9, 0.1, 0]),
]


@pytest.fixture
def odd_layout(tmp_path):
    return _build(tmp_path, ODD)


def _ids(s, **filters):
    return {h.chunk_id for h in s.candidates(QUERY, filters=SearchFilters(**filters))}


def test_quotes_percent_and_underscore_are_matched_as_themselves(odd_layout):
    s = _searcher(odd_layout, vector_top_k=50, keyword_top_k=50, candidate_top_k=50)
    assert _ids(s, path="it's 100%_done.md") == {"q1"}  # not q2: % and _ are no wildcards
    assert _ids(s, section="Q&A > 50% off_sale") == {"q1"}
    assert _ids(s, section="Q&A") == {"q1", "q2"}
    assert _ids(s, path="back\\slash [[]1].md") == {"q3"}  # [[] is a literal "[" in a glob
    assert _ids(s, section="a\\b") == {"q3"}


@pytest.mark.parametrize(
    "filters",
    [
        {"path": "x' OR '1'='1"},
        {"path": "*') OR true OR regexp_like(doc_path, '"},
        {"section": "' OR 1=1 --"},
        {"section": "x%' OR section_path LIKE '%"},
    ],
)
def test_an_injection_looking_value_selects_nothing(odd_layout, filters):
    s = _searcher(odd_layout, vector_top_k=50, keyword_top_k=50, candidate_top_k=50)
    f = SearchFilters(**filters)
    assert s.candidates(QUERY, filters=f) == []  # a literal that no path or section equals
    assert s.where(f) is not None and s.where(f).count("'") % 2 == 0


def test_path_globs_select_what_kbyaml_globs_select(tmp_path):
    paths = ["a.md", "guides/a.md", "guides/x/y/b.md", "guides/a.pdf", "top.pdf", "g/uides.md", "a.MD", "r[1].md"]
    extra = [(f"p{i}", p, "S", "TEXT", "disk alarm threshold", [0.5, 0.5, 0.1 * i, 0]) for i, p in enumerate(paths)]
    layout = _build(tmp_path, extra)
    table = open_search_table(layout, "ops", "v1")
    patterns = ["*.md", "guides/**/*.md", "**/*.md", "*.pdf", "guides/*", "?.md", "[ag]*.md", "[!g]*", "r[[]1].md", "*"]
    for pattern in patterns:
        where = f"regexp_like(doc_path, '{path_regex(pattern)}')"
        got = {r["doc_path"] for r in table.search().where(where).select(["doc_path"]).limit(1000).to_list()}
        every = {*paths, *(c[1] for c in [*DECOYS, *FILLERS, *TARGETS])}
        want = {p for p in every if match_glob(p, pattern)}
        assert got == want, pattern


# ---------------------------------------------------------------- refused


def test_an_unknown_filter_key_is_refused_naming_it_and_the_allowed_keys():
    with pytest.raises(ConfigError, match=r"unknown search filter 'paths' = 'x'; allowed: path, format, section"):
        SearchFilters(paths="x")
    with pytest.raises(ConfigError, match="unknown search filter 'doc_type'"):
        SearchFilters.from_mapping({"doc_type": "pdf"})


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"format": ["pdf", "odt"]},
            r"search filter format = \['pdf', 'odt'\]: unknown format 'odt'; allowed: markdown",
        ),
        ({"chunk_type": ["TABLE"]}, r"unknown chunk type 'TABLE'; allowed: TEXT, PROPOSITION"),
        ({"chunk_type": ["TEXT') OR (1=1"]}, r"unknown chunk type \"TEXT'\) OR \(1=1\""),  # closed sets
        ({"format": ["pdf' OR '1'='1"]}, r"unknown format"),
        ({"score_threshold": 1.5}, r"search filter score_threshold = 1.5: Input should be less than or equal to 1"),
        ({"score_threshold": -0.1}, r"score_threshold = -0.1"),
        ({"path": "a\x00b"}, r"search filter path = 'a\\x00b': contains a NUL"),
    ],
)
def test_a_bad_filter_value_is_refused_naming_key_and_value(values, message):
    with pytest.raises(ConfigError, match=message):
        SearchFilters(**values)


def test_aliases_and_case_are_normalised_and_empty_filters_filter_nothing(layout):
    f = SearchFilters(format=["MD", "txt", "markdown"], chunk_type=["image", "Text"])
    assert f.format == ["markdown", "text"] and f.chunk_type == ["IMAGE", "TEXT"]
    assert SearchFilters(path="  ", format=[], chunk_type=None).where() is None
    assert SearchFilters.from_mapping({}) is None and SearchFilters.from_mapping(None) is None
    s = _searcher(layout)
    plain = [(h.chunk_id, h.score) for h in s.candidates(QUERY)]
    assert [(h.chunk_id, h.score) for h in s.candidates(QUERY, filters=SearchFilters())] == plain
    assert [(h.chunk_id, h.score) for h in s.candidates(QUERY, filters=SearchFilters(score_threshold=0.0))] == plain
