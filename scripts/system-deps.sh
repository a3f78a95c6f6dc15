#!/usr/bin/env bash
# System packages the tests need: tesseract (OCR, English + Simplified Chinese) and
# PostgreSQL (the dagster-postgres test). Installs with apt only what is missing.
set -euo pipefail
need=()
command -v tesseract >/dev/null || need+=(tesseract-ocr)
if command -v tesseract >/dev/null && ! tesseract --list-langs 2>/dev/null | grep -qx chi_sim; then need+=(tesseract-ocr-chi-sim); fi
command -v tesseract >/dev/null || need+=(tesseract-ocr-chi-sim)
ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1 || need+=(postgresql)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ]; then sudo=(); elif command -v sudo >/dev/null; then sudo=(sudo); else
  echo "system-deps: missing ${need[*]}; install them with apt (needs root)" >&2; exit 1
fi
echo "system-deps: apt-get install ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
