"""``python -m benchmarks.embedders``: run the embedder benchmark (see ``run.py``)."""

from benchmarks.embedders.run import main

raise SystemExit(main())
