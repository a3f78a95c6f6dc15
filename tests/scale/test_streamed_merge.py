"""A chunk stage's merge, streamed (``indexing.ChunkMerge``, what ``parents_merge`` and
``children_merge`` run): a group of documents at a time, from the previous partition's
files and the batches (each read when its documents are due) gives the
rows, order and stats the whole-table merge gave, and its data version is the same."""

from __future__ import annotations

import pyarrow as pa
import pytest

from corpus_pipeline.indexing import batches, rows
from corpus_pipeline.indexing.chunk import ChunkMerge, ChunkWork, merge_chunks
from corpus_pipeline.indexing.stats import ChunkStats, StageResult
from corpus_pipeline.indexing.table import ColumnFingerprint, table_fingerprint
from corpus_pipeline.store.parquet import dataset, write_partition

SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("chunk_id", pa.string()),
        ("chunk_type", pa.string()),
        ("char_count", pa.int32()),
        ("token_count", pa.int32()),
    ]
)
DOCS = [f"d{i:02d}" for i in range(23)]
KEPT = frozenset(DOCS[i] for i in (0, 1, 2, 5, 9, 10, 11, 17, 22))


def _rows_of(doc: str, tag: str) -> list[dict]:
    n = int(doc[1:]) % 4  # 0 to 3 rows: some documents have none
    return [
        {
            "doc_id": doc,
            "chunk_id": f"{doc}-{tag}-{i}",
            "chunk_type": "IMAGE" if i == 2 else "TEXT",
            "char_count": 10 * int(doc[1:]) + i,
            "token_count": int(doc[1:]) + i,
        }
        for i in range(n)
    ]


def _table(docs: list[str], tag: str) -> pa.Table:
    return pa.Table.from_pylist([r for d in docs for r in _rows_of(d, tag)], schema=SCHEMA)


@pytest.fixture
def previous(tmp_path):
    """The previous partition as the pipeline writes it (files of a few documents each),
    with every document's old rows; the kept ones are read from it."""
    folder = tmp_path / "prev"
    write_partition(folder, _table(DOCS, "old"), docs_per_file=4)
    return dataset(folder)


def _work() -> ChunkWork:
    return ChunkWork(DOCS, KEPT, [d for d in DOCS if d not in KEPT])


def _batches(parts: int) -> list[StageResult]:
    work = _work()
    return [
        StageResult(_table(ids, "new"), ChunkStats(documents=len(ids), llm_calls=1))
        for ids in batches.split(work.todo, parts, batches.BatchRule(1, 10**6))
    ]


@pytest.mark.parametrize("size", [1, 3, 7, 1000])
@pytest.mark.parametrize("parts", [1, 4, 14])
def test_the_streamed_groups_are_the_whole_merge(previous, size, parts):
    work, built = _work(), _batches(parts)
    whole = rows.in_doc_order(
        [rows.of_docs(previous.to_table(), work.kept)] + [b.table for b in built], work.order, SCHEMA
    )
    merge = ChunkMerge(work, previous, built, SCHEMA, size=size)
    groups = list(merge.groups())
    assert len(groups) == -(-len(DOCS) // size)  # the groups of rows.by_document_groups
    assert [d for docs, _ in groups for d in docs] == DOCS
    for docs, table in groups:
        assert set(table.column("doc_id").to_pylist()) <= set(docs)
    streamed = pa.concat_tables([t for _, t in groups])
    assert streamed.to_pylist() == whole.to_pylist()
    s = merge.stats
    assert (s.rows, s.reused, s.documents, s.llm_calls) == (whole.num_rows, len(KEPT), len(work.todo), len(built))
    assert (s.max_chars, s.max_tokens) == (rows.column_max(whole, "char_count"), rows.column_max(whole, "token_count"))
    assert s.image_chunks == rows.count_in(whole, "chunk_type", {"IMAGE"})
    # the one-table merge (the in-process build's) is these groups concatenated
    assert merge_chunks(work, previous, built, SCHEMA).table.to_pylist() == whole.to_pylist()


def test_a_batch_is_read_when_its_documents_are_due_and_two_at_most_are_held(previous):
    work, built = _work(), _batches(7)
    read: list[int] = []

    def loader(i: int):
        def load() -> StageResult:
            read.append(i)
            return built[i]

        return load

    merge = ChunkMerge(work, previous, [loader(i) for i in range(len(built))], SCHEMA, size=2)
    seen = []
    for docs, _table in merge.groups():
        seen.append(len(read))
        due = [i for i, b in enumerate(built) if set(b.table.column("doc_id").to_pylist()) & set(docs)]
        assert all(i in read for i in due)  # everything the group needs was read
    assert read == list(range(len(built)))  # each once, in order
    assert seen[0] <= 2 < len(built)  # not all up front


def test_batches_out_of_order_are_refused_naming_the_document(previous):
    work, built = _work(), _batches(4)
    merge = ChunkMerge(work, previous, list(reversed(built)), SCHEMA, size=3)
    with pytest.raises(ValueError, match=r"document 'd\d\d'.*in order"):
        list(merge.groups())


def test_no_documents_give_one_empty_group(previous):
    merge = ChunkMerge(ChunkWork([], frozenset(), []), previous, [], SCHEMA, size=3)
    [(docs, table)] = list(merge.groups())
    assert docs == [] and table.num_rows == 0 and merge.stats.rows == 0


def test_a_fingerprint_of_runs_of_rows_is_the_tables():
    table = _table(DOCS, "x")
    fp = ColumnFingerprint("chunk_id")
    for start in range(0, table.num_rows, 5):
        fp.add(table.slice(start, 5))
    assert fp.hexdigest() == table_fingerprint(table, ["chunk_id"])
    assert fp.hexdigest() != table_fingerprint(table.slice(1), ["chunk_id"])
