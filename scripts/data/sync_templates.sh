#!/usr/bin/env bash
# Registry facts from the publishers' own trainer templates (evidence level publisher-template): each entry
# whose drafter was trained from a template the publisher keeps beside its training code is synced from it.
# The pairings are the strong and medium ones of the real-config corpus's MANIFEST.md §5; weak ones (a template
# of a sibling model) are left as open questions in the entries' notes. Usage:
#   bash scripts/data/sync_templates.sh [CORPUS]        (default tests/data/real-configs; add --write to record)
# CORPUS is a folder of publisher configs (trainer templates): the copy committed with the tests by default.
set -euo pipefail
cd "$(dirname "$0")/../.."
CORPUS=${1:-tests/data/real-configs}
shift || true
SPECFORGE=sgl-project/SpecForge/blob/a6b6b0230009d15ec2a97a57384e6f53f0f96946/configs
while read -r entry template url; do
  .venv/bin/eaglezoo registry sync "$entry" --template "$CORPUS/$template" --source "https://github.com/$url" "$@" || true
done <<PAIRS
lmsys-qwen3-235b-a22b-eagle3 templates/sgl-project__SpecForge/configs/qwen3-235B-A22B-eagle3.json $SPECFORGE/qwen3-235B-A22B-eagle3.json
lmsys-eagle3-gpt-oss-120b-bf16 templates/sgl-project__SpecForge/configs/gpt-oss-120B-eagle3.json $SPECFORGE/gpt-oss-120B-eagle3.json
lmsys-sglang-eagle3-llama-3.1-8b-instruct-specforge templates/sgl-project__SpecForge/configs/llama3-8B-eagle3.json $SPECFORGE/llama3-8B-eagle3.json
lmsys-sglang-eagle3-llama-3.3-70b-instruct-specforge templates/sgl-project__SpecForge/configs/llama3-70B-ealge3.json $SPECFORGE/llama3-70B-ealge3.json
lmsys-sglang-eagle3-llama-4-scout-17b-16e-instruct-specforge templates/sgl-project__SpecForge/configs/llama4-scout-17B-16E-eagle3.json $SPECFORGE/llama4-scout-17B-16E-eagle3.json
lmsys-sglang-eagle3-qwen3-coder-30b-a3b-instruct-specforge templates/sgl-project__SpecForge/configs/qwen3-coder-30B-A3B-instruct-eagle3.json $SPECFORGE/qwen3-coder-30B-A3B-instruct-eagle3.json
lightseekorg-kimi-k2.5-eagle3 templates/lightseekorg__TorchSpec/configs/draft_models/kimi_k25_eagle3.json lightseekorg/TorchSpec/blob/6f21829cd0e333c3b54d9d2706a0b0c8dc10de9d/configs/draft_models/kimi_k25_eagle3.json
thoughtworks-minimax-m2.5-eagle3 templates/tails-mpt__SpecForge/configs/minimax-m2-eagle3.json tails-mpt/SpecForge/blob/6124a484b69db759b1ff8530e6f917f7f9321984/configs/minimax-m2-eagle3.json
yuhuili-eagle3-llama3.1-instruct-8b templates/SafeAILab__EAGLE/eagle/traineagle3/config.json SafeAILab/EAGLE/blob/cb7e0841fe0c206c6ed74a197ad5e2a1f13f5a2b/eagle/traineagle3/config.json
PAIRS
