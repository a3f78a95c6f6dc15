"""``python -m benchmarks.memory``: an open searcher's memory as its KB grows (see ``run.py``)."""

from benchmarks.memory.run import main

raise SystemExit(main())
