"""Chunking benchmark: corpus_pipeline's RECURSIVE and STRUCTURE->RECURSIVE against peers."""
