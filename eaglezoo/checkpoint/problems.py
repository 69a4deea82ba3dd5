"""Every problem a drafter can have, as `Finding` data: its tensors against its config, its config
against the target, its values, config keys and provenance. Convert refuses the first error; lint
reports every finding; verify carries them in its report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Literal

from pydantic import BaseModel

from ..errors import BadInput, EaglezooError
from .layout import expected_shapes, flat_shape, optional_shapes
from .spec import AuxLayers, DrafterSpec, effective_rope
from .st_header import COMPLEX_CODES
from .tensors import Checkpoint, TensorRef

if TYPE_CHECKING:  # torch is imported where values are checked: reading and converting never pay for it
    import torch

Severity = Literal["error", "warning", "info"]
Add = Callable[..., None]  # add(severity, code, message, hint="")
Load = Callable[[str], "torch.Tensor"]  # a tensor by its canonical name


class Finding(BaseModel):
    severity: Severity
    code: str
    message: str
    hint: str = ""


def error(code: str, message: str, hint: str = "") -> Finding:
    return Finding(severity="error", code=code, message=message, hint=hint)


INT_CODES = {"I64", "I32"}


def check_tensors(spec: DrafterSpec, refs: dict[str, TensorRef]) -> list[Finding]:
    """Shapes, dtypes, missing and unexpected tensors (names must already be canonical)."""
    if spec.family in ("dflash", "dspark"):
        return block_tensor_problems(spec, refs)
    want = expected_shapes(spec)
    optional = optional_shapes(spec)
    problems = _fan_in_and_rows(spec, refs) + _shape_problems(spec, refs, want, optional)
    problems += _complex_weights(refs, set(want) | set(optional))
    problems += _vocab_map_dtypes(refs)
    if "embed_tokens.weight" not in refs and spec.hidden_size != spec.target_hidden_size:
        problems.append(
            error(
                "embed-missing",
                "hidden_size differs from target_hidden_size, so the drafter must "
                "ship its own embed_tokens.weight, and it has none",
                "vLLM #18906",
            )
        )
    extra = sorted(set(refs) - set(want) - set(optional))
    return problems + [_unexpected(spec, name) for name in extra]


def _fan_in_and_rows(spec: DrafterSpec, refs: dict[str, TensorRef]) -> list[Finding]:
    """fc's fan-in against k x target_hidden_size, lm_head's rows against draft_vocab_size."""
    problems: list[Finding] = []
    k, ht = spec.num_aux, spec.target_hidden_size
    fc = refs.get("fc.weight")
    if fc is not None and len(fc.shape) == 2 and fc.shape[1] != k * ht:
        problems.append(
            error(
                "fc-fan-in",
                f"fc.weight fan-in is {fc.shape[1]}, but k x target_hidden_size = {k} x {ht} = {k * ht}",
                "the aux count or target_hidden_size in the config is wrong",
            )
        )
    lm = refs.get("lm_head.weight")
    if lm is not None and lm.shape and lm.shape[0] != spec.draft_vocab_size:
        problems.append(
            error(
                "lm-head-rows",
                f"lm_head.weight has {lm.shape[0]} rows, but draft_vocab_size is {spec.draft_vocab_size}",
                "set draft_vocab_size to the lm_head rows (SafeAILab #249)",
            )
        )
    return problems


def _shape_problems(spec: DrafterSpec, refs: dict[str, TensorRef], want: dict, optional: dict) -> list[Finding]:
    """Each expected tensor present with the config's shape (fc and lm_head: `_fan_in_and_rows`), each optional
    one present with its shape."""
    problems: list[Finding] = []
    for name, shape in want.items():
        ref = refs.get(name)
        if ref is None:
            problems.append(_missing(spec, name))
        elif shape is not None and ref.shape != shape and name not in ("fc.weight", "lm_head.weight"):
            problems.append(
                error("shape", f"{name} has shape {list(ref.shape)}, expected {list(shape)} from the config")
            )
    for name, shape in optional.items():
        ref = refs.get(name)
        if ref is not None and flat_shape(name, tuple(ref.shape)) != shape:
            problems.append(error("shape", f"{name} has shape {list(ref.shape)}, expected {list(shape)}"))
    return problems


def _vocab_map_dtypes(refs: dict[str, TensorRef]) -> list[Finding]:
    """d2t holds integer offsets, t2d a bool mask."""
    problems: list[Finding] = []
    ref = refs.get("d2t")
    if ref is not None and ref.dtype not in INT_CODES:
        problems.append(
            error(
                "d2t-dtype",
                f"d2t must hold integer offsets, found {ref.dtype}",
                "d2t is int64 offsets: target_id = draft_id + d2t[draft_id] (see docs/formats.md#vocabulary-maps)",
            )
        )
    ref = refs.get("t2d")
    if ref is not None and ref.dtype not in ("BOOL", "U8"):
        problems.append(error("t2d-dtype", f"t2d must be a bool mask, found {ref.dtype}"))
    return problems


def block_tensor_problems(spec: DrafterSpec, refs: dict[str, TensorRef]) -> list[Finding]:
    """A DFlash/DSpark body (speculators models/dflash/core.py:122-135): fc over k aux states, hidden_norm, norm,
    the decoder layers; the borrowed embedding and lm_head, where shipped, must fit the vocabulary."""
    h, k, ht = spec.hidden_size, spec.num_aux, spec.target_hidden_size
    want: dict[str, tuple[int, ...]] = {"fc.weight": (h, k * ht), "hidden_norm.weight": (h,), "norm.weight": (h,)}
    for i in range(spec.num_layers):
        want.update({f"layers.{i}.input_layernorm.weight": (h,), f"layers.{i}.post_attention_layernorm.weight": (h,)})
    fields = spec.family_fields
    if spec.family == "dspark" and fields is not None and (fields.markov_rank or 0) > 0:
        want["markov_head.markov_w1.weight"] = (spec.vocab_size, fields.markov_rank)
    problems = [
        _missing(spec, n)
        if n not in refs
        else error("shape", f"{n} has shape {list(refs[n].shape)}, expected {list(shape)} from the config")
        for n, shape in want.items()
        if n not in refs or refs[n].shape != shape
    ]
    lm, embed = refs.get("lm_head.weight"), refs.get("embed_tokens.weight")
    if lm is not None and lm.shape and lm.shape[0] != spec.draft_vocab_size:
        problems.append(
            error(
                "lm-head-rows",
                f"lm_head.weight has {lm.shape[0]} rows, but the drafter's vocabulary is {spec.draft_vocab_size}",
                "ship no lm_head (the target's is used) or one of the "
                "target's vocabulary; a wrong one is what vllm-ascend #11374 overwrote silently",
            )
        )
    if embed is not None and embed.shape and embed.shape[0] != spec.vocab_size:
        problems.append(
            error("shape", f"embed_tokens.weight has {embed.shape[0]} rows, expected vocab_size {spec.vocab_size}")
        )
    if spec.has_vocab_map and "d2t" not in refs:
        problems.append(
            error(
                "missing",
                "d2t is missing: draft_vocab_size is smaller than vocab_size",
                "ship d2t (draft id -> target id offsets) or set draft_vocab_size to vocab_size",
            )
        )
    return problems


def _complex_weights(refs: dict[str, TensorRef], known: set[str]) -> list[Finding]:
    """A drafter's weights are real: engines' loaders copy a complex tensor into a real parameter,
    keeping the real part only, so the drafter would run with other weights than it ships."""
    return [
        error(
            "dtype-complex",
            f"{name} is complex ({ref.dtype}): a drafter's weights are real, and engines would drop the imaginary part",
            "export the drafter again with real float weights, e.g. bfloat16",
        )
        for name, ref in refs.items()
        if name in known and ref.dtype in COMPLEX_CODES
    ]


def _missing(spec: DrafterSpec, name: str) -> Finding:
    if name.startswith("fc_norm."):
        return error(
            "flag-without-tensors",
            f"fc_norm is true but {name} is missing",
            "never switch fc_norm on without its trained tensors (see docs/formats.md#no-weight-level-conversion)",
        )
    if name == "input_norm.weight":
        return error("flag-without-tensors", "norm_before_fc is true but input_norm.weight is missing")
    if name in ("d2t", "t2d"):
        return error(
            "vocab-map-missing",
            f"draft_vocab_size {spec.draft_vocab_size} < vocab_size {spec.vocab_size}, but {name} is missing",
            "the draft->target vocabulary map is mandatory",
        )
    return error("missing", f"tensor {name} is missing")


def _unexpected(spec: DrafterSpec, name: str) -> Finding:
    if name.startswith("fc_norm."):
        return error(
            "tensors-without-flag",
            f"{name} is present but fc_norm is false or k is smaller",
            "trained fc_norm tensors need fc_norm: true in the config",
        )
    if name == "input_norm.weight":
        return error("tensors-without-flag", "input_norm.weight is present but norm_before_fc is false")
    return error("unexpected", f"tensor {name} does not belong to this drafter's config")


def refuse_misfit(aux: AuxLayers | None, target_hidden: int, vocab: int, tcfg: dict) -> None:
    """The first way the drafter does not fit its target, refused (convert, verify and serve-config stop there)."""
    problems = target_problems(aux, target_hidden, vocab, tcfg)
    if problems:
        raise BadInput(
            problems[0].message,
            code=problems[0].code,
            hint=problems[0].hint or "give --target the model this drafter was trained for",
        )


def target_problems(aux: AuxLayers | None, target_hidden: int, vocab: int, tcfg: dict) -> list[Finding]:
    """Where the drafter does not fit its target's config: convert refuses the first, lint reports each."""
    n = int(tcfg["num_hidden_layers"])
    problems = []
    if aux is not None and any(not 0 <= i <= n for i in aux.boundary()):
        problems.append(
            error(
                "aux-ids-range",
                f"aux ids select boundary {aux.boundary()}, outside the target's 0..{n} ({n} layers)",
                "check the convention: layer-output ids are boundary ids "
                "minus one (see docs/formats.md#aux-layer-conventions)",
            )
        )
    if int(tcfg["hidden_size"]) != target_hidden:
        problems.append(
            error(
                "target-hidden-mismatch",
                f"target hidden_size is {tcfg['hidden_size']}, but the drafter's target_hidden_size is {target_hidden}",
            )
        )
    if int(tcfg["vocab_size"]) != vocab:
        problems.append(
            error(
                "vocab-mismatch",
                f"target vocab_size is {tcfg['vocab_size']}, but the drafter's vocab_size is {vocab}",
                "draft and target must share one tokenizer (SafeAILab #258)",
            )
        )
    return problems


