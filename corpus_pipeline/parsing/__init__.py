"""Documents in, blocks out: discovery of a KB's files and parsing them into blocks."""

from corpus_pipeline.doc_formats import parser_version
from corpus_pipeline.parsing.discovery import discover
from corpus_pipeline.parsing.parse import parse_document

#: Bump a format's ``version`` in ``doc_formats.FORMATS`` when its parser's output for the
#: same file can change: a parsed document is reused across runs only while its content hash
#: and its format's parser version are unchanged. This is every format's version at once (``doc_formats``; each row has its own): "2" while
#: all are "2" (2: a text file's "# Title" block is its title, without the marks).
PARSER_VERSION = parser_version()

__all__ = ["PARSER_VERSION", "discover", "parse_document"]
