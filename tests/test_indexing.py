"""The indexing steps as library calls (no Dagster): plans per document, provenance,
incremental reuse."""

from __future__ import annotations

import json
import textwrap

import pyarrow as pa
import pytest

from corpus_pipeline import indexing
from corpus_pipeline.chunking.context import ContextFactory
from corpus_pipeline.indexing import rows
from corpus_pipeline.kbconfig import resolve_kb
from corpus_pipeline.versioning import strategy_version

STRUCTURED = textwrap.dedent(
    """\
    # Operations manual

    ## Backups

    Backups run nightly at 01:00. Each server keeps thirty daily copies. Copies older than
    thirty days are deleted by the retention job.

    ## Restores

    Restores start from the console. A single file is back in under a minute.

    ## Encryption

    Every snapshot is encrypted with AES-256 before it leaves the server.
    """
)
FLAT = "a short note without any heading at all, one paragraph only.\n"


def _tools(kb):
    return ContextFactory.for_kb(kb, cache_dir=None)


def _build(kb_dir):
    kb = resolve_kb(kb_dir)
    version = strategy_version(kb)
    docs = indexing.discover_documents(kb).tables
    parsed = indexing.parse_documents(kb, docs).tables
    parents = indexing.build_parent_blocks(kb, version, parsed, None, _tools(kb)).tables
    children = indexing.build_child_chunks(kb, version, parents, parsed, {}, None, _tools(kb)).tables
    return kb, version, docs, parsed, parents, children


def test_plan_auto_recommends_a_plan_per_document_and_records_why(tmp_path):
    d = tmp_path / "auto"
    d.mkdir()
    (d / "kb.yaml").write_text("chunking: {plan: auto}\n")
    (d / "manual.md").write_text(STRUCTURED)
    (d / "note.txt").write_text(FLAT)
    _kb, version, docs, _, parents, children = _build(d)
    assert version.startswith("auto-")
    assert set(docs.column("plan").to_pylist()) == {"auto"}
    plans = {r["doc_path"]: json.loads(r["metadata"]) for r in parents.to_pylist()}
    assert plans["manual.md"]["plan"].startswith("PARENT:STRUCTURE")
    assert any("STRUCTURE" in reason for reason in plans["manual.md"]["plan_reasons"])
    assert plans["note.txt"]["plan"].startswith("PARENT:RECURSIVE")
    sections = {r["section_path"] for r in children.to_pylist() if r["doc_path"] == "manual.md"}
    assert "Operations manual > Restores" in sections


def test_every_child_has_exact_offsets_and_lies_in_its_parent(tmp_path):
    d = tmp_path / "kb"
    d.mkdir()
    (d / "kb.yaml").write_text("chunking: {child: {RECURSIVE: {max_chars: 120, overlap_chars: 20}}}\n")
    (d / "manual.md").write_text(STRUCTURED * 3)
    _, _, _, parsed, parents, children = _build(d)
    text = parsed["texts"].to_pylist()[0]["text"]
    by_id = {p["parent_id"]: p for p in parents.to_pylist()}
    rows = children.to_pylist()
    assert [r["chunk_index"] for r in rows] == list(range(len(rows)))
    for r in rows:
        assert text[r["start_offset"] : r["end_offset"]] == r["text"]
        p = by_id[r["parent_id"]]
        assert p["start_offset"] <= r["start_offset"] and r["end_offset"] <= p["end_offset"]
        assert r["char_count"] <= 120


