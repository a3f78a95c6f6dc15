"""``python -m benchmarks.retrieval``: index KB folders, evaluate the product and its peers (see ``run.py``)."""

import sys

from benchmarks.retrieval.run import main

sys.exit(main())
