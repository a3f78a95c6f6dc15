#!/usr/bin/env bash
# Install everything the tests need (apt: tesseract, PostgreSQL; pip: .venv with the
# project and test tools), start a throw-away PostgreSQL, and run the whole test suite.
# Idempotent; arguments go to pytest (e.g. scripts/test.sh -k search). The files are spread
# over one pytest process per core (pytest-xdist; a file's tests stay together, for its
# module fixtures); CORPUS_TEST_PROCESSES=1 runs them in one process.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/system-deps.sh
scripts/install.sh dev
eval "$(scripts/postgres.sh start)"
trap 'scripts/postgres.sh stop "$PGDATA_TMP"' EXIT
export DO_NOT_TRACK=1 HF_HUB_OFFLINE=1
.venv/bin/python -m pytest -n "${CORPUS_TEST_PROCESSES:-auto}" --dist loadfile "$@"
