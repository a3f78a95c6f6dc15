"""Documents in, blocks out: discovery of a KB's files and parsing them into blocks."""

from corpus_pipeline.parsing.discovery import DiscoveredFile, discover
from corpus_pipeline.parsing.parse import parse_document

__all__ = ["DiscoveredFile", "discover", "parse_document"]
