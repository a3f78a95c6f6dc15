#!/usr/bin/env bash
# System packages, installed with apt only when missing.
#   scripts/system-deps.sh ocr     what the main job uses: tesseract (OCR of images, English +
#                                  Simplified Chinese)
#   scripts/system-deps.sh         everything the tests need: OCR, PostgreSQL (the
#                                  dagster-postgres test), Redis (the Celery broker of the
#                                  distributed run's test), a CJK font (Chinese test images),
#                                  Chromium and its driver (the web page's browser test)
set -euo pipefail
what="${1:-all}"
need=()
command -v tesseract >/dev/null || need+=(tesseract-ocr)
if ! command -v tesseract >/dev/null || ! tesseract --list-langs 2>/dev/null | grep -qx chi_sim; then
  need+=(tesseract-ocr-chi-sim)
fi
if [ "$what" = all ]; then
  ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1 || need+=(postgresql)
  command -v redis-server >/dev/null || need+=(redis-server)
  fc-list 2>/dev/null | grep -qi "wqy-microhei\|WenQuanYi Micro Hei" || need+=(fonts-wqy-microhei)
  command -v chromium >/dev/null || need+=(chromium)
  command -v chromedriver >/dev/null || need+=(chromium-driver)
fi
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ]; then sudo=(); elif command -v sudo >/dev/null; then sudo=(sudo); else
  echo "system-deps: missing ${need[*]}; install them with apt (needs root)" >&2; exit 1
fi
echo "system-deps: apt-get install ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
