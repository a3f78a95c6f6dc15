"""Tests of corpus_pipeline.chunking (a package so that ``tests/`` is on sys.path for ``chunking.helpers``)."""