def target_findings(spec: DrafterSpec, tcfg: dict) -> list[Finding]:
    """The drafter against its target's config: errors where engines would misread it, warnings otherwise."""
    out = target_problems(spec.aux, spec.target_hidden_size, spec.vocab_size, tcfg)
    if spec.aux is not None and 0 in spec.aux.boundary():
        out.append(
            Finding(
                severity="warning",
                code="aux-ids-embedding",
                message="boundary id 0 captures the embedding output, not a layer",
                hint="check the ids' convention: in the layer-output convention 0 is the first layer",
            )
        )
    out += [Finding(severity="warning", code="context-rope", message=w) for w in compare_with_target(spec, tcfg)]
    return out


def compare_with_target(spec: DrafterSpec, tcfg: dict) -> list[str]:
    warnings = []
    d_ctx, t_ctx = spec.max_position_embeddings, tcfg.get("max_position_embeddings")
    if d_ctx and t_ctx and d_ctx < t_ctx:
        warnings.append(
            f"drafter max_position_embeddings {d_ctx} < target's {t_ctx}: long prompts run the drafter "
            "past its trained context (vLLM #48894)"
        )
    d_rope, t_rope = effective_rope(spec.layer_config), effective_rope(tcfg)
    if d_rope != t_rope:
        warnings.append(
            f"drafter RoPE {d_rope} differs from the target's {t_rope} (kept: the drafter was trained "
            "with it; speculators #574)"
        )
    return warnings


