"""``python -m benchmarks.decoding``: legacy encodings and corrupted UTF-8 through the decoder (see ``run.py``)."""

import sys

from benchmarks.decoding.run import main

sys.exit(main())
