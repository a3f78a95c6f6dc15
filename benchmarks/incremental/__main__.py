"""``python -m benchmarks.incremental``: run the incremental re-indexing benchmark (see ``run.py``)."""

from benchmarks.incremental.run import main

raise SystemExit(main())
