#!/usr/bin/env bash
# Install corpus_pipeline into .venv, index the bundled knowledge bases through Dagster
# (SQLite instance, Parquet + LanceDB under data/warehouse, the offline embedding model,
# OCR for images, no LLM), then run one English and one Chinese search. Idempotent; the second run
# re-uses the install and the embedding cache.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/system-deps.sh ocr   # the images are read by OCR when no vision model is configured
scripts/install.sh
export DO_NOT_TRACK=1 HF_HUB_OFFLINE=1
.venv/bin/corpus index
echo
.venv/bin/corpus search "Which port does the web console listen on?" --kb product-manual-en --top-k 3
echo
.venv/bin/corpus search "CPU 使用率持续超过 85% 怎么排查" --kb ops-runbook-zh --top-k 3
