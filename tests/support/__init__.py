"""Test helpers shared across test folders (a local OpenAI-compatible server, ...)."""
