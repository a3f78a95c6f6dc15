"""Path globs as kb.yaml means them (``include``, ``exclude``, ``overrides``, quality bounds)."""

from __future__ import annotations

import fnmatch


def match_glob(rel_path: str, pattern: str) -> bool:
    """Glob matching where ``**/`` also matches zero folders (``**/*.md`` matches ``a.md``)."""
    if fnmatch.fnmatchcase(rel_path, pattern):
        return True
    if pattern.startswith("**/") and fnmatch.fnmatchcase(rel_path, pattern[3:]):
        return True
    return "/**/" in pattern and fnmatch.fnmatchcase(rel_path, pattern.replace("/**/", "/"))