def provenance_findings(drafter_dir: Path, spec: DrafterSpec) -> list[Finding]:
    """A converted drafter must still say what conversion.json recorded (hand edits break drafters)."""
    record_path = drafter_dir / "conversion.json"
    if not record_path.is_file():
        return []
    try:
        recorded = DrafterSpec.model_validate(json.loads(record_path.read_text())["spec"])
    except (ValueError, KeyError, TypeError):
        return [Finding(severity="warning", code="provenance-unreadable", message="conversion.json is not readable")]
    out = []
    if recorded.aux and spec.aux and recorded.aux.boundary() != spec.aux.boundary():
        out.append(
            Finding(
                severity="error",
                code="aux-ids-changed",
                message=f"the config selects boundary {spec.aux.boundary()}, but conversion.json recorded "
                f"{recorded.aux.boundary()}: the ids were edited after conversion",
                hint="ids copied across conventions are off by one (vLLM #43671, #50170)",
            )
        )
    changed = [f for f, v in spec.flags().items() if recorded.flags().get(f) != v]
    if changed:
        out.append(
            Finding(
                severity="error",
                code="flags-changed",
                message=f"{', '.join(changed)} differ from what conversion.json recorded",
                hint="a flag edited after conversion changes what the drafter computes: restore the "
                "recorded value, or convert again from the source with --flag NAME=VALUE",
            )
        )
    return out