def test_unchanged_documents_are_reused_and_ids_are_deterministic(tmp_path):
    d = tmp_path / "kb"
    d.mkdir()
    (d / "a.md").write_text(STRUCTURED)
    (d / "b.md").write_text(STRUCTURED.replace("AES-256", "ChaCha20"))
    kb, version, _docs, parsed, parents, children = _build(d)
    (d / "b.md").write_text(STRUCTURED.replace("AES-256", "XChaCha20"))
    docs2 = indexing.discover_documents(kb).tables
    r = indexing.parse_documents(kb, docs2, parsed)
    parsed2, pstats = r.tables, r.stats
    assert (pstats.parsed, pstats.reused) == (1, 1)
    r = indexing.build_parent_blocks(kb, version, parsed2, parents, _tools(kb))
    parents2, st = r.tables, r.stats
    assert (st.documents, st.reused) == (1, 1)
    r = indexing.build_child_chunks(kb, version, parents2, parsed2, {}, children, _tools(kb))
    children2, cst = r.tables, r.stats
    assert (cst.documents, cst.reused) == (1, 1)
    same = lambda t: {r["chunk_id"] for r in t.to_pylist() if r["doc_path"] == "a.md"}  # noqa: E731
    assert same(children) == same(children2)
    # Rebuilding from nothing gives the same ids (idempotent re-runs).
    _, _, _, _, _, fresh = _build(d)
    assert fresh.column("chunk_id").to_pylist() == children2.column("chunk_id").to_pylist()


def test_overlapping_parents_never_yield_the_same_child_twice(tmp_path):
    d = tmp_path / "kb"
    d.mkdir()
    (d / "kb.yaml").write_text(
        "chunking:\n"
        "  parent: {RECURSIVE: {max_chars: 300, overlap_chars: 120}}\n"
        "  child: {RECURSIVE: {max_chars: 100, overlap_chars: 0}}\n"
    )
    sentences = [f"Sentence number {i} says something short." for i in range(60)]
    (d / "a.txt").write_text(" ".join(sentences) + "\n")
    _, _, _, parsed, parents, children = _build(d)
    assert any(p["overlap_chars"] > 0 for p in parents.to_pylist())  # the parents do overlap
    spans = [(r["start_offset"], r["end_offset"]) for r in children.to_pylist()]
    assert len(spans) == len(set(spans))
    text = parsed["texts"].to_pylist()[0]["text"]
    covered = set()
    for s, e in spans:
        covered.update(range(s, e))
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())  # nothing lost either


@pytest.mark.parametrize("group", [256, 2])
def test_incremental_tables_equal_a_rebuild_row_for_row(tmp_path, monkeypatch, group):
    """Rows carried over as Arrow slices (``indexing.rows``) and rows built anew, a group
    of documents at a time, come out in the order, and with the values, of a rebuild from
    nothing: an edit in the middle, a deletion, an addition and a failed document."""
    monkeypatch.setattr(rows, "GROUP_DOCS", group)
    d = tmp_path / "kb"
    d.mkdir()
    for i in range(6):
        (d / f"doc-{i}.md").write_text(STRUCTURED.replace("AES-256", f"cipher-{i}") * (1 + i % 3))
    (d / "notes.txt").write_text(FLAT * 4)
    (d / "broken.docx").write_bytes(b"not a zip")
    kb, version, _docs, parsed, parents, children = _build(d)
    (d / "doc-2.md").write_text(STRUCTURED.replace("AES-256", "edited") * 2)
    (d / "doc-4.md").unlink()
    (d / "doc-9.md").write_text(STRUCTURED.replace("Backups", "Snapshots"))
    docs2 = indexing.discover_documents(kb).tables
    p = indexing.parse_documents(kb, docs2, parsed)
    assert (p.stats.parsed, p.stats.reused) == (2, 6)  # doc-2 and doc-9; broken.docx fails again unparsed
    pa2 = indexing.build_parent_blocks(kb, version, p.tables, parents, _tools(kb))
    ch2 = indexing.build_child_chunks(kb, version, pa2.tables, p.tables, {}, children, _tools(kb))
    assert (pa2.stats.documents, ch2.stats.documents) == (2, 2)
    _, _, _, fresh_parsed, fresh_parents, fresh_children = _build(d)
    for name in ("texts", "blocks", "images"):
        assert p.tables[name].equals(fresh_parsed[name]), name
    assert pa2.tables.equals(fresh_parents)
    assert ch2.tables.equals(fresh_children)
    assert [s["path"] for s in p.stats.failed] == ["broken.docx"]


