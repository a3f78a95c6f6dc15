"""``python -m benchmarks.chunking``: run the chunking benchmark (see ``run.py``)."""

from benchmarks.chunking.run import main

raise SystemExit(main())