def config_findings(cfg: dict, dialect: str, add: Add) -> None:
    top = cfg
    if "norm_before_residual" not in top:
        add(
            "warning",
            "norm-before-residual-implicit",
            "norm_before_residual is not written: vLLM's HF path reads false, its speculators path true",
            "convert writes it explicitly (see docs/formats.md#residual-norm-default)",
        )
    layer = cfg.get("transformer_layer_config", cfg)
    if layer.get("tie_word_embeddings") or top.get("tie_word_embeddings"):
        add(
            "error",
            "tie-word-embeddings",
            "tie_word_embeddings is true: SGLang ties lm_head to embed_tokens and "
            "transformers may overwrite the draft-vocab lm_head",
            "write tie_word_embeddings: false",
        )
    if "target_hidden_size" in top and top["target_hidden_size"] is None:
        if dialect == "speculators":  # its own way of writing "equal to hidden_size" (docs/formats.md#speculators)
            add(
                "info",
                "target-hidden-null-speculators",
                "target_hidden_size is null: the speculators format's way "
                "of saying hidden_size; copied into an HF-style config it crashes vLLM's HF path (None * k)",
                "nothing to fix here; eaglezoo convert drops the key when it writes another schema",
            )
        else:
            add(
                "warning",
                "target-hidden-null",
                "target_hidden_size is null: vLLM's HF path computes None * k and crashes",
                "write target_hidden_size, or drop the key (eaglezoo convert does)",
            )


def value_findings(
    spec: DrafterSpec,
    refs: dict[str, TensorRef],
    load: Load,
    target_dir: Path | None,
    add: Add,
    max_bytes: int | None = None,
) -> None:
    """Checks that need tensor values, by canonical name, for a drafter of any family (NaN/Inf and norms in every
    weight; the aux slots, the vocabulary map and the embedding where the family has them). With `max_bytes`
    (remote lint) only vectors up to that size are fetched (norms, d2t, t2d): a tiny share of the weights."""

    def small(name: str) -> bool:
        return max_bytes is None or (len(refs[name].shape) <= 1 and refs[name].nbytes <= max_bytes)

    _finite_and_norm_findings(refs, load, small, add)  # every family's weights
    if spec.family in ("eagle3", "peagle"):  # fc over the aux slots as EAGLE-3 lays it out
        _duplicate_slot_findings(spec, load, small, add)
    if spec.has_vocab_map and small("d2t"):
        _vocab_map_findings(spec, load("d2t"), load("t2d") if "t2d" in refs else None, add)
    if "embed_tokens.weight" in refs and target_dir is not None and small("embed_tokens.weight"):
        _embed_findings(load("embed_tokens.weight"), target_dir, add)


def _finite_and_norm_findings(refs: dict[str, TensorRef], load: Load, small: Callable[[str], bool], add: Add) -> None:
    import torch

    nonfinite, skipped = [], []
    for name, ref in refs.items():
        if not ref.is_float:
            continue
        if not small(name):
            skipped.append(name)
            continue
        t = load(name).float()  # fp8 has no isfinite kernel; the float32 copy is exact
        if not torch.isfinite(t).all():
            nonfinite.append(name)
        if name.endswith(".weight") and "norm" in name and t.numel():
            if bool((t == 1).all()):
                add(
                    "warning",
                    "norm-untrained",
                    f"{name} is all ones: never trained, or defaulted by a converter (speculators #812)",
                    "check the training run's checkpoint; a converter must copy the norm",
                )
            elif bool((t == 0).all()):
                add(
                    "error",
                    "norm-zero",
                    f"{name} is all zeros: the norm erases its input",
                    "the checkpoint is broken: re-export it from training",
                )
    if nonfinite:
        add(
            "error",
            "nan-inf",
            f"NaN or Inf values in {', '.join(nonfinite)}",
            "the checkpoint is broken: re-export it from training",
        )
    if skipped:
        add(
            "info",
            "values-skipped",
            f"remote lint: values of {len(skipped)} large tensor(s) not downloaded "
            "(NaN/Inf and duplicated-slot checks need a local copy)",
        )


