#!/usr/bin/env bash
# Create .venv in the repo root and install corpus_pipeline into it (editable).
# Idempotent: a second run with unchanged pyproject.toml/constraints.txt does nothing.
#   scripts/install.sh            the product
#   scripts/install.sh dev        + test tools
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  for c in python3.11 python3; do
    if command -v "$c" >/dev/null && "$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then PY="$c"; break; fi
  done
fi
[ -n "$PY" ] || { echo "install: Python 3.11 is required (set PYTHON=/path/to/python3.11)" >&2; exit 1; }
[ -x .venv/bin/python ] || "$PY" -m venv .venv
spec="."
[ -n "$extras" ] && spec=".[$extras]"
stamp=".venv/.corpus-installed-${extras:-base}"
want=$(cat pyproject.toml constraints.txt scripts/install.sh | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
pip=(.venv/bin/python -m pip install --disable-pip-version-check -q)
# torch first, pinned: the CPU wheel on this machine; anything else pulls a multi-GB CUDA build.
"${pip[@]}" "torch==2.13.0"
"${pip[@]}" -c constraints.txt -e "$spec"
echo "$want" > "$stamp"
