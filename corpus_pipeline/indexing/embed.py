"""Stage 5, embed: one vector per child chunk (the ``chunk_embeddings`` asset); text this
model embedded before (any KB, any version, any run) comes from the vector cache."""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

import corpus_pipeline.indexing.rows as rows
from corpus_pipeline.embedding import EmbeddingCache, EmbeddingConfig, embed_with_cache, open_embedder
from corpus_pipeline.embedding.base import Embedder
from corpus_pipeline.embedding.cache import text_hash
from corpus_pipeline.errors import StoreError
from corpus_pipeline.indexing.stats import EmbedStats, StageResult
from corpus_pipeline.progress import ProgressFn
from corpus_pipeline.store import schemas

PROGRESS_STEPS = 20  # at most this many progress reports (and model calls) per embed


class _Reporting:
    """An ``Embedder`` that embeds passages in at most ``PROGRESS_STEPS`` slices, telling
    ``progress`` after each; a slice is a whole number of the model's batches (times its
    concurrent requests, for an endpoint), so no batch is sent short but the last."""

    def __init__(self, inner: Embedder, config: EmbeddingConfig, progress: ProgressFn) -> None:
        self.inner, self.progress = inner, progress
        self.batch = config.batch_size * (config.max_concurrency if config.remote else 1)

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        n = len(texts)
        step = self.batch * max(1, math.ceil(n / PROGRESS_STEPS / self.batch))
        if n <= step:
            out = self.inner.embed(texts)
            self.progress("embed", n, n, "chunks")
            return out
        parts = []
        for i in range(0, n, step):
            parts.append(self.inner.embed(texts[i : i + step]))
            self.progress("embed", min(i + step, n), n, "chunks")
        return np.concatenate(parts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.embed_queries(texts)

    def close(self) -> None:
        closer = getattr(self.inner, "close", None)
        if callable(closer):
            closer()


#: An embeddings table (``chunk_embeddings``, or a batch's ``text_hash`` and ``vector``), or
#: a function that reads one (a batch staged on disk: read when its turn comes).
VectorSource = pa.Table | Callable[[], pa.Table]


def previous_vectors(previous: pa.Table | None, model: str) -> pa.Table | None:
    """The ``text_hash`` and ``vector`` of this partition's previous embeddings made by
    ``model`` (its ``vector_key``), or None: what a re-run takes its unchanged chunks'
    vectors from, as Arrow, before it asks the cache."""
    if previous is None or previous.num_rows == 0 or "model" not in previous.column_names:
        return None
    prev = rows.where_equal(previous, "model", model).select(["text_hash", "vector"])
    return prev if prev.num_rows else None


def _previous_files(previous: pads.Dataset, columns: list[str]) -> Iterator[pa.Table]:
    """``columns`` of a previous output's files, one file at a time; an unreadable file is
    skipped (its chunks' vectors then come from the batches, the cache or the model: the
    plan and the merge skip the same files)."""
    if "model" not in previous.schema.names:
        return
    for fragment in previous.get_fragments():
        try:
            yield fragment.to_table(columns=columns)
        except (OSError, pa.ArrowInvalid):
            continue


def _previous_parts(previous: pa.Table | pads.Dataset | None, model: str) -> Iterator[pa.Table]:
    """``previous_vectors`` of a table, or of a partition's dataset file by file (a re-run
    holds one file's vectors at a time, not the partition's)."""
    tables = (
        _previous_files(previous, ["model", "text_hash", "vector"])
        if isinstance(previous, pads.Dataset)
        else [previous]
    )
    for table in tables:
        part = previous_vectors(table, model)
        if part is not None:
            yield part


def _previous_hashes(previous: pa.Table | pads.Dataset | None, model: str) -> Any:
    """The text hashes ``model`` has a vector for in ``previous`` (no vector read)."""
    tables = _previous_files(previous, ["model", "text_hash"]) if isinstance(previous, pads.Dataset) else [previous]
    found = [
        rows.where_equal(t, "model", model).column("text_hash")
        for t in tables
        if t is not None and "model" in t.column_names
    ]
    hashes = pa.chunked_array([c for col in found for c in col.chunks], pa.string())
    return hashes.combine_chunks() if len(hashes) else None


class EmbedPlan:
    """The work of a run's embed: the distinct texts of ``children`` this model has no
    vector for, neither in this partition's ``previous`` embeddings nor in the cache, in
    first-seen order. Found without reading the children's texts: ``of`` reads their text
    hashes (one narrow column) and keeps, of each text to embed, the row of its first chunk
    (``at``, increasing); ``batches`` then reads those rows' texts a batch at a time, from
    the files that hold them only (a one-document edit reads that document's file, not the
    partition's texts). What is held is the hashes and one batch of texts."""

    def __init__(self, children: pa.Table | pads.Dataset, hashes: pa.Array[Any], at: np.ndarray) -> None:
        self.children, self.hashes, self.at = children, hashes, at

    @classmethod
    def of(
        cls,
        children: pa.Table | pads.Dataset,
        config: EmbeddingConfig,
        cache: EmbeddingCache | None,
        previous: pa.Table | pads.Dataset | None = None,
    ) -> EmbedPlan:
        column = children.to_table(columns=["text_hash"]) if isinstance(children, pads.Dataset) else children
        raw: Any = column.column("text_hash").combine_chunks().cast(pa.string())
        col: Any = pc.fill_null(raw, "")
        rows_left = np.arange(len(col), dtype=np.int64)
        prev = _previous_hashes(previous, config.vector_key)
        if prev is not None and len(col):
            seen: Any = pc.is_in(col, value_set=prev)
            known = np.asarray(seen.to_numpy(zero_copy_only=False), dtype=bool)
            rows_left = rows_left[~known]
        at = rows_left
        if len(rows_left):
            left: Any = col.take(pa.array(rows_left))
            ids = np.asarray(pc.index_in(left, value_set=pc.unique(left)).to_numpy(zero_copy_only=False))
            _, first = np.unique(ids, return_index=True)  # (each distinct text's first row)
            at = rows_left[np.sort(first)]
        hashes: Any = col.take(pa.array(at, pa.int64()))
        if cache is not None and len(hashes):
            found = cache.has_many(config.vector_key, [str(h) for h in hashes.to_pylist()])
            if found:
                hit = pc.is_in(hashes, value_set=pa.array(sorted(found), pa.string()))
                keep = ~np.asarray(hit.to_numpy(zero_copy_only=False), dtype=bool)
                at, hashes = at[keep], hashes.filter(pa.array(keep))
        return cls(children, hashes, at)

    @property
    def count(self) -> int:
        """How many texts to embed."""
        return len(self.hashes)

    @property
    def rows(self) -> int:
        """How many chunks ``children`` has."""
        return self.children.count_rows() if isinstance(self.children, pads.Dataset) else self.children.num_rows

    def batches(self, sizes: Sequence[int]) -> Iterator[list[str]]:
        """The texts to embed, in order, cut into batches of ``sizes`` (``batches.sizes``
        of ``count``), each read when it is asked for. A row whose text hash is not the
        plan's means the partition changed under the plan: refused."""
        if sum(sizes) != self.count or any(n <= 0 for n in sizes):
            raise ValueError(f"batch sizes {list(sizes)} do not cut the {self.count} text(s) to embed")
        children = self.children
        spans = rows.file_spans(children) if isinstance(children, pads.Dataset) else []
        start = 0
        for n in sizes:
            at = self.at[start : start + n]
            part: pa.Table | None = None
            try:
                if isinstance(children, pads.Dataset):
                    part = rows.take_at(children, spans, ["text_hash", "text"], at)
                else:
                    part = children.select(["text_hash", "text"]).take(pa.array(at, pa.int64()))
            except (IndexError, pa.ArrowIndexError):
                part = None
            got = None if part is None else part.column("text_hash").combine_chunks().cast(pa.string())
            if part is None or got is None or not got.equals(self.hashes.slice(start, n)):
                raise StoreError("child_chunks changed while the embedding plan read it: run the stage again")
            yield rows.strings(part, "text")
            start += n


def texts_to_embed(
    children: pa.Table | pads.Dataset,
    config: EmbeddingConfig,
    cache: EmbeddingCache | None,
    previous: pa.Table | pads.Dataset | None = None,
) -> list[str]:
    """The distinct texts of ``children`` this model has no vector for (``EmbedPlan``),
    as one list."""
    plan = EmbedPlan.of(children, config, cache, previous)
    return [text for batch in plan.batches([plan.count] if plan.count else []) for text in batch]


#: ``embed_batch`` stores its vectors in the cache every this many texts: a run stopped in
#: the middle of a batch (Ctrl-C, a kill, a lost worker) keeps what it embedded, and the
#: re-run's plan asks the model only for the rest.
CHECKPOINT_TEXTS = 256


def embed_batch(
    texts: Sequence[str],
    config: EmbeddingConfig,
    *,
    progress: ProgressFn | None = None,
    cache: EmbeddingCache | None = None,
) -> pa.Table:
    """Passage vectors of one batch of ``texts_to_embed``: a table of ``text_hash`` and
    ``vector`` (Arrow, what the batch step hands to the merge; the model is opened here,
    and closed). With ``cache``, every ``CHECKPOINT_TEXTS`` texts' vectors are stored as
    soon as they exist."""
    if not texts:
        return batch_vectors([], np.zeros((0, 0), dtype=np.float32))
    hashes = [text_hash(t) for t in texts]
    step = CHECKPOINT_TEXTS if cache is not None else len(texts)
    embedder = open_embedder(config)
    try:
        model: Embedder = embedder if progress is None else _Reporting(embedder, config, progress)
        parts = []
        for i in range(0, len(texts), step):
            vecs = model.embed(list(texts[i : i + step]))
            if cache is not None:
                cache.put_many(config.vector_key, dict(zip(hashes[i : i + step], vecs, strict=True)))
            parts.append(vecs)
    finally:
        closer = getattr(embedder, "close", None)
        if callable(closer):
            closer()
    return batch_vectors(hashes, np.concatenate(parts) if len(parts) > 1 else parts[0])


def batch_vectors(hashes: Sequence[str], vecs: np.ndarray) -> pa.Table:
    """``embed_batch``'s table: ``text_hash`` and ``vector`` (fixed-size float32 lists)."""
    vecs = np.ascontiguousarray(vecs, dtype=np.float32)
    dim = int(vecs.shape[1]) if vecs.ndim == 2 and vecs.shape[1] else 1  # (an empty batch: any size)
    vector = pa.FixedSizeListArray.from_arrays(pa.array(vecs.reshape(-1), type=pa.float32()), dim)
    return pa.table({"text_hash": pa.array(list(hashes), pa.string()), "vector": vector})


#: Vectors copied into the output at a time (bounds the copy's temporary).
COPY_ROWS = 16_384


def _rows_in(hashes: Any, value_set: Any, todo: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Of the rows still ``todo``, those whose hash is in ``value_set``: (their row numbers,
    their positions in ``value_set``)."""
    at: Any = pc.index_in(hashes, value_set=value_set)
    pos = np.asarray(pc.fill_null(at, -1).to_numpy(zero_copy_only=False), dtype=np.int64)
    take = np.flatnonzero(todo & (pos >= 0))
    return take, pos[take]


#: The columns of ``child_chunks`` an embed joins on (its text is read only where it must embed).
KEY_COLUMNS = ["chunk_id", "text_hash"]


def chunk_keys(children: pa.Table | pads.Dataset) -> pa.Table:
    """``chunk_id`` and ``text_hash`` of every child, in table order: of a partition's
    dataset, only those two columns are read (at 256k chunks ~25 MB of the table's ~200)."""
    if isinstance(children, pads.Dataset):
        return children.to_table(columns=KEY_COLUMNS)
    return children.select(KEY_COLUMNS)


def _texts_at(children: pa.Table | pads.Dataset, at: np.ndarray) -> list[str]:
    """The texts of rows ``at`` (row numbers in table order)."""
    if isinstance(children, pads.Dataset):
        return rows.strings(children.take(pa.array(at, pa.int64()), columns=["text"]), "text")
    return rows.strings(children.take(at), "text")


#: Rows of the output a streamed embed hands on at a time (``EmbeddedChunks.slices``):
#: ~50 MB of 384-d vectors.
SLICE_ROWS = 32_768


class _Matrix:
    """The output vectors, one row per child: in memory, or (``spill``, a folder) in a
    temporary file there, written and read with plain file I/O (``put``, ``get``): then what
    the process holds is the source being copied in or the slice being read out, not the
    partition's vectors; the file's pages are the kernel's page cache, which it writes out
    and reuses. Not a memory map: a mapped file's pages count in the process's resident
    memory while they are mapped, and where the page cache uses large folios (ext4 on Linux
    6.x) writing one row maps up to megabytes around it: at 50,000 documents the spill
    mapped ~600 MB while one batch's rows, scattered by repeated texts, were copied in."""

    def __init__(self, rows: int, dim: int, spill: Path | None) -> None:
        self.rows, self.dim = rows, dim
        self._file: Any = None
        self._data: np.ndarray | None = None
        if spill is None or rows * dim == 0:
            self._data = np.empty((rows, dim), dtype=np.float32)
            return
        spill.mkdir(parents=True, exist_ok=True)
        # (unlinked at once: gone with the process; closed by ``close``; unbuffered)
        self._file = tempfile.TemporaryFile(dir=spill, prefix="vectors-", buffering=0)  # noqa: SIM115
        self._file.truncate(rows * dim * 4)

    @property
    def spilled(self) -> bool:
        return self._file is not None

    def put(self, dest: np.ndarray, values: np.ndarray) -> None:
        """Rows ``dest`` (row numbers) get ``values``' rows, as ``matrix[dest] = values``
        would (a repeated row: the last wins). In a file, each run of consecutive rows is
        one write."""
        if self._data is not None:
            self._data[dest] = values
            return
        if not dest.size:
            return
        order = np.argsort(dest, kind="stable")
        at = dest[order]
        cuts = np.flatnonzero(np.diff(at) != 1) + 1
        for start, end in zip(np.r_[0, cuts].tolist(), np.r_[cuts, at.size].tolist(), strict=True):
            block = np.ascontiguousarray(values[order[start:end]], dtype=np.float32)
            self._file.seek(int(at[start]) * self.dim * 4)
            view = block.data.cast("B")
            while view:
                view = view[self._file.write(view) :]

    def get(self, start: int, end: int) -> np.ndarray:
        """Rows ``start`` to ``end``: in memory, a view; from the file, read into a new array."""
        if self._data is not None:
            return self._data[start:end]
        out = np.empty((end - start, self.dim), dtype=np.float32)
        view = out.data.cast("B")
        self._file.seek(start * self.dim * 4)
        while view:
            n = self._file.readinto(view)
            if not n:
                raise StoreError(f"the embedding spill file ended before row {end}: the disk it is on may be full")
            view = view[n:]
        return out

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class EmbeddedChunks:
    """``embed_vectors``' result: one vector per child in table order, handed on as whole
    tables of ``chunk_embeddings`` (``table``) or a slice of rows at a time (``slices``,
    what a merge streams into its partition). Close it (or use it as a context manager) to
    let go of its spill file."""

    def __init__(self, keys: pa.Table, model: str, matrix: _Matrix, stats: EmbedStats) -> None:
        self.keys, self.model, self._matrix, self.stats = keys, model, matrix, stats
        self.dimension = matrix.dim
        self.schema = schemas.embeddings_schema(self.dimension)

    @property
    def rows(self) -> int:
        return self.keys.num_rows

    def slices(self, rows: int = SLICE_ROWS) -> Iterator[tuple[pa.Table, pa.Table]]:
        """(embeddings, the children's ``chunk_id`` and ``text_hash``) of consecutive runs of
        ``rows`` rows, in table order."""
        n, dim = self.rows, self.dimension
        for start in range(0, n, rows) if n else [0]:
            end = min(start + rows, n)
            flat = self._matrix.get(start, end).reshape(-1)  # (in memory, a view of the matrix)
            keys = self.keys.slice(start, end - start)
            table = pa.Table.from_pydict(
                {
                    "chunk_id": keys.column("chunk_id"),
                    "model": pa.array([self.model] * (end - start), pa.string()),
                    "text_hash": keys.column("text_hash"),
                    "vector": pa.FixedSizeListArray.from_arrays(pa.array(flat, type=pa.float32()), dim),
                },
                schema=self.schema,
            )
            yield table, keys

    def table(self) -> pa.Table:
        """Every row, one table (what ``embed_chunks`` returns; in memory, no copy)."""
        return pa.concat_tables([t for t, _ in self.slices(rows=max(self.rows, 1))])

    def fingerprint(self) -> str:
        """``table_fingerprint`` of the output's ``chunk_id``, ``text_hash`` and ``model``
        (the asset's data version), from the keys: no vector read."""
        from corpus_pipeline.indexing.table import table_fingerprint

        model = pa.array([self.model] * self.rows, pa.string())
        return table_fingerprint(self.keys.append_column("model", model), ["chunk_id", "text_hash", "model"])

    def close(self) -> None:
        self._matrix.close()

    def __enter__(self) -> EmbeddedChunks:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def embed_chunks(
    children: pa.Table | pads.Dataset,
    config: EmbeddingConfig,
    *,
    cache: EmbeddingCache | None,
    progress: ProgressFn | None = None,
    fresh: Iterable[VectorSource] = (),
    previous: pa.Table | pads.Dataset | None = None,
) -> StageResult:
    """``embed_vectors`` as one table (the ``chunk_embeddings`` rows) and its stats."""
    with embed_vectors(children, config, cache=cache, progress=progress, fresh=fresh, previous=previous) as out:
        return StageResult(out.table(), out.stats)


def embed_vectors(
    children: pa.Table | pads.Dataset,
    config: EmbeddingConfig,
    *,
    cache: EmbeddingCache | None,
    progress: ProgressFn | None = None,
    fresh: Iterable[VectorSource] = (),
    previous: pa.Table | pads.Dataset | None = None,
    spill: Path | None = None,
) -> EmbeddedChunks:
    """One passage vector per child, cached under the model's ``vector_key``.

    Each chunk's vector comes, in this order, from this partition's ``previous``
    embeddings (same text, same model), from ``fresh`` (the vectors the run's batches
    computed, ``embed_batch``; written to the cache here), else from the cache, else is
    embedded here, ``progress`` told as it goes (``embed``, done, total, ``chunks``). The
    first two are joined by text hash in Arrow and copied, a slice at a time, into the
    output matrix, one source at a time: a batch staged on disk (a function in ``fresh``)
    or a file of a ``previous`` dataset is read when its turn comes and let go after, so
    what is held is the output and one source, not every vector twice; with ``spill`` (a
    local folder) the output is a temporary file there, written and read with file I/O
    (``_Matrix``): then only one source is held. No chunk's text or
    vector becomes a Python object unless it must be looked up or embedded. ``children``
    may be the partition's dataset: then only its ``chunk_id`` and ``text_hash`` are read,
    and the text of the rows it must embed."""
    model = config.vector_key
    keys = chunk_keys(children).combine_chunks()
    n = keys.num_rows
    hashes: Any = keys.column("text_hash").combine_chunks()
    todo = np.ones(n, dtype=bool)
    box: list[_Matrix] = []
    first: str = ""  # what set the output's size (for the error when a later source differs)

    def fill(dest: np.ndarray, vecs: np.ndarray, at: np.ndarray | None, what: str) -> None:
        nonlocal first
        if box and not dest.size:
            return
        if not box:
            box.append(_Matrix(n, int(vecs.shape[1]), spill))
            first = what
        out = box[0]
        if vecs.shape[1] != out.dim:
            raise StoreError(
                f"the {first} vectors of model {model!r} have {out.dim} dimensions, "
                f"its {what} ones {vecs.shape[1]}: the model changed under the same name; give it a new name in kb.yaml"
            )
        for i in range(0, dest.size, COPY_ROWS):
            part = slice(i, i + COPY_ROWS)
            out.put(dest[part], vecs[at[part]] if at is not None else vecs[part])
        todo[dest] = False

    try:
        for prev in _previous_parts(previous, model):
            if not todo.any():
                break
            take, pos = _rows_in(hashes, prev.column("text_hash").combine_chunks(), todo)
            fill(take, vectors_of(prev), pos, "previous")
        embedded = 0
        for source in fresh:
            batch = source() if callable(source) else source
            if batch.num_rows == 0:
                continue
            batch_hashes = batch.column("text_hash").combine_chunks()
            vecs = vectors_of(batch)
            take, pos = _rows_in(hashes, batch_hashes, todo)
            if take.size:
                fill(take, vecs, pos, "new")
                embedded += int(np.unique(pos).size)
            if cache is not None:
                cache.put_many(model, dict(zip(rows.strings(batch, "text_hash"), vecs, strict=True)))
            del batch, vecs  # (before the next batch is read)

        def opener() -> Embedder:
            embedder = open_embedder(config)
            return embedder if progress is None else _Reporting(embedder, config, progress)

        rest = np.flatnonzero(todo)
        if rest.size or not box:  # (an empty KB with nothing before it: the model says its size)
            texts = _texts_at(children, rest)
            vecs, newly, _ = embed_with_cache(texts, opener, cache, model_name=model)
            embedded += newly
            fill(rest, vecs, None, "new")
    except BaseException:
        for m in box:
            m.close()
        raise
    matrix = box[0]
    stats = EmbedStats(model=model, embedded=embedded, reused=n - embedded, dimension=matrix.dim)
    return EmbeddedChunks(keys, model, matrix, stats)


def vectors_of(embeddings: pa.Table) -> np.ndarray:
    """The vectors of an embeddings table as a float32 matrix, in row order
    (``schemas.vector_matrix``)."""
    matrix: np.ndarray = schemas.vector_matrix(embeddings.column("vector"))
    return matrix
