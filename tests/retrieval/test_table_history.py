"""A search table replaced whole keeps no old version: deleted text is gone, sizes are stable."""

from __future__ import annotations

import pyarrow.compute as pc

from .tiny_index import build_index


def test_replacing_a_search_table_keeps_no_old_version_and_no_growth(tmp_path):
    """Deleted means deleted: the rows of an old write are not readable through checkout,
    and re-writing the same table keeps its size."""
    import numpy as np

    from corpus_pipeline.store.lance import open_search_table, write_search_table
    from corpus_pipeline.store.layout import Layout

    build_index(tmp_path)
    layout = Layout(tmp_path)
    tbl = open_search_table(layout, "ops", "v1")
    rows = tbl.to_arrow()
    folder = layout.search_table_dir("ops", "v1")

    def size() -> int:
        return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())

    chunks = rows.drop_columns(["vector", "keyword_text"])
    vectors = np.stack(rows.column("vector").to_numpy(zero_copy_only=False))
    sizes = []
    for _ in range(3):
        write_search_table(layout, "ops", "v1", chunks, vectors)
        sizes.append(size())
    assert max(sizes) - min(sizes) < 0.05 * max(sizes), sizes
    # a document deleted: its rows must not survive in any version of the table
    kept = chunks.filter(pc.not_equal(chunks.column("chunk_id"), "c4"))
    write_search_table(layout, "ops", "v1", kept, vectors[:3])
    tbl = open_search_table(layout, "ops", "v1")
    assert len(tbl.list_versions()) == 1
    everywhere = b"".join(f.read_bytes() for f in folder.rglob("*") if f.is_file())
    assert b"port 8443" not in everywhere
