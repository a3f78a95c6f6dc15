"""The HTTP server of ``corpus serve`` (FastAPI): see ``corpus_pipeline.serve.app``."""
