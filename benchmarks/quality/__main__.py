"""``python -m benchmarks.quality``: what the quality checks cost (see ``run.py``)."""

import sys

from benchmarks.quality.run import main

sys.exit(main())
