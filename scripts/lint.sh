#!/usr/bin/env bash
# Lint, format check and type check: ruff (pyproject's rules) and mypy (strict on
# corpus_pipeline/, assets/ and resources/). Installs the dev tools into .venv if needed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh dev
paths=(corpus_pipeline assets resources tests benchmarks scripts)
.venv/bin/ruff check "${paths[@]}"
.venv/bin/ruff format --check "${paths[@]}"
.venv/bin/mypy
