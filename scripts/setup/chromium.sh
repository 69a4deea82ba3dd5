#!/usr/bin/env bash
# Debian's Chromium, for the tests that render eaglezoo's HTML pages in a real browser (tests/pages/test_pages_in_browser.py).
# Skipped quietly where it cannot be installed: those tests then skip, saying why.
set -uo pipefail
command -v chromium >/dev/null && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  timeout 600 apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 \
    || { timeout 300 apt-get update -q >/dev/null 2>&1 && timeout 600 apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1; } \
    || echo "chromium could not be installed: the browser tests will skip" >&2
fi
exit 0
