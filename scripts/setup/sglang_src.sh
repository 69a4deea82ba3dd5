#!/usr/bin/env bash
# SGLang 0.5.23's own source, from its wheel on PyPI (pip download --no-deps), unpacked once per machine into a cache
# outside the checkout, keyed by the version. No SGLang runs on these machines: the tests of doctor's SGLang rules
# (tests/cli/doctor/test_doctor_sglang.py) answer as an SGLang server with bodies built from this source
# (tests/support/sglang_source.py: its pydantic protocol models, its ServerArgs field namespaces read with ast).
#
#   bash scripts/setup/sglang_src.sh [PYTHON]     # prints the folder (PYTHON, default .venv/bin/python, runs pip)
#
# Layout: $EAGLEZOO_SGLANG_SRC (default ${XDG_CACHE_HOME:-~/.cache}/eaglezoo/sglang-0.5.23)/sglang/... (the wheel's
# package, unpacked whole). The wheel is checked against its sha256. Idempotent: a complete folder is kept.
set -euo pipefail
cd "$(dirname "$0")/../.."
VERSION=0.5.23
WHEEL=sglang-$VERSION-cp311-cp311-manylinux_2_34_x86_64.whl
SHA256=00b3cd5b265ac76c64185fbb6b95424f324ddd9f428d0306b77bc9db9d859937
DEST=${EAGLEZOO_SGLANG_SRC:-${XDG_CACHE_HOME:-$HOME/.cache}/eaglezoo/sglang-$VERSION}
PY=${1:-.venv/bin/python}
if [ -f "$DEST/.complete" ]; then
  echo "$DEST"
  exit 0
fi
mkdir -p "$(dirname "$DEST")"
TMP=$(mktemp -d "$(dirname "$DEST")/.sglang-$VERSION.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
"$PY" -m pip download -q --disable-pip-version-check --no-deps "sglang==$VERSION" -d "$TMP/wheel" \
  --only-binary :all: --python-version 3.11 --platform manylinux_2_34_x86_64 >&2
echo "$SHA256  $TMP/wheel/$WHEEL" | sha256sum -c --quiet -
"$PY" -m zipfile -e "$TMP/wheel/$WHEEL" "$TMP/src"
rm -rf "$TMP/wheel"
touch "$TMP/src/.complete"
rm -rf "$DEST"
mv "$TMP/src" "$DEST"
trap - EXIT
echo "$DEST"
