"""The typed read API (``store.reader``) over a real index, and parents read on demand.

A KB of 12 documents is indexed by a real Dagster run with one Parquet file per document,
so a read that knows its documents can be seen opening only their files. What the reader
returns is what the index wrote (the records of ``models.py``), the same with and without
the document hint; an open searcher holds no parent until a search asks for some, and
never more than its cache's bound.
"""

from __future__ import annotations

import pytest
from dagster import instance_for_test

from assets.definitions import build_definitions
from assets.runner import index_kb
from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.models import Block, Chunk, Document, DocumentText, ParentBlock
from corpus_pipeline.retrieval import Searcher
from corpus_pipeline.retrieval import lookup as lookup_module
from corpus_pipeline.store import parquet
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.reader import SnapshotReader, reader
from corpus_pipeline.store.versions import active_version, register_version

pytestmark = pytest.mark.slow

TOPICS = ["backups", "restores", "replication", "encryption", "quotas", "alerts"]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Layout:
    home = tmp_path_factory.mktemp("reader")
    kb = home / "kbs" / "ops"
    kb.mkdir(parents=True)
    (kb / "kb.yaml").write_text(
        "chunking:\n  plan: PARENT:RECURSIVE;CHILD:RECURSIVE\n"
        "  parent: {RECURSIVE: {max_chars: 300, overlap_chars: 0}}\n"
        "  child: {RECURSIVE: {max_chars: 120, overlap_chars: 20}}\n"
    )
    for i in range(12):
        topic = TOPICS[i % len(TOPICS)]
        paras = [
            f"Runbook {i} on {topic}, step {j}: check the {topic} service and write down what it says."
            for j in range(6)
        ]
        (kb / f"doc{i:02d}.md").write_text(f"# {topic.title()} {i}\n\n" + "\n\n".join(paras) + "\n")
    layout = Layout(home)
    mp = pytest.MonkeyPatch()
    mp.setattr(parquet, "DOCS_PER_FILE", 1)  # a Parquet file per document
    try:
        with instance_for_test() as instance:
            cfg = resolve_kb(layout.kb_dir("ops"))
            summary = index_kb(
                build_definitions(str(home)), instance, layout, cfg, register_version(layout, cfg), say=lambda s: None
            )
            assert summary.status == "ok", summary.error
    finally:
        mp.undo()
    return layout


def _read(layout: Layout) -> SnapshotReader:
    v = active_version(layout, "ops")
    assert v is not None
    return reader(layout, "ops", v)


def test_reads_are_the_records_the_index_wrote(built: Layout) -> None:
    read = _read(built)
    docs = read.documents()
    assert len(docs) == 12 and all(isinstance(d, Document) for d in docs)
    doc = next(d for d in docs if d.path == "doc03.md")
    assert read.document(doc.doc_id) == doc

    text = read.text(doc.doc_id)
    assert isinstance(text, DocumentText) and text.path == "doc03.md" and "Runbook 3" in text.text

    parents = read.parents(doc_id=doc.doc_id)
    children = read.children(doc.doc_id)
    assert parents and all(isinstance(p, ParentBlock) and p.doc_id == doc.doc_id for p in parents)
    assert [p.start_offset for p in parents] == sorted(p.start_offset for p in parents)
    assert [c.chunk_index for c in children] == sorted(c.chunk_index for c in children)
    for c in children:  # offsets point into the canonical text
        assert isinstance(c, Chunk) and c.metadata is not None
        assert text.text[c.start_offset : c.end_offset] == c.text

    one = children[1]
    assert read.chunk(one.chunk_id) == one
    assert read.chunk("no-such-chunk") is None
    blocks = read.blocks(doc.doc_id, span=(one.start_offset, one.end_offset))
    assert blocks and all(isinstance(b, Block) for b in blocks)
    assert all(b.start_offset < one.end_offset and b.end_offset > one.start_offset for b in blocks)
    assert len(read.blocks(doc.doc_id)) > len(blocks)

    counts = read.count_by_document("children")
    assert counts[doc.doc_id] == len(children) and sum(counts.values()) == read.count("children")


def test_a_read_that_knows_its_documents_opens_only_their_files(built: Layout) -> None:
    read = _read(built)
    docs = read.documents()
    a, b = docs[0], docs[5]
    every = read.snapshot.dataset("parent_blocks")
    theirs = read.snapshot.dataset("parent_blocks", docs=[a.doc_id, b.doc_id])
    assert len(every.files) >= 12 and len(theirs.files) == 2

    wanted = [p.parent_id for p in read.parents(doc_id=a.doc_id)] + [p.parent_id for p in read.parents(doc_id=b.doc_id)]
    hinted = read.parents(wanted, docs=[a.doc_id, b.doc_id])
    assert sorted(p.parent_id for p in hinted) == sorted(wanted)
    assert sorted(hinted, key=lambda p: p.parent_id) == sorted(read.parents(wanted), key=lambda p: p.parent_id)
    assert read.parents(wanted, docs=[docs[9].doc_id]) == []  # (the hint decides which files are read)


def test_an_open_searcher_holds_no_parent_until_a_search_needs_some(
    built: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    v = active_version(built, "ops")
    assert v is not None
    monkeypatch.setattr(lookup_module, "CACHED_PARENTS", 3)
    s = Searcher.open(built, resolve_kb(built.kb_dir("ops")), v)
    try:
        assert s.lookup.cached() == (0, 0)
        result = s.search("how do I check the replication service", top_k=3)
        assert result.results and all(r.parent_found for r in result.results)
        read = _read(built)
        for r in result.results:  # the text elevated is the stored parent's
            (stored,) = read.parents([r.parent_id])
            assert r.doc_path == stored.doc_path and (r.start_offset, r.end_offset) == (
                stored.start_offset,
                stored.end_offset,
            )
        for q in ("backups step 2", "encryption step 4", "quotas", "alerts step 5", "restores"):
            s.search(q)
        assert s.lookup.cached()[0] <= 3  # bounded, however many searches
        again = s.search("how do I check the replication service", top_k=3)
        assert [r.parent_id for r in again.results] == [r.parent_id for r in result.results]
    finally:
        s.close()


def test_a_small_version_is_read_whole_at_open_and_answers_as_on_demand(
    built: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    v = active_version(built, "ops")
    assert v is not None
    cfg = resolve_kb(built.kb_dir("ops"))
    queries = ["how do I check the replication service", "backups step 2", "encryption", "alerts step 5"]
    whole = Searcher.open(built, cfg, v)
    try:
        assert whole.lookup.complete and whole.lookup.cached()[0] == whole.lookup.total > 12
        want = [whole.search(q).to_dict() for q in queries]
    finally:
        whole.close()
    monkeypatch.setattr(lookup_module, "CACHED_PARENTS", 3)
    lazy = Searcher.open(built, cfg, v)
    try:
        assert not lazy.lookup.complete and lazy.lookup.cached() == (0, 0)
        got = [lazy.search(q).to_dict() for q in queries]
    finally:
        lazy.close()
    strip = lambda d: {k: x for k, x in d.items() if k != "timings_ms"}  # noqa: E731
    assert [strip(d) for d in got] == [strip(d) for d in want]
