"""``python -m benchmarks.search``: search latency and retrieval quality (see ``run.py``)."""

import sys

from benchmarks.search.run import main

sys.exit(main())