def _mixed_kb(tmp_path):
    """A KB of five manuals, a flat note and a broken DOCX: (its folder, the resolved KB)."""
    d = tmp_path / "kb"
    d.mkdir()
    for i in range(5):
        (d / f"doc-{i}.md").write_text(STRUCTURED.replace("AES-256", f"cipher-{i}"))
    (d / "notes.txt").write_text(FLAT)
    (d / "broken.docx").write_bytes(b"not a zip")
    return d, resolve_kb(d)


def test_parse_batches_merged_equal_one_parse_of_the_whole_kb(tmp_path):
    """What a fanned-out ``parsed_blocks`` does (each batch's parse handed to the merge as
    Arrow rows, ``parsed_rows``) gives the tables of one parse of every document, failures
    and unreadable files included; batches out of order are refused (the merge streams
    them in document order, ``indexing.ParseMerge``)."""
    import pyarrow as pa

    _d, kb = _mixed_kb(tmp_path)
    docs = indexing.discover_documents(kb).tables
    whole = indexing.parse_documents(kb, docs)
    todo = indexing.documents_to_parse(kb, docs, None)
    cut = [todo[:2], todo[2:5], todo[5:]]
    parts = [indexing.parsed_rows(b, indexing.parse_batch(kb, b)) for b in cut]
    assert all(isinstance(t, pa.Table) for part in parts for t in part.values())
    merged = indexing.merge_parsed(kb, docs, None, parts)
    for name in ("texts", "blocks", "images"):
        assert merged.tables[name].equals(whole.tables[name]), name
    assert merged.stats == whole.stats and [f["path"] for f in merged.stats.failed] == ["broken.docx"]
    # Out of order, a document's group comes before its batch is read: refused, named.
    with pytest.raises((ValueError, RuntimeError), match=r"whose group was merged already|neither parsed"):
        list(indexing.ParseMerge(kb, docs, None, parts[::-1], size=2).groups())


@pytest.mark.parametrize("size", [1, 2, 3, 1000])
def test_the_parse_merge_streams_groups_that_make_the_whole_parse(tmp_path, size):
    """``ParseMerge`` (what ``parse_merge`` runs): a group of ``size`` documents at a time,
    the kept documents' rows read from the previous partition's files, each batch read once
    and only when its first document is due; the groups together are the tables of a parse
    of every document from nothing, and the stats those of the whole-table merge."""
    from corpus_pipeline.store.parquet import dataset, write_partition

    d, kb = _mixed_kb(tmp_path)
    first = indexing.parse_documents(kb, indexing.discover_documents(kb).tables).tables
    folder = tmp_path / "parsed_blocks"
    write_partition(folder, first, docs_per_file=2)
    previous = {name: dataset(folder, name) for name in first}
    for i in (0, 4):  # (an edit early and one late: two batches, far apart)
        (d / f"doc-{i}.md").write_text(STRUCTURED.replace("AES-256", f"edited-{i}"))
    docs = indexing.discover_documents(kb).tables
    order = docs.column("doc_id").to_pylist()
    todo = indexing.documents_to_parse(kb, docs, previous)
    assert [t.path for t in todo] == ["doc-0.md", "doc-4.md"]
    reads: list[int] = []

    def loader(i, batch):
        def load():
            reads.append(i)
            return indexing.parsed_rows(batch, indexing.parse_batch(kb, batch))

        return load

    merge = indexing.ParseMerge(kb, docs, previous, [loader(0, todo[:1]), loader(1, todo[1:])], size=size)
    groups = []
    for group in merge.groups():
        groups.append(group)
        end = len(groups) * size  # (a batch is read with the group of its first document, not before)
        assert reads == [b for b, first in enumerate(order.index(t.doc_id) for t in todo) if first < end]
    assert reads == [0, 1]
    assert [g["texts"].column("doc_id").to_pylist() for g in groups] == [
        order[i : i + size] for i in range(0, len(order), size)
    ]
    scratch = indexing.parse_documents(kb, docs)
    whole = indexing.parse_documents(kb, docs, first)  # (the previous output as tables)
    for name in ("texts", "blocks", "images"):
        streamed = pa.concat_tables([g[name] for g in groups])
        assert streamed.equals(scratch.tables[name]), name
    assert merge.stats == whole.stats
    assert (merge.stats.parsed, merge.stats.reused, merge.stats.documents) == (2, 5, 7)
    assert [f["path"] for f in merge.stats.failed] == ["broken.docx"]
    assert merge.stats.blocks == scratch.stats.blocks and merge.stats.block_types == scratch.stats.block_types


