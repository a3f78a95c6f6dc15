"""The store's numbers that settings elsewhere take as defaults (no imports: kb.yaml's
models read them at import time).

An IVF_PQ index pays from about ``VECTOR_INDEX_MIN_ROWS`` rows (``benchmarks/ann``), and its
codebooks (256 codes) are trained on at least 2 rows per code, so a lower threshold than
``VECTOR_INDEX_MIN_ROWS_FLOOR`` is refused (``search.ann_min_rows``).
"""

VECTOR_INDEX_MIN_ROWS = 100_000
VECTOR_INDEX_MIN_ROWS_FLOOR = 512
