"""Tests of corpus_pipeline.parsing (a package so that ``tests/`` is on sys.path for ``support``)."""
