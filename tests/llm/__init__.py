"""Tests of corpus_pipeline.llm and the LLM strategies (a package so ``tests/`` is on sys.path)."""
