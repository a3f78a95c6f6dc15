"""``python -m benchmarks.scale``: run the scale benchmark (see ``run.py``)."""

from benchmarks.scale.run import main

raise SystemExit(main())
