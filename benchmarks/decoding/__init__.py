"""How text files in legacy encodings and corrupted UTF-8 are decoded: ``python -m benchmarks.decoding`` (see ``run.py``)."""
