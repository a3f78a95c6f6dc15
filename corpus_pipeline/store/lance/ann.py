"""The ANN index on the vectors (IVF_PQ): when to create, extend, rebuild or drop it, and how it
is built in bounded memory."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from corpus_pipeline.store.lance.connection import index_name
from corpus_pipeline.store.memory import give_back

#: The default of ``search.ann_min_rows``: a table with at least this many rows gets an ANN
#: index on its vectors (``ensure_vector_index``); below it search is a flat, exact scan.
#: The vector column's ANN index.
VECTOR_INDEX_NAME = index_name("vector")


#: Retrain the ANN index (a full rebuild) when more than this share of the table's rows was
#: not in the table the index was trained on (appended or replaced since); below it, new
#: rows are added to the existing index (``optimize``: their IVF partitions and PQ codes
#: from the trained centroids and codebooks, no retraining).
VECTOR_INDEX_REBUILD_SHARE = 0.25


#: k-means iterations of the IVF centroids and PQ codebooks (LanceDB's default: 50).
VECTOR_INDEX_KMEANS_ITERATIONS = 50


#: At most this many vectors train the IVF centroids (k-means), and this many the PQ codebooks
#: (64 per code: FAISS asks for at least 39): the training samples, which Lance holds in
#: memory, do not grow with the table (``build_vector_index``).
VECTOR_INDEX_IVF_SAMPLE = 65_536


VECTOR_INDEX_PQ_SAMPLE = 16_384


#: Rows of the table encoded per call into a segment of the ANN index (``build_vector_index``):
#: what the encoding holds at once.
VECTOR_INDEX_SEGMENT_ROWS = 32_768


#: Field metadata of ``vector``: the row count the ANN index was trained on.
VECTOR_INDEX_TRAINED_KEY = "corpus.ann_trained_rows"


VectorIndexAction = Literal["none", "create", "optimize", "rebuild", "drop"]


@dataclass(frozen=True)
class VectorIndexState:
    """What a table's ANN index covers: rows indexed and not (appended since the last build
    or optimize), and the row count it was trained on (None: not recorded)."""

    indexed_rows: int
    unindexed_rows: int
    trained_rows: int | None = None


def vector_index_action(
    rows: int,
    min_rows: int,
    index: VectorIndexState | None,
    *,
    rebuild_share: float = VECTOR_INDEX_REBUILD_SHARE,
) -> VectorIndexAction:
    """What to do with the ANN index of a table of ``rows`` rows (``index``: its state, None
    without one) so that a table of at least ``min_rows`` rows has an index that covers every
    row, trained on most of them:

    - below ``min_rows``: no index (``drop`` one that exists: a flat scan is exact, and fast
      enough there);
    - no index yet: ``create``;
    - more than ``rebuild_share`` of the rows not in the table the index was trained on (the
      rows appended or replaced since, or the growth past the trained row count, whichever
      is larger): ``rebuild`` (retrain the partitions and codebooks, sized for the rows now);
    - some rows not indexed: ``optimize`` (add them to the index as it is);
    - else ``none``.
    """
    if rows < min_rows:
        return "drop" if index is not None else "none"
    if index is None:
        return "create"
    trained = index.trained_rows if index.trained_rows is not None else index.indexed_rows
    untrained = max(index.unindexed_rows, rows - trained)
    if untrained > rebuild_share * rows:
        return "rebuild"
    if index.unindexed_rows > 0:
        return "optimize"
    return "none"


def vector_index_state(tbl: Any) -> VectorIndexState | None:
    """The state of ``tbl``'s ANN index on ``vector`` (None: there is none)."""
    stats = tbl.index_stats(VECTOR_INDEX_NAME)
    if stats is None:
        return None
    raw = (tbl.schema.field("vector").metadata or {}).get(VECTOR_INDEX_TRAINED_KEY.encode())
    try:
        trained = int(raw) if raw else None
    except ValueError:
        trained = None
    return VectorIndexState(int(stats.num_indexed_rows), int(stats.num_unindexed_rows), trained)


