"""Making ``unstructured`` run offline, once, when the parsing package is imported.

``unstructured`` downloads the spaCy model ``en_core_web_sm`` the first time it classifies
a paragraph (``partition/text_type.py`` -> ``nlp/tokenize.py::_get_nlp``); with no network
every partition call fails, and PDF fast mode even returns no elements silently. It also
phones home unless told not to.

What we do instead of downloading a model (an unverified re-upload is the alternative):

* ``DO_NOT_TRACK=1`` and ``UNSTRUCTURED_DISABLE_NOTICE=1`` (only if the user has not set them);
* replace the private ``unstructured.nlp.tokenize._get_nlp`` (looked up at each call) with a
  blank spaCy pipeline: the rule-based ``sentencizer`` for sentence counts and a one-line
  tagger that tags every alphabetic token as a verb.

The effect is deliberate: unstructured's narrative-vs-title guess then says "narrative" for
any text with letters, so a title only ever comes from the document's structure (HTML
``h1``-``h6``, DOCX heading styles, markdown ``#``), never from a guess that a short
sentence has no verb. That guess is wrong for Chinese anyway (no English POS tags). Only
paragraph classification used spaCy; headings, lists, tables and code never did.

``ensure_offline()`` is idempotent and cheap; ``corpus_pipeline.parsing`` calls it at import.
"""

from __future__ import annotations

import os
import threading
from typing import Any

_lock = threading.Lock()
_nlp: Any = None
_TAGGER = "corpus_pipeline_verb_tagger"


def _blank_pipeline() -> Any:
    import spacy
    from spacy.language import Language

    if not Language.has_factory(_TAGGER):

        @Language.component(_TAGGER)
        def _tag_words_as_verbs(doc: Any) -> Any:
            for token in doc:
                token.tag_ = "VB" if token.is_alpha else "X"
            return doc

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.add_pipe(_TAGGER)
    return nlp


def _get_nlp() -> Any:
    global _nlp
    with _lock:
        if _nlp is None:
            _nlp = _blank_pipeline()
        return _nlp


def ensure_offline() -> None:
    """Set the no-telemetry variables and point unstructured's spaCy loader at a blank pipeline."""
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("UNSTRUCTURED_DISABLE_NOTICE", "1")
    os.environ.setdefault("SCARF_NO_ANALYTICS", "true")
    import unstructured.nlp.tokenize as tokenize

    if getattr(tokenize._get_nlp, "__module__", "") != __name__:
        tokenize._get_nlp = _get_nlp  # type: ignore[assignment]  # the documented patch point (docs/parsing.md)