def _duplicate_slot_findings(spec: DrafterSpec, load: Load, small: Callable[[str], bool], add: Add) -> None:
    import torch

    if spec.fc_norm:
        norms = [load(f"fc_norm.{j}.weight") for j in range(spec.num_aux)]
        for a in range(len(norms)):
            for b in range(a + 1, len(norms)):
                if torch.equal(norms[a], norms[b]) and not bool((norms[a] == 1).all()):
                    add(
                        "warning",
                        "duplicate-aux-norms",
                        f"fc_norm.{a} and fc_norm.{b} are identical",
                        "the same aux layer may have been captured twice in training",
                    )
    if small("fc.weight"):
        fc = load("fc.weight")
        blocks = fc.reshape(fc.shape[0], spec.num_aux, spec.target_hidden_size)
        for a in range(spec.num_aux):
            for b in range(a + 1, spec.num_aux):
                if torch.equal(blocks[:, a], blocks[:, b]):
                    add(
                        "error",
                        "duplicate-aux-slots",
                        f"fc columns of aux slots {a} and {b} are identical",
                        "the same aux layer was captured twice in training: retrain with distinct aux ids",
                    )


def _vocab_map_findings(spec: DrafterSpec, d2t: torch.Tensor, t2d: torch.Tensor | None, add) -> None:
    import torch

    d2t = d2t.long()
    ids = torch.arange(spec.draft_vocab_size) + d2t
    if bool((d2t == 0).all()):
        add(
            "warning",
            "vocab-map-trivial",
            f"d2t is all zeros: draft ids map to target ids 0..{spec.draft_vocab_size - 1}",
            "a real map keeps the most frequent tokens (SafeAILab #222, verl-SpeCo #66)",
        )
    problems = []
    if (ids < 0).any() or (ids >= spec.vocab_size).any():
        problems.append("arange(V_d) + d2t leaves [0, vocab_size)")
    if len(ids) > 1 and not bool((ids[1:] > ids[:-1]).all()):
        problems.append("arange(V_d) + d2t is not strictly increasing")
    if t2d is not None:
        t2d = t2d.bool()
        if int(t2d.sum()) != spec.draft_vocab_size:
            problems.append(f"t2d marks {int(t2d.sum())} tokens, not draft_vocab_size {spec.draft_vocab_size}")
        elif not problems and not bool(t2d[ids].all()):
            problems.append("t2d does not mark the tokens d2t maps to")
    for p in problems:
        add("error", "vocab-map-invalid", p, "see the invariants in docs/formats.md#vocabulary-maps")


def _embed_findings(embed: torch.Tensor, target_dir: Path, add) -> None:
    import torch

    try:
        target = Checkpoint(target_dir)
    except EaglezooError:
        return
    name = next(
        (
            n
            for n in ("model.embed_tokens.weight", "embed_tokens.weight", "model.language_model.embed_tokens.weight")
            if n in target.refs
        ),
        None,
    )
    if name is None:
        return
    theirs = target.load(name)
    if theirs.shape != embed.shape:
        add("error", "embed-shape", f"embed_tokens {list(embed.shape)} vs the target's {list(theirs.shape)}")
    elif not torch.equal(theirs.to(embed.dtype), embed):
        add(
            "warning",
            "embed-differs",
            "embed_tokens differs from the target's: engines will not share it "
            "(vLLM compares with torch.equal); fine only if the drafter was trained with its own",
        )


