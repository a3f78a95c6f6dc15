"""Documents in, blocks out: discovery of a KB's files and parsing them into blocks."""

from corpus_pipeline.parsing.discovery import discover
from corpus_pipeline.parsing.parse import parse_document

#: Bump when the parsers' output for the same file can change: parsed documents are
#: reused across runs only while their content hash and this version are unchanged.
PARSER_VERSION = "2"  # 2: a text file's "# Title" block is its title, without the marks

__all__ = ["PARSER_VERSION", "discover", "parse_document"]
