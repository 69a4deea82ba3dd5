"""The catalogue of finding codes: every stable code eaglezoo reports (a lint finding, a refusal of the reader, a
refusal of verify or serve-config), its one severity, what it means and how to fix it. The README promises stable
codes; this is where they are kept. `docs/lint-codes.md` is written from it (scripts/docs/write_lint_codes.py),
and tests/unit/checkpoint/test_codes.py fails on any code eaglezoo emits that is not here, or emits at another
severity."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning", "info"]
# Where a code arises, in the order the docs list them
Group = Literal[
    "reading",
    "tensors",
    "target",
    "config",
    "traps",
    "families",
    "values",
    "provenance",
    "engines",
    "gguf",
    "refusals",
    "doctor-sglang",
    "doctor-llamacpp",
    "doctor-probes",
    "doctor-vllm",
]
GROUPS: dict[Group, str] = {
    "reading": "Reading the drafter (the reader refuses; lint reports the refusal as an error and reads on past "
    "the aux ids and an ambiguous flag)",
    "tensors": "Tensors against the config (`checkpoint/problems.check_tensors`)",
    "target": "The drafter against its target (`--target`)",
    "config": "Config keys (`checkpoint/problems.config_findings`)",
    "traps": "Publishers' config traps (`checkpoint/traps.py`, found on the real-config corpus)",
    "families": "The parallel families: P-EAGLE, DFlash, DSpark (`checkpoint/problems.family_findings`)",
    "values": "Tensor values (a local folder; remote lint reads the small tensors only)",
    "provenance": "Provenance (`conversion.json`)",
    "engines": "Engines and what lint read",
    "gguf": "llama.cpp's GGUF (`lint DRAFT.gguf`, read as llama.cpp b11434 reads it: "
    "`checkpoint/formats/gguf_read.py`; `convert --to gguf`'s refusal; SRC in a fix: the drafter's safetensors "
    "folder)",
    "refusals": "Refusals of verify and serve-config (the stable `code` of the `--json` error)",
    "doctor-sglang": "doctor on an SGLang server (`findings[].cause` of its report; SGLang rules checked against its "
    "source (0.5.23), not a running server; docs/doctor.md says how each is found) and the engine releases known to "
    "serve a drafter wrongly (`eaglezoo/engine_versions.py`)",
    "doctor-llamacpp": "doctor on a llama-server (`findings[].cause` of its report: the drafter GGUF it serves, "
    "`--served-gguf`, read as llama.cpp b11434 reads it, against the drafter named; each confirmed on the native "
    "reference)",
    "doctor-probes": "doctor's A/B probes of the workload (`doctor --endpoint URL --requests FILE --probe LIST`: "
    "`findings[].cause`, verdict workload; confirmed where the probe's interval separates from your requests' own)",
    "doctor-vllm": "doctor on a vLLM server, the causes of the parallel families and of ambiguous files "
    "(`findings[].cause` of its report; each confirmed by its fix trial on the native reference, or seen in the "
    "server's own rates; docs/doctor.md says how each is found)",
}


@dataclass(frozen=True)
class Code:
    code: str
    severity: Severity
    group: Group
    meaning: str
    fix: str


def _codes(*codes: Code) -> dict[str, Code]:
    table = {c.code: c for c in codes}
    assert len(table) == len(codes), "a code is catalogued twice"
    return table


# the fixes most gguf codes share: write the GGUF again from the drafter's safetensors folder SRC (every key
# written explicitly), or serve that folder with vLLM
GGUF_CONVERT = "eaglezoo convert SRC OUT --to gguf --target TARGET"
GGUF_FIX = f"`{GGUF_CONVERT}`"
GGUF_VLLM = "serve it with vLLM: `eaglezoo serve-config SRC --target TARGET --engine vllm`"

# the three severities, short for the table below
ERR: Severity = "error"
WARN: Severity = "warning"
INFO: Severity = "info"

CODES: dict[str, Code] = _codes(
    # reading
    Code(
        "aux-ids-missing",
        ERR,
        "reading",
        "the drafter states no aux-layer ids, so each engine would capture its own default layers",
        "write the ids the drafter was trained on into config.json, or give them with --aux-layers",
    ),
    Code(
        "aux-convention-unknown",
        ERR,
        "reading",
        "aux ids in a place whose convention (boundary or layer-output) the dialect does not document",
        "state it with --aux-convention boundary|layer-output",
    ),
    Code(
        "aux-ids-disagree",
        ERR,
        "reading",
        "the config carries two aux-id lists that select different layers",
        "one list was copied across conventions without the +1 (vLLM #43671): fix the wrong one",
    ),
    Code(
        "aux-count",
        ERR,
        "reading",
        "the number of aux ids differs from num_aux_hidden_states",
        "give as many aux ids as the drafter has aux slots (--aux-layers), or fix config.json",
    ),
    Code(
        "aux-ids-duplicate",
        ERR,
        "reading",
        "the aux ids are not distinct: two slots capture the same layer",
        "fix the ids (--aux-layers) or config.json",
    ),
    Code(
        "flag-ambiguous",
        ERR,
        "reading",
        "a norm flag whose meaning in this dialect depends on how it was trained",
        "state the trained behaviour with --flag NAME=true|false",
    ),
    Code(
        "flags-exclusive",
        ERR,
        "reading",
        "fc_norm and norm_before_fc are both true; they exclude each other "
        "(speculators rejects it, vLLM silently applies both)",
        "set one of them to false (3.1 drafters use fc_norm)",
    ),
    Code(
        "family-field",
        ERR,
        "reading",
        "a P-EAGLE, DFlash or DSpark key is absent or of the wrong type (mask_token_id, block_size, a flag)",
        "write the trained value into config.json",
    ),
    Code(
        "family-unsupported",
        ERR,
        "reading",
        "the folder holds another kind of model (DSpark heads inside a "
        "target, an MTP head, a PARD drafter), not a drafter eaglezoo reads",
        "use the tool the message names for it",
    ),
    Code(
        "not-a-drafter",
        ERR,
        "reading",
        "the config is not an EAGLE drafter's (no draft vocabulary, EAGLE keys or "
        "EAGLE architecture): often a target's config; or a GGUF of another architecture than eagle3 or dflash",
        "give the drafter's config.json (or its GGUF); pass a target with --target",
    ),
    # tensors
    Code(
        "missing",
        ERR,
        "tensors",
        "a tensor the config implies is absent (d2t included where the draft vocabulary is reduced)",
        "ship the tensor, or fix the config that implies it",
    ),
    Code(
        "unexpected",
        ERR,
        "tensors",
        "a tensor that does not belong to the drafter the config describes",
        "fix the config, or name the dialect with --from if it was misdetected",
    ),
    Code(
        "shape",
        ERR,
        "tensors",
        "a tensor's shape differs from what the config implies",
        "fix the config key the shape comes from, or the checkpoint",
    ),
    Code(
        "fc-fan-in",
        ERR,
        "tensors",
        "fc.weight's fan-in is not the aux count times target_hidden_size",
        "fix the aux count or target_hidden_size in the config",
    ),
    Code(
        "lm-head-rows",
        ERR,
        "tensors",
        "lm_head.weight's rows differ from the draft vocabulary",
        "set draft_vocab_size to the lm_head rows (SafeAILab #249)",
    ),
    Code(
        "d2t-dtype",
        ERR,
        "tensors",
        "d2t is not integer offsets",
        "store d2t as int64 offsets (target_id = draft_id + d2t[draft_id], docs/formats.md#vocabulary-maps)",
    ),
    Code("t2d-dtype", ERR, "tensors", "t2d is not a bool mask", "store t2d as a bool mask over the target vocabulary"),
    Code(
        "embed-missing",
        ERR,
        "tensors",
        "hidden_size differs from target_hidden_size and the drafter ships no embed_tokens.weight (vLLM #18906)",
        "ship the drafter's own embed_tokens.weight",
    ),
    Code(
        "dtype-complex",
        ERR,
        "tensors",
        "a complex-valued weight: engines would drop the imaginary part",
        "export the drafter again with real float weights, e.g. bfloat16",
    ),
    Code(
        "flag-without-tensors",
        ERR,
        "tensors",
        "fc_norm or norm_before_fc is true but its trained tensors are absent",
        "never switch a norm flag on without its tensors (docs/formats.md#no-weight-level-conversion)",
    ),
    Code(
        "tensors-without-flag",
        ERR,
        "tensors",
        "trained fc_norm or input_norm tensors are present but their flag is false",
        "set the flag true in the config",
    ),
    Code(
        "vocab-map-missing",
        ERR,
        "tensors",
        "the draft vocabulary is smaller than the target's and the draft->target map is absent",
        "ship d2t (draft id -> target id offsets)",
    ),
    # target
    Code(
        "aux-ids-range",
        ERR,
        "target",
        "the aux ids select layers outside the target",
        "check the convention: layer-output ids are boundary ids minus one (docs/formats.md#aux-layer-conventions)",
    ),
    Code(
        "aux-ids-embedding",
        WARN,
        "target",
        "boundary id 0 captures the embedding output, not a layer",
        "check the ids' convention: in the layer-output convention 0 is the first layer",
    ),
    Code(
        "target-hidden-mismatch",
        ERR,
        "target",
        "the target's hidden_size is not the drafter's target_hidden_size",
        "check that this is the drafter's target",
    ),
    Code(
        "vocab-mismatch",
        ERR,
        "target",
        "the target's vocabulary differs from the drafter's",
        "draft and target must share one tokenizer (SafeAILab #258)",
    ),
    Code(
        "context-rope",
        WARN,
        "target",
        "the drafter's context is shorter than the target's, or its RoPE differs from the target's",
        "verify at the context you serve; keep the drafter's RoPE if it was trained so",
    ),
    Code(
        "embed-shape",
        ERR,
        "target",
        "the drafter's embed_tokens has another shape than the target's",
        "ship the target's embedding shape, or none",
    ),
    Code(
        "embed-differs",
        WARN,
        "target",
        "embed_tokens differs from the target's, so engines will not share it (vLLM compares with torch.equal)",
        "fine only if the drafter was trained with its own embedding",
    ),
    Code(
        "target-layers",
        WARN,
        "target",
        "a block drafter trained on a target with another layer count",
        "check that this is the drafter's target",
    ),
    # config
    Code(
        "norm-before-residual-implicit",
        WARN,
        "config",
        "norm_before_residual is not written: vLLM's HF path reads false, its speculators path true",
        "write it explicitly (convert does; docs/formats.md#residual-norm-default)",
    ),
    Code(
        "tie-word-embeddings",
        ERR,
        "config",
        "tie_word_embeddings is true: SGLang ties lm_head to embed_tokens and "
        "transformers may overwrite the draft-vocabulary lm_head",
        "write tie_word_embeddings: false",
    ),
    Code(
        "target-hidden-null",
        WARN,
        "config",
        "target_hidden_size is null outside the speculators format: vLLM's HF path computes None * k and crashes",
        "write target_hidden_size, or drop the key (convert does)",
    ),
    Code(
        "target-hidden-null-speculators",
        INFO,
        "config",
        "target_hidden_size is null in a speculators config, its way "
        "of saying hidden_size; copied into an HF-style config it crashes vLLM's HF path",
        "nothing to fix here; convert drops the key when it writes another schema",
    ),
    # traps
    Code(
        "aux-ids-top-level-only",
        WARN,
        "traps",
        "aux ids at the top level only: SGLang reads eagle_config's alone and falls back to its default",
        "write them in eagle_config too, layer-output (convert --to eagle31 writes both)",
    ),
    Code(
        "aux-count-implicit",
        WARN,
        "traps",
        "not 3 aux ids and no num_aux_hidden_states: vLLM takes the count from "
        "that key or the nested ids, else 3 (speculators #1065)",
        "keep only the ids the drafter consumes and write num_aux_hidden_states",
    ),
    Code(
        "use-aux-unstated",
        INFO,
        "traps",
        "eagle_config has no use_aux_hidden_state: engines assume true",
        "write use_aux_hidden_state: true in eagle_config",
    ),
    Code(
        "draft-vocab-full",
        INFO,
        "traps",
        "the draft vocabulary is the whole vocabulary (no d2t/t2d map)",
        "nothing to fix for serving (docs/formats.md#identity-vocabulary-maps); a reduced draft vocabulary is a "
        "training choice",
    ),
    Code(
        "target-hidden-redundant",
        WARN,
        "traps",
        "target_hidden_size present and equal to hidden_size: SafeAILab's "
        "loader then expects the drafter's own embed_tokens",
        "drop target_hidden_size, or ship embed_tokens.weight",
    ),
    Code(
        "head-dim-explicit",
        INFO,
        "traps",
        "heads x head_dim differs from hidden_size; SafeAILab's loader assumes head_dim = hidden_size / heads",
        "keep head_dim explicit and serve with vLLM or SGLang (docs/formats.md#head-dim)",
    ),
    Code(
        "context-unstated",
        WARN,
        "traps",
        "no max_position_embeddings: a loader takes LlamaConfig's 2048 or the target's",
        "write the context the drafter was trained for",
    ),
    Code(
        "context-short",
        WARN,
        "traps",
        "a short max_position_embeddings: longer prompts run the drafter past its stated context (vLLM #48894)",
        "verify at the context you serve; raise it only if trained longer",
    ),
    Code(
        "rope-theta-unstated",
        WARN,
        "traps",
        "no rope_theta: the loaders' default 10000 applies",
        "write rope_theta explicitly (docs/formats.md#rope-theta-default)",
    ),
    Code("rope-scaling-legacy", INFO, "traps", "rope_scaling uses the legacy key `type`", "write rope_type"),
    Code(
        "drafter-sliding-window",
        WARN,
        "traps",
        "the drafter layer attends through a sliding window",
        "fine if trained so; check that the engine applies the window (verify at long context)",
    ),
    Code(
        "sliding-window-contradiction",
        INFO,
        "traps",
        "use_sliding_window is false but sliding_window is set",
        "set sliding_window to null",
    ),
    Code(
        "model-type-unusual",
        INFO,
        "traps",
        "a model_type other than llama: engines build a Llama-style drafter layer",
        "write model_type llama unless the engine has a drafter class for this type",
    ),
    Code("nonstandard-keys", INFO, "traps", "keys no engine reads (carried through unchanged)", "nothing to fix"),
    Code(
        "dtype-key-v5",
        INFO,
        "traps",
        "the dtype is under `dtype` (transformers v5) only",
        "write torch_dtype as well for loaders before transformers 4.56",
    ),
    Code(
        "dtype-float16",
        INFO,
        "traps",
        "torch_dtype float16: a bf16 server casts the weights",
        "serve with --dtype float16 where the target allows it",
    ),
    Code(
        "moe-drafter",
        WARN,
        "traps",
        "a mixture-of-experts drafter layer: the engines' EAGLE-3 drafter layer is dense",
        "serve it with the engine class its trainer names, or train a dense drafter",
    ),
    Code(
        "architecture-unknown",
        WARN,
        "traps",
        "an architecture no engine registers as an EAGLE-3 drafter",
        "write an architecture the engine registers (convert --to eagle31 picks one)",
    ),
    Code(
        "eagle31-flags",
        INFO,
        "traps",
        "EAGLE 3.1 flags are set: older engines run it as EAGLE-3",
        "serve with vLLM >= 0.22 (MLA >= 0.23) or SGLang >= 0.5.23",
    ),
    Code(
        "speculators-3.1-variant",
        INFO,
        "traps",
        "norm_before_fc + norm_output without fc_norm: speculators' variant, not the paper's EAGLE 3.1",
        "nothing to fix (docs/formats.md#speculators-norm-variant)",
    ),
    Code(
        "verifier-local-path",
        WARN,
        "traps",
        "speculators_config.verifier.name_or_path is a local path: vLLM resolves it as a Hub repo id",
        "write the target's Hub repo id there (docs/formats.md#method-and-verifier-path)",
    ),
    # families
    Code(
        "mask-token-range",
        ERR,
        "families",
        "mask_token_id is outside the vocabulary",
        "use the mask token the drafter was trained with",
    ),
    Code(
        "mask-token-real",
        WARN,
        "families",
        "mask_token_id is one of the target's special tokens (bos, eos, pad)",
        "the mask slots must hold a token the text never contains",
    ),
    Code(
        "mask-token-template",
        WARN,
        "families",
        "mask_token_id is a token the target's chat template writes into every conversation",
        "train with a mask token the template never emits",
    ),
    Code("block-size-context", ERR, "families", "block_size is above the drafter's context", "fix block_size"),
    Code(
        "anchor-layout",
        WARN,
        "families",
        "DSpark's sample_from_anchor is unstated, and the tools' defaults differ",
        "write the trained value of sample_from_anchor into config.json",
    ),
    Code(
        "window-causality",
        WARN,
        "families",
        "DFlash's sliding_window_non_causal is unstated, and the tools' defaults differ",
        "write the trained value of sliding_window_non_causal into config.json",
    ),
    Code(
        "config-k-beyond-block",
        ERR,
        "families",
        "the config's own proposal (speculators_config speculative_tokens) is beyond what its block drafts",
        "set speculative_tokens to the K the message names, or less",
    ),
    Code(
        "requirement-k-beyond-block",
        ERR,
        "families",
        "the registry entry's recommended K is beyond what the drafter's block drafts in one step",
        "fix requirements.recommended_k to the K the message names, or less",
    ),
    Code(
        "requirement-context",
        WARN,
        "config",
        "the registry entry's trained context length is beyond the drafter's max_position_embeddings",
        "check the trained context against the drafter's config",
    ),
    Code(
        "engine-ignores",
        INFO,
        "families",
        "vLLM's speculators path does not carry DFlash's block_size: K comes from num_speculative_tokens alone",
        "serve with K <= block_size - 1",
    ),
    Code(
        "engine-drops-flags",
        ERR,
        "families",
        "vLLM's speculators path drops a P-EAGLE drafter's fc_norm and norm_output, so it serves another drafter",
        "convert it with --to native, whose config vLLM reads whole",
    ),
    Code(
        "lm-head-borrowed",
        WARN,
        "families",
        "a block drafter ships an lm_head over the full vocabulary: vLLM uses "
        "the target's when identical, this one otherwise",
        "drop it unless it was trained",
    ),
    # values
    Code("nan-inf", ERR, "values", "NaN or Inf values in a tensor", "re-export the checkpoint from training"),
    Code(
        "norm-zero",
        ERR,
        "values",
        "a norm's weight is all zeros: it erases its input",
        "re-export the checkpoint from training",
    ),
    Code(
        "norm-untrained",
        WARN,
        "values",
        "a norm's weight is all ones: never trained, or defaulted by a converter (speculators #812)",
        "check the training run's checkpoint; a converter must copy the norm",
    ),
    Code(
        "duplicate-aux-slots",
        ERR,
        "values",
        "two aux slots' fc columns are identical: one layer was captured twice",
        "retrain with distinct aux ids",
    ),
    Code(
        "duplicate-aux-norms",
        WARN,
        "values",
        "two aux slots' fc_norm weights are identical (and trained)",
        "check that the same aux layer was not captured twice in training",
    ),
    Code(
        "vocab-map-trivial",
        WARN,
        "values",
        "d2t is all zeros: draft ids map to the first target ids",
        "a real map keeps the most frequent tokens (SafeAILab #222)",
    ),
    Code(
        "vocab-map-invalid",
        ERR,
        "values",
        "d2t or t2d breaks an invariant of the vocabulary maps",
        "see the invariants in docs/formats.md#vocabulary-maps",
    ),
    Code(
        "values-skipped",
        INFO,
        "values",
        "remote lint did not download the values of the large tensors",
        "lint a local copy for the NaN/Inf and duplicated-slot checks",
    ),
    # provenance
    Code("provenance-unreadable", WARN, "provenance", "conversion.json is not readable", "convert again, or remove it"),
    Code(
        "aux-ids-changed",
        ERR,
        "provenance",
        "the aux ids were edited after conversion",
        "restore the recorded ids (ids copied across conventions are off by one, vLLM #43671)",
    ),
    Code(
        "flags-changed",
        ERR,
        "provenance",
        "a norm flag was edited after conversion",
        "restore the recorded value, or convert again from the source with --flag NAME=VALUE",
    ),
    # engines
    Code("aux-ids", INFO, "engines", "the aux ids as read, in each engine's convention", "nothing to fix"),
    Code(
        "reader",
        WARN,
        "engines",
        "what the dialect's reader noticed in the config (e.g. a key the speculators format has no place for, a "
        "verifier path left null)",
        "as the message says",
    ),
    Code(
        "dialect-undetermined",
        INFO,
        "engines",
        "a config alone names no known dialect: read as a flat Llama-style EAGLE-3 config",
        "lint the drafter's folder, or name the dialect with --from DIALECT",
    ),
    Code(
        "engine-unfaithful",
        WARN,
        "engines",
        "an engine cannot serve this drafter faithfully",
        "serve it with another engine (serve-config lists them), or convert it",
    ),
    # gguf (checkpoint/formats/gguf_read.py; the llama.cpp source lines are cited in the findings' messages)
    Code(
        "gguf-family",
        INFO,
        "gguf",
        "the GGUF's architecture (eagle3 or dflash), checked as llama.cpp b11434 reads it",
        "nothing to fix",
    ),
    Code("gguf-taps", INFO, "gguf", "the taps (`{arch}.target_layers`) as read, boundary ids", "nothing to fix"),
    Code(
        "gguf-taps-missing",
        ERR,
        "gguf",
        "no `{arch}.target_layers`: llama.cpp refuses to load the drafter",
        GGUF_FIX,
    ),
    Code(
        "gguf-taps-count",
        ERR,
        "gguf",
        "an EAGLE-3 GGUF with other than 3 taps: llama.cpp loads one with exactly 3",
        GGUF_VLLM,
    ),
    Code(
        "gguf-taps-repeated",
        ERR,
        "gguf",
        "the taps repeat a layer (`[2, 2, 1]`: what llama.cpp's converter bakes for a target of 4 or 5 layers)",
        f"`{GGUF_CONVERT} --aux-layers A,B,C --aux-convention boundary|layer-output` (the ids it was trained on)",
    ),
    Code(
        "gguf-taps-out-of-range",
        ERR,
        "gguf",
        "a tap above the target's layer count: llama-server aborts",
        "lint against the target the drafter was trained for (`eaglezoo lint DRAFT.gguf --target TARGET`), or "
        + GGUF_FIX,
    ),
    Code(
        "gguf-taps-default",
        WARN,
        "gguf",
        "the taps are `[2, L//2, L-3]`, what llama.cpp's converter bakes when the drafter's config has no top-level "
        "aux ids: if the drafter was trained on other layers, acceptance collapses and nothing errors",
        f"`{GGUF_CONVERT} --aux-layers A,B,C --aux-convention boundary|layer-output` where the config carries no ids",
    ),
    Code(
        "gguf-tap-final-unfilled",
        ERR,
        "gguf",
        "a tap at the target's last layer on a Llama, Qwen2 or Qwen3 target, whose llama.cpp graph never fills "
        "that state: the drafter gets an input it was not trained on (DFlash: the server stops on an assertion)",
        "train and convert against taps below the last layer, or serve it with vLLM: "
        "`eaglezoo serve-config SRC --target TARGET --engine vllm`",
    ),
    Code(
        "gguf-block-size-default",
        WARN,
        "gguf",
        "a DFlash GGUF without `dflash.block_size`: llama-server drafts blocks of 16",
        GGUF_FIX,
    ),
    Code(
        "gguf-dspark",
        INFO,
        "gguf",
        "a DSpark GGUF (`dflash` with `markov_w1`): its anchor, confidence head, Markov rank and the most it drafts",
        "nothing to fix",
    ),
    Code(
        "gguf-block-size-missing",
        ERR,
        "gguf",
        "a DSpark GGUF without `dflash.block_size`: llama-server's Markov head asserts on it",
        GGUF_FIX,
    ),
    Code(
        "gguf-confidence-head-unread",
        WARN,
        "gguf",
        "a DSpark GGUF with `conf_proj` but `dflash.has_confidence_head` false: `--spec-draft-p-min` above 0 is "
        "refused",
        GGUF_FIX,
    ),
    Code(
        "gguf-mask-token-missing",
        ERR,
        "gguf",
        "a DFlash GGUF without `tokenizer.ggml.mask_token_id`: the block's mask slots have no token",
        GGUF_FIX,
    ),
    Code(
        "gguf-norm-before-residual-default",
        WARN,
        "gguf",
        "no `{arch}.norm_before_residual`: llama.cpp reads false, vLLM's speculators reader true",
        GGUF_FIX,
    ),
    Code(
        "gguf-norm-before-residual-false",
        INFO,
        "gguf",
        "norm_before_residual is false, which is also what llama.cpp's converter bakes from a speculators config "
        "without the key (where vLLM reads true)",
        f"if the source is such a config: `{GGUF_CONVERT} --flag norm_before_residual=true|false` (the trained "
        "behaviour)",
    ),
    Code(
        "gguf-norm-before-fc-default",
        WARN,
        "gguf",
        "no `{arch}.norm_before_fc`: llama.cpp reads false",
        GGUF_FIX,
    ),
    Code(
        "gguf-norm-before-fc-no-weight",
        ERR,
        "gguf",
        "norm_before_fc is set but `enc.output_norm.weight` is absent: llama.cpp refuses to load the drafter",
        GGUF_FIX,
    ),
    Code(
        "gguf-norm-before-fc-unused",
        ERR,
        "gguf",
        "`enc.output_norm.weight` is present but norm_before_fc is not set: llama.cpp refuses a tensor it did not "
        "ask for",
        GGUF_FIX,
    ),
    Code(
        "gguf-tensor-unknown",
        ERR,
        "gguf",
        "a tensor llama.cpp's eagle3 graph never reads (EAGLE 3.1's fc_norm, say): it refuses to load the file",
        GGUF_VLLM,
    ),
    Code(
        "gguf-tokenizer-missing",
        ERR,
        "gguf",
        "no `tokenizer.ggml.model`: llama.cpp refuses to load the drafter",
        GGUF_FIX,
    ),
    Code(
        "gguf-vocab-mismatch",
        ERR,
        "gguf",
        "the drafter's tokenizer has another size than the target's vocabulary: draft logits land on other tokens",
        "lint against the target the drafter was trained for (`eaglezoo lint DRAFT.gguf --target TARGET`), or "
        + GGUF_FIX,
    ),
    Code(
        "gguf-d2t-missing",
        ERR,
        "gguf",
        "the draft vocabulary is smaller than the target's and d2t is absent: draft ids are read as target ids",
        GGUF_FIX,
    ),
    Code("gguf-d2t-dtype", ERR, "gguf", "d2t is not I64: llama.cpp asserts I64", GGUF_FIX),
    Code(
        "gguf-d2t-size",
        ERR,
        "gguf",
        "d2t's length differs from output.weight's rows: llama.cpp asserts they match",
        GGUF_FIX,
    ),
    Code("gguf-d2t-out-of-range", ERR, "gguf", "d2t holds ids outside the target's vocabulary", GGUF_FIX),
    Code(
        "gguf-d2t-offsets",
        ERR,
        "gguf",
        "d2t repeats target ids: it holds the checkpoint's offsets, where llama.cpp reads absolute target ids",
        GGUF_FIX,
    ),
    Code("gguf-vocab-map", INFO, "gguf", "d2t maps the draft tokens to distinct absolute target ids", "nothing to fix"),
    Code(
        "gguf-target-hidden-missing",
        ERR,
        "gguf",
        "no `{arch}.target_hidden_size`: llama.cpp refuses to load the drafter",
        GGUF_FIX,
    ),
    Code(
        "gguf-target-hidden-mismatch",
        ERR,
        "gguf",
        "the GGUF's target_hidden_size is not the target's hidden size",
        "lint against the target the drafter was trained for (`eaglezoo lint DRAFT.gguf --target TARGET`), or "
        + GGUF_FIX,
    ),
    Code("gguf-fc-shape", ERR, "gguf", "fc.weight's fan-in is not 3 taps x target_hidden_size", GGUF_FIX),
    Code(
        "gguf-unsupported",
        ERR,
        "gguf",
        "convert --to gguf refuses a drafter llama.cpp b11434 cannot run as trained: EAGLE 3.1 (fc_norm, "
        "norm_output), other than 3 taps or one layer, another architecture, biases, RoPE other than default or "
        "llama3; a DFlash drafter other than the dense z-lab form, or DSpark",
        GGUF_VLLM,
    ),
    Code(
        "gguf-target-unsupported",
        ERR,
        "gguf",
        "convert TARGET --to gguf refuses a target eaglezoo does not write for llama.cpp b11434: an architecture other "
        "than LlamaForCausalLM, biases, RoPE other than default or llama3, a tensor with no Llama GGUF name",
        "convert it with llama.cpp's own convert_hf_to_gguf.py",
    ),
    # refusals
    Code(
        "k-beyond-block",
        ERR,
        "refusals",
        "K is beyond what a block drafter drafts in one step",
        "use the K the message names, or less",
    ),
    Code(
        "family-unverified",
        ERR,
        "refusals",
        "the chosen engine does not measure this drafter family",
        "use the engine the hint names",
    ),
    # doctor on SGLang
    Code(
        "sglang-eagle-not-eagle3",
        ERR,
        "doctor-sglang",
        "SGLang runs an EAGLE-3 drafter with --speculative-algorithm EAGLE (or NEXTN): it captures no aux hidden "
        "states, so the acceptance length falls to about 1.0",
        "`--speculative-algorithm EAGLE3`",
    ),
    Code(
        "sglang-draft-quantization",
        ERR,
        "doctor-sglang",
        "the drafter is loaded with the target's --quantization, which SGLang gives the draft model when "
        "--speculative-draft-model-quantization is not set",
        "`--speculative-draft-model-quantization unquant` (the drafter as trained)",
    ),
    Code(
        "sglang-accept-threshold",
        ERR,
        "doctor-sglang",
        "--speculative-accept-threshold-single or -acc below 1.0: drafts the target would not choose are accepted, "
        "the output is lossy and the acceptance length inflated",
        "drop both flags (1.0, the default)",
    ),
    Code(
        "sglang-no-rejection-sampling",
        WARN,
        "doctor-sglang",
        "requests at temperature > 0 are verified without rejection sampling (the target-only sampler on CUDA, the "
        "target's argmax on ROCm and CPU); greedy requests are not affected",
        "`--speculative-use-rejection-sampling` for sampled traffic (topk 1, thresholds 1.0)",
    ),
    Code(
        "sglang-dp-attention",
        WARN,
        "doctor-sglang",
        "attention runs data parallel, where SGLang has gathered the aux states on the wrong group (sglang #16274)",
        "compare with the same server without attention DP; serve without it if acceptance recovers",
    ),
    Code(
        "sglang-draft-tokens",
        ERR,
        "doctor-sglang",
        "SGLang drafts K = --speculative-num-steps; --speculative-num-draft-tokens counts the verified tokens, "
        "K + 1 with topk 1 (SGLang sets it so whatever was asked)",
        "`--speculative-num-steps K --speculative-eagle-topk 1 --speculative-num-draft-tokens K+1`",
    ),
    Code(
        "sglang-aux-ids",
        ERR,
        "doctor-sglang",
        "SGLang captures other target layers than the drafter was trained on: it reads the ids from "
        "eagle_config.eagle_aux_hidden_state_layer_ids only (layer-output, +1 on load), else its default",
        "`eaglezoo serve-config DRAFTER --engine sglang` (converts, then serves the converted folder)",
    ),
    Code(
        "engine-known-issue",
        ERR,
        "doctor-sglang",
        "the server's release is in a row of eaglezoo/engine_versions.py: a release known to read a drafter wrongly "
        "or to count acceptance differently (the row and its source are named)",
        "upgrade past the row's range",
    ),
    Code(
        "llamacpp-converter-taps",
        WARN,
        "engines",
        "the folder has no top-level eagle_aux_hidden_state_layer_ids: llama.cpp's own converter bakes taps "
        "[2, L//2, L-3], not the layers the drafter was trained on",
        GGUF_FIX,
    ),
    Code(
        "llamacpp-converter-norm-before-residual",
        WARN,
        "engines",
        "norm_before_residual=true is not a top-level key of the config: llama.cpp's own converter writes false",
        GGUF_FIX,
    ),
    # doctor on llama.cpp
    Code(
        "llamacpp-taps",
        ERR,
        "doctor-llamacpp",
        "the served GGUF's {arch}.target_layers are not the boundary ids the drafter was trained on (llama.cpp's own "
        "converter bakes [2, L//2, L-3] when the config has no top-level eagle_aux_hidden_state_layer_ids)",
        GGUF_FIX + ", then restart llama-server with -md OUT/drafter.gguf",
    ),
    Code(
        "llamacpp-k-above-block",
        ERR,
        "doctor-llamacpp",
        "-k is above what one DFlash/DSpark block drafts: llama-server clamps --spec-draft-n-max, a warning in its log",
        "restart llama-server with --spec-draft-n-max at most the block's (block - 1 for DFlash)",
    ),
    Code(
        "llamacpp-norm-flags",
        ERR,
        "doctor-llamacpp",
        "the served GGUF's norm_before_residual or norm_before_fc is not the drafter's (llama.cpp reads false when "
        "absent): lost at conversion",
        GGUF_FIX + ", then restart llama-server with -md OUT/drafter.gguf",
    ),
    # doctor's probes of the workload (doctor/probes.py)
    Code(
        "chat-template",
        WARN,
        "doctor-probes",
        "your requests accept less formed as you send them (chat template, raw completion or the template's token "
        "ids) than formed another way: the drafter was trained on prompts formed that way",
        "send requests in the form that accepts more, or train the drafter on prompts formed as you send them",
    ),
    Code(
        "thinking-mode",
        WARN,
        "doctor-probes",
        "your chat requests accept less with the template's thinking switch as you send it than flipped: the "
        "drafter was trained in the other mode",
        '`"chat_template_kwargs": {"enable_thinking": ...}` as the drafter was trained, or train it in your mode',
    ),
    Code(
        "sampling-temperature",
        WARN,
        "doctor-probes",
        "your temperature accepts less than temperature 0: vLLM keeps a greedy (one-hot) draft with the target's "
        "probability of it (rejection_sample_method, draft_sample_method)",
        'temperature 0 where your use allows, else `"draft_sample_method": "probabilistic"` in --speculative-config, '
        "measured with the probe",
    ),
    Code(
        "structured-output",
        WARN,
        "doctor-probes",
        "your requests accept less with their response_format (structured output) than without it",
        "train the drafter on answers in your schema, or send the schema only where it is needed",
    ),
    Code(
        "context-beyond-training",
        WARN,
        "doctor-probes",
        "your prompts led past the drafter's trained length (--trained-length) accept less than within it",
        "keep prompts within the trained length, or serve a drafter trained at your lengths",
    ),
    Code(
        "prefix-cache",
        WARN,
        "doctor-probes",
        "the same prompts accept less warm (their prefix cached) than cold (vLLM #41838)",
        "serve with --no-enable-prefix-caching while it is, and report it to vLLM with both figures",
    ),
    # doctor on vLLM: the parallel families and the facts the strict reader refuses as ambiguous
    Code(
        "mask-token-differ",
        ERR,
        "doctor-vllm",
        "the served P-EAGLE or DFlash config names another mask token than the drafter was trained on (vLLM reads "
        "dflash_config.mask_token_id, else mask_token_id: v1/spec_decode/llm_base_proposer.py:360-380)",
        "set the trained mask token in the served config.json, or serve OUT after `eaglezoo convert DRAFTER OUT`",
    ),
    Code(
        "anchor-layout-served",
        ERR,
        "doctor-vllm",
        "a DFlash drafter trained sampling its anchor (sample_from_anchor) served on vLLM 0.32, which lays every "
        "block out as [bonus, mask x K] (v1/spec_decode/utils.py:731-742): each draft read one slot off; or a served "
        "config stating sample_from_anchor for a drafter trained with the anchor as the bonus (a note: V1 ignores "
        "it, V2 refuses to start)",
        "serve an anchor-sampled drafter where its anchor is sampled (llama.cpp); remove a sample_from_anchor the "
        "weights were not trained with from config.json",
    ),
    Code(
        "flag-ambiguous-served",
        ERR,
        "doctor-vllm",
        "the served config leaves a flag ambiguous (absent where engines default it differently, or of a changed "
        "meaning) and the server runs the reading the weights were not trained for; each reading measured natively",
        "write the trained value explicitly in config.json, or serve OUT after `eaglezoo convert DRAFTER OUT --flag "
        "NAME=VALUE`",
    ),
)


def severity(code: str) -> Severity:
    """The catalogued severity of `code` (KeyError for a code that is not catalogued)."""
    return CODES[code].severity


def markdown() -> str:
    """docs/lint-codes.md: every code by group, with its severity, meaning and fix."""
    intro = (
        "Every stable code eaglezoo reports: in `lint`'s findings (`--json`: `findings[].code`), in verify's "
        "report (its lint findings), and as the `code` of a `--json` error where the reader, convert, verify or "
        "serve-config refuses. Each code has one severity. Errors make `lint` exit 1 and convert refuse."
    )
    source = (
        "Generated from `eaglezoo/checkpoint/codes.py` by `python -m scripts.docs.write_lint_codes`; a test "
        "keeps the two equal."
    )
    lines = ["# Finding codes", "", intro, "", source, ""]
    for group, title in GROUPS.items():
        lines += [f"## {title}", "", "| code | severity | meaning | fix |", "|---|---|---|---|"]
        lines += [
            f"| `{c.code}` | {c.severity} | {_cell(c.meaning)} | {_cell(c.fix)} |"
            for c in CODES.values()
            if c.group == group
        ]
        lines.append("")
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