def vector_index_params(rows: int, dim: int) -> dict[str, int]:
    """IVF_PQ parameters for ``rows`` vectors of ``dim`` dimensions (``benchmarks/ann``):
    about sqrt(rows) partitions (~1,000 rows each at 1M), and PQ sub-vectors of 8 dimensions
    (48 for 384-d vectors; the exact re-ranking of ``refine_factor`` makes up for the coarse
    codes); the training samples' rates (vectors per partition for k-means, per code for the
    codebooks: Lance samples ``rate`` × partitions or × 256 rows, at least 2 × each, at most
    the table) so that neither sample exceeds its cap."""
    partitions = max(1, round(rows**0.5))
    sub = dim // 8 if dim % 8 == 0 and dim >= 8 else (dim // 4 if dim % 4 == 0 and dim >= 4 else 1)
    codes = 2**8
    return {
        "num_partitions": partitions,
        "num_sub_vectors": max(1, sub),
        "max_iterations": VECTOR_INDEX_KMEANS_ITERATIONS,
        "ivf_sample_rate": max(2, min(256, VECTOR_INDEX_IVF_SAMPLE // partitions, rows // partitions)),
        "pq_sample_rate": max(2, min(VECTOR_INDEX_PQ_SAMPLE // codes, rows // codes)),
    }


def build_vector_index(tbl: Any) -> None:
    """(Re)build ``tbl``'s ANN index on ``vector`` (IVF_PQ, cosine) in memory bounded by
    ``VECTOR_INDEX_SEGMENT_ROWS`` and the training samples, not by the table, and record the
    row count it was built for.

    Lance's one-call build trains the IVF centroids on 256 vectors per partition (at 256k rows
    half the table: +650 MB) and the PQ codebooks on 65,536 residuals, then encodes the whole
    table in one pass (+420 MB more at 256k rows, growing with it). Here the centroids are
    trained on at most ``VECTOR_INDEX_IVF_SAMPLE`` vectors and the codebooks on
    ``VECTOR_INDEX_PQ_SAMPLE`` (64 per code), then each group of fragments is encoded with
    those shared models as a segment of its own (``give_back`` in between) and the segments
    are merged into one and committed under ``VECTOR_INDEX_NAME`` in one commit, replacing the
    index there was: readers see the old index or the new one. At 256k rows the build peaked
    at +156 MB instead of +666 MB, in 14 s instead of 37 s (``benchmarks/scale/RESULTS.md``,
    2026-12-05)."""
    from lance.indices import IndicesBuilder

    ds = tbl.to_lance()
    rows = ds.count_rows()
    dim = int(tbl.schema.field("vector").type.list_size)
    p = vector_index_params(rows, dim)
    builder = IndicesBuilder(ds, "vector")
    ivf = builder.train_ivf(
        p["num_partitions"],
        distance_type="cosine",
        sample_rate=p["ivf_sample_rate"],
        max_iters=p["max_iterations"],
    )
    give_back()
    pq = builder.train_pq(ivf, p["num_sub_vectors"], sample_rate=p["pq_sample_rate"], max_iters=p["max_iterations"])
    give_back()
    shared = {
        "name": VECTOR_INDEX_NAME, "metric": "cosine", "replace": True,
        "num_partitions": p["num_partitions"], "num_sub_vectors": p["num_sub_vectors"],
        "ivf_centroids": ivf.centroids, "pq_codebook": pq.codebook,
    }  # fmt: skip
    segments = []
    for fragments in _fragment_groups(ds, VECTOR_INDEX_SEGMENT_ROWS):
        segments.append(ds.create_index_uncommitted("vector", "IVF_PQ", fragment_ids=fragments, **shared))
        give_back()
    merged = ds.merge_existing_index_segments(segments) if len(segments) > 1 else segments[0]
    ds.commit_existing_index_segments(VECTOR_INDEX_NAME, "vector", [merged])
    tbl.checkout_latest()
    tbl.update_field_metadata({"path": "vector", "metadata": {VECTOR_INDEX_TRAINED_KEY: str(rows)}})


def _fragment_groups(ds: Any, rows: int) -> list[list[int]]:
    """``ds``'s fragment ids in order, in groups of about ``rows`` rows (a fragment larger than
    that is a group of its own)."""
    groups: list[list[int]] = []
    group: list[int] = []
    held = 0
    for fragment in ds.get_fragments():
        n = fragment.count_rows()
        if group and held + n > rows:
            groups.append(group)
            group, held = [], 0
        group.append(fragment.fragment_id)
        held += n
    if group:
        groups.append(group)
    return groups


def ensure_vector_index(
    tbl: Any, min_rows: int, *, rebuild_share: float = VECTOR_INDEX_REBUILD_SHARE
) -> VectorIndexAction:
    """Bring ``tbl``'s ANN index to what ``vector_index_action`` decides, after a write;
    returns the action taken. ``optimize`` adds the unindexed rows to the index without
    retraining (nor compacting the table's files); a full rebuild happens only when the table has
    outgrown what the index was trained on."""
    action = vector_index_action(tbl.count_rows(), min_rows, vector_index_state(tbl), rebuild_share=rebuild_share)
    if action in ("create", "rebuild"):
        build_vector_index(tbl)
    elif action == "optimize":
        # The new rows into the index as it is (no retraining, no compaction), merged with its
        # segments into one: a delta segment would cost every query one more search (one
        # doubled p50 at 1M children), while the merge rewrites only the index's row ids and
        # PQ codes (~0.3 s at 200k rows).
        stats = tbl.index_stats(VECTOR_INDEX_NAME)
        segments = max(int(getattr(stats, "num_indices", 1) or 1), 1)
        tbl.to_lance().optimize.optimize_indices(index_names=[VECTOR_INDEX_NAME], num_indices_to_merge=segments)
        tbl.checkout_latest()
    elif action == "drop":
        tbl.drop_index(VECTOR_INDEX_NAME)
    return action


def has_vector_index(tbl: Any) -> bool:
    """Whether ``tbl`` has an ANN index on ``vector`` (search then sets its probes and refine)."""
    return tbl.index_stats(VECTOR_INDEX_NAME) is not None