def family_findings(spec: DrafterSpec, dialect: str | None, config: dict, tcfg: dict | None) -> list[Finding]:
    """The traps of the parallel families (docs/formats.md#family-traps): the mask token, the block against the
    context, the target's layer count, a shipped lm_head, and the keys whose default differs between tools."""
    f = spec.family_fields
    if spec.family == "eagle3" or f is None:
        return []
    out: list[Finding] = []  # a mask token outside the vocabulary: refused where it is read (formats.blocks)
    if f.mask_token_id is not None and tcfg is not None:
        real = {k: tcfg.get(k) for k in ("bos_token_id", "eos_token_id", "pad_token_id")}
        hit = [k for k, v in real.items() if v == f.mask_token_id or (isinstance(v, list) and f.mask_token_id in v)]
        if hit:
            out.append(
                Finding(
                    severity="warning",
                    code="mask-token-real",
                    message=f"mask_token_id "
                    f"{f.mask_token_id} is the target's {', '.join(hit)}, a token its template emits",
                    hint="the mask slots must hold a token the text never contains",
                )
            )
    context = spec.max_position_embeddings
    if f.block_size is not None and context and f.block_size > context:
        out.append(
            error(
                "block-size-context",
                f"block_size {f.block_size} is above the context ({context} positions)",
                "fix block_size in config.json",
            )
        )
    if tcfg is not None and f.num_target_layers and tcfg.get("num_hidden_layers") not in (None, f.num_target_layers):
        out.append(
            Finding(
                severity="warning",
                code="target-layers",
                message=f"the drafter was trained on a "
                f"{f.num_target_layers}-layer target; this target has {tcfg['num_hidden_layers']}",
                hint="check that this is the drafter's target",
            )
        )
    out += _default_traps(spec, dialect, config)
    return out


def _default_traps(spec: DrafterSpec, dialect: str | None, config: dict) -> list[Finding]:
    f = spec.family_fields
    out: list[Finding] = []
    if dialect == "speculators-dspark" and f.sample_from_anchor is None:
        out.append(
            Finding(
                severity="warning",
                code="anchor-layout",
                message="sample_from_anchor is unstated: "
                "speculators trains with true (models/dspark/config.py), vLLM serves false "
                "(speculators/algos.py update_dspark), SGLang true (dspark_config.py)",
                hint="write the trained value of sample_from_anchor into config.json",
            )
        )
    if (
        dialect == "speculators-dflash"
        and f.sliding_window_non_causal is None
        and "sliding_attention" in (spec.layer_config.get("layer_types") or [])
    ):
        out.append(
            Finding(
                severity="warning",
                code="window-causality",
                message="sliding_window_non_causal is "
                "unstated: speculators reads false (causal window), vLLM true (non-causal)",
                hint="write the trained value of sliding_window_non_causal into config.json",
            )
        )
    if dialect == "speculators-dflash" and f.block_size is not None:
        out.append(
            Finding(
                severity="info",
                code="engine-ignores",
                message="vLLM's speculators path does not carry "
                "block_size (transformers_utils/configs/speculators/algos.py update_dflash): K comes "
                "from num_speculative_tokens alone",
                hint="serve with K <= block_size - 1",
            )
        )
    if dialect == "speculators-peagle" and (spec.fc_norm or spec.norm_output):
        out.append(
            error(
                "engine-drops-flags",
                "vLLM's speculators path drops fc_norm and norm_output for peagle "
                "(speculators/algos.py update_peagle reads neither)",
                "convert it with --to native, whose flat config vLLM reads with the flags",
            )
        )
    return out


def borrowed_head_findings(spec: DrafterSpec, refs: dict[str, TensorRef]) -> list[Finding]:
    """A block drafter's lm_head is the target's (z-lab ships none); one shipped at full vocabulary is replaced by
    the target's when identical and kept otherwise (vLLM v1/spec_decode/llm_base_proposer.py:1508-1545)."""
    lm = refs.get("lm_head.weight")
    if (
        spec.family not in ("dflash", "dspark")
        or lm is None
        or spec.has_vocab_map
        or lm.shape[:1] != (spec.vocab_size,)
    ):
        return []
    return [
        Finding(
            severity="warning",
            code="lm-head-borrowed",
            message="the drafter ships an lm_head over the "
            "full vocabulary: vLLM uses the target's if it is identical, this one otherwise",
            hint="drop it unless it was trained; lint with --target to compare it with the target's",
        )
    ]