def test_a_document_neither_parsed_nor_reusable_is_named(tmp_path):
    d = tmp_path / "kb"
    d.mkdir()
    (d / "a.md").write_text(STRUCTURED)
    (d / "b.md").write_text(FLAT)
    kb = resolve_kb(d)
    docs = indexing.discover_documents(kb).tables
    todo = indexing.documents_to_parse(kb, docs, None)
    only_a = [indexing.parsed_rows(todo[:1], indexing.parse_batch(kb, todo[:1]))]
    with pytest.raises(RuntimeError, match=r"b\.md: neither parsed by a batch nor reusable"):
        indexing.merge_parsed(kb, docs, None, only_a)


def test_the_parse_plan_reads_only_the_reuse_columns_of_the_previous_parse(tmp_path):
    """``previous_parse_state``: of the last ``parsed_blocks`` output, the ``texts`` table's
    reuse columns only (not the texts, blocks and images), and the same documents to parse
    as with the whole previous output; nothing to read, or unreadable: None (all parsed)."""
    from corpus_pipeline.store.parquet import write_partition

    d = tmp_path / "kb"
    d.mkdir()
    for i in range(3):
        (d / f"doc-{i}.md").write_text(STRUCTURED.replace("AES-256", f"cipher-{i}"))
    kb = resolve_kb(d)
    docs = indexing.discover_documents(kb).tables
    parsed = indexing.parse_documents(kb, docs).tables
    folder = tmp_path / "parsed_blocks"
    assert indexing.previous_parse_state(folder) is None
    write_partition(folder, parsed)
    state = indexing.previous_parse_state(folder)
    assert list(state) == ["texts"]
    assert "text" not in state["texts"].column_names and state["texts"].num_rows == 3
    (d / "doc-1.md").write_text(STRUCTURED.replace("AES-256", "changed"))
    now = indexing.discover_documents(kb).tables
    todo = indexing.documents_to_parse(kb, now, state)
    assert [x.path for x in todo] == ["doc-1.md"]
    assert [x.path for x in indexing.documents_to_parse(kb, now, parsed)] == ["doc-1.md"]
    for f in folder.glob("texts-*.parquet"):
        f.write_bytes(b"not parquet")
    assert indexing.previous_parse_state(folder) is None


def test_a_batch_reading_datasets_builds_what_it_builds_from_tables(tmp_path):
    """A batch step gets ``parsed_blocks`` and ``parent_blocks`` as datasets and reads only
    its documents' rows (``rows.of_docs``): its parents and children are those it builds
    from the whole tables, for documents spread over several files."""
    from corpus_pipeline.store.parquet import dataset, write_partition

    d = tmp_path / "kb"
    d.mkdir()
    for i in range(8):
        (d / f"doc-{i}.md").write_text(STRUCTURED.replace("AES-256", f"cipher-{i}") * (1 + i % 2))
    kb, version, _docs, parsed, parents, _children = _build(d)
    write_partition(tmp_path / "parsed", parsed, docs_per_file=2)
    write_partition(tmp_path / "parents", parents, docs_per_file=2)
    lazy = {name: dataset(tmp_path / "parsed", name) for name in ("texts", "blocks")}
    assert len(lazy["blocks"].files) > 1
    ids = rows.strings(parsed["texts"], "doc_id")[1::3]
    eager = indexing.parent_batch(kb, version, parsed, ids, _tools(kb)).tables
    got = indexing.parent_batch(kb, version, lazy, ids, _tools(kb))
    assert eager.num_rows and got.tables.equals(eager) and got.stats.documents == len(ids) == 3
    kids = indexing.child_batch(kb, version, parents, parsed, {}, ids, _tools(kb)).tables
    from_files = indexing.child_batch(kb, version, dataset(tmp_path / "parents"), lazy, {}, ids, _tools(kb))
    assert kids.num_rows and from_files.tables.equals(kids) and from_files.stats.documents == len(ids)


