"""Tests of corpus_pipeline.vision (a package so that ``tests/`` is on sys.path for ``support``)."""
