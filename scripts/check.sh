#!/usr/bin/env bash
# The rules CI checks before pytest, fast (scripts/test.sh runs this first; run it alone before a commit):
# ruff's lint rules and its format, mypy on the strict modules (pyproject.toml [tool.mypy]), and the layering test.
# Every check runs, then the exit status is 1 if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
for tool in ruff mypy; do
  if [ ! -x "$VENV/bin/$tool" ]; then
    echo "error: $VENV/bin/$tool is missing (hint: $VENV/bin/pip install -e '.[test]')" >&2
    exit 2
  fi
done
failed=()
check() {
  echo "== $*"
  "$@" || failed+=("$*")
}
check "$VENV/bin/ruff" check --output-format concise .
check "$VENV/bin/ruff" format --check --output-format concise .
check "$VENV/bin/mypy"
check "$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/unit/test_layering.py
if [ ${#failed[@]} -gt 0 ]; then
  printf 'failed: %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "all checks passed"