def test_a_partitions_tables_are_cut_into_groups_of_whole_documents_in_order():
    """What the chunk merges check a group at a time: each group holds its documents' rows of
    every table (in table order), and a row of a document the order does not know goes with
    the last group, so a check still sees it."""
    from corpus_pipeline.indexing.rows import by_document_groups

    children = pa.table({"doc_id": ["a", "a", "b", "c", "c", "zz", "d"], "n": [1, 2, 3, 4, 5, 6, 7]})
    texts = pa.table({"doc_id": ["a", "b", "c", "d"], "t": ["A", "B", "C", "D"]})
    groups = list(by_document_groups({"children": children, "texts": texts, "plain": 1}, ["a", "b", "c", "d"], 2))
    assert [g["children"].column("n").to_pylist() for g in groups] == [[1, 2, 3], [4, 5, 6, 7]]
    assert [g["texts"].column("t").to_pylist() for g in groups] == [["A", "B"], ["C", "D"]]
    assert [g["plain"] for g in groups] == [1, 1]


def test_a_partitions_dataset_is_cut_into_the_same_groups_reading_each_groups_files(tmp_path, monkeypatch):
    """The merges hand the checks the documents' texts as the partition's dataset: each
    group reads its documents' rows from the files that hold them (never the whole table),
    and the groups are those of the table, a stray document's rows in the last one."""
    import pyarrow.parquet as pq

    from corpus_pipeline.indexing import rows
    from corpus_pipeline.store.parquet import dataset, write_partition

    texts = pa.table({"doc_id": ["a", "b", "zz", "c", "d", "e"], "t": ["A", "B", "Z", "C", "D", "E"]})
    write_partition(tmp_path / "texts", {"texts": texts}, docs_per_file=1)  # (a file per document)
    lazy = dataset(tmp_path / "texts", "texts")
    assert len(lazy.files) == 6
    order = ["a", "b", "c", "d", "e"]
    reads: list[list[str]] = []
    real = rows.of_docs
    monkeypatch.setattr(rows, "of_docs", lambda t, ids: reads.append(list(ids)) or real(t, ids))
    for size in (1, 2, 3, 10):
        reads.clear()
        eager = [g["texts"].to_pylist() for g in rows.by_document_groups({"texts": texts}, order, size)]
        got = [g["texts"].to_pylist() for g in rows.by_document_groups({"texts": lazy}, order, size)]
        assert got == eager and got[-1][-1]["doc_id"] in ("e", "zz")
        assert [d for ids in reads for d in ids] == [*order, "zz"]  # (each group asked for its own)
    monkeypatch.setattr(rows, "of_docs", real)
    groups = rows.by_document_groups({"texts": lazy}, order, 2)
    assert next(groups)["texts"].column("t").to_pylist() == ["A", "B"]
    for f in (tmp_path / "texts").glob("texts-*.parquet"):  # (the files of a and b: not read again)
        if {"a", "b"} & set(pq.read_table(f, columns=["doc_id"]).column("doc_id").to_pylist()):
            f.write_bytes(b"not parquet any more")
    assert [g["texts"].column("t").to_pylist() for g in groups] == [["C", "D"], ["Z", "E"]]


def test_parts_are_put_in_document_order_keeping_each_documents_rows_in_order():
    from corpus_pipeline.indexing.rows import in_doc_order

    schema = pa.schema([("doc_id", pa.string()), ("n", pa.int64())])
    a = pa.table({"doc_id": ["c", "c", "gone", "a"], "n": [5, 6, 0, 1]}, schema=schema)
    b = pa.table({"doc_id": ["b", "a"], "n": [3, 2]}, schema=schema)
    out = in_doc_order([a, b], ["a", "b", "c"], schema)
    assert out.column("n").to_pylist() == [1, 2, 3, 5, 6]  # (a's rows in part order; "gone" dropped)
    in_order = in_doc_order([b.slice(1), pa.table({"doc_id": ["b"], "n": [3]}, schema=schema)], ["a", "b"], schema)
    assert in_order.column("n").to_pylist() == [2, 3] and in_order.column("n").num_chunks == 1
