#!/usr/bin/env bash
# The main job on the embedded example (README): convert the SafeAILab-dialect drafters shipped in
# examples/tiny to the EAGLE 3.1 schema, lint them against their target, and measure acceptance.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export TRANSFORMERS_VERBOSITY=error
EZ=.venv/bin/eaglezoo
EX=examples/tiny
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
for d in eagle3 eagle31; do
  echo; echo "=== $d: convert (SafeAILab dialect -> EAGLE 3.1 schema)"
  # SafeAILab configs carry no aux ids; the example drafters were trained on boundary states 2,3,4
  # (HF hidden_states[2..4] of the 4-layer target; 4 = the last layer's pre-norm output).
  $EZ convert "$EX/$d-safeai" "$OUT/$d" --target "$EX/target" --aux-layers 2,3,4 --aux-convention boundary
  echo; echo "=== $d: lint"
  $EZ lint "$OUT/$d" --target "$EX/target"
  echo; echo "=== $d: verify (K=3, held-out prompts, CPU)"
  $EZ verify "$OUT/$d" --target "$EX/target" --prompts "$EX/prompts.jsonl" --device auto
done
