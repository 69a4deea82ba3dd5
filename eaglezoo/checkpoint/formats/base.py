"""What every dialect reader shares: reading a config into a `DrafterSpec`, renaming tensors to
canonical names, and accounting for every source tensor (mapped, or dropped with a named reason)."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Callable, Sequence

from ...errors import Ambiguous, BadInput, UsageError
from ..spec import CONVENTIONS, AuxLayers, Convention, DrafterSpec, default_boundary_ids
from ..tensors import Checkpoint

FLAGS = ("fc_norm", "norm_output", "norm_before_fc", "norm_before_residual")

# Keys eaglezoo interprets; every other config key is carried through unchanged in layer_config.
INTERPRETED = {
    "architectures",
    "hidden_size",
    "num_hidden_layers",
    "vocab_size",
    "draft_vocab_size",
    "target_hidden_size",
    "num_aux_hidden_states",
    "eagle_aux_hidden_state_layer_ids",
    "eagle_config",
    *FLAGS,
    "use_aux_norm",
    "tie_word_embeddings",
    "torch_dtype",
    "dtype",
    "transformers_version",
}
NESTED_INTERPRETED = {"eagle_aux_hidden_state_layer_ids", "use_aux_hidden_state", "norm_before_fc"}

LEGACY_RENAMES = [  # SGLang's legacy 3.1 names (docs/formats.md#sglang)
    ("aux_norm_low.", "fc_norm.0."),
    ("aux_norm_mid.", "fc_norm.1."),
    ("aux_norm_high.", "fc_norm.2."),
]


# Only lint and convert take --from; every other command reads what they write.
NAME_THE_DIALECT = "name the dialect with --from DIALECT in eaglezoo lint or convert, then use the converted folder"


@dataclass(frozen=True)
class ReadOptions:
    """How to read a drafter, built once by its caller: what the user stated, what a registry entry knows (in
    fields of its own), and the one fact of the target reading needs. Reading only reads: whether the drafter
    fits a target is checked after it (`problems.refuse_misfit`), where a caller needs it."""

    aux_layers: tuple[int, ...] | None = None  # stated by the user (--aux-layers)
    aux_convention: Convention | None = None
    flags: dict[str, bool] = field(default_factory=dict)  # user-stated flag values
    target_layers: int | None = None  # the target's layer count: its documented default ids where a config has none
    allow_missing_aux: bool = False  # lint: keep reading a drafter whose ids are missing or of unknown convention
    trust_stored_flags: bool = False  # lint: read a flag this dialect leaves ambiguous as stored (a finding says so)
    registry_id: str | None = None  # the registry entry whose facts follow
    registry_aux_layers: tuple[int, ...] | None = None  # its aux ids, which many published configs omit
    registry_convention: Convention | None = None  # their convention, also for ids whose dialect documents none
    dialect: str | None = None  # the dialect to read where detection matches several (doctor tries each)

    def stated_aux(self) -> tuple[tuple[int, ...], Convention | None, str] | None:
        """The aux ids stated outside the checkpoint, their convention and who stated them: the user's, else the
        registry entry's; None when neither did."""
        if self.aux_layers is not None:
            return self.aux_layers, self.aux_convention, "--aux-layers"
        if self.registry_aux_layers is not None:
            return self.registry_aux_layers, self.registry_convention, f"registry entry {self.registry_id} (aux_layers)"
        return None


@dataclass
class Reading:
    """A dialect reader's result."""

    dialect: str | None  # None: a config alone that names no dialect (only tensor names would tell)
    spec: DrafterSpec
    renames: dict[str, str]  # source name -> canonical name (every mapped tensor)
    drops: dict[str, str]  # source name -> reason
    decisions: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    aux_stated_by: str = "config"  # who gave the aux ids or their convention: config, user, registry or default


class Decisions:
    def __init__(self):
        self.decisions: list[str] = []
        self.warnings: list[str] = []
        self.aux_stated_by = "config"

    def decide(self, msg: str) -> None:
        self.decisions.append(msg)

    def warn(self, msg: str) -> None:
        self.warnings.append(msg)


def arch_of(cfg: dict) -> str:
    archs = " ".join(cfg.get("architectures") or [])
    if "Deepseek" in archs or cfg.get("kv_lora_rank"):
        return "mla"
    if "Qwen3" in archs or cfg.get("model_type") == "qwen3":
        return "qwen3"
    return "llama"


def require_int(cfg: dict, key: str, where: str = "config.json") -> int:
    value = cfg.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise BadInput(
            f"{where}: {key!r} must be a positive integer, found {value!r}", hint="fix that key in config.json"
        )
    return value


def parse_ids(value: Any, where: str) -> list[int]:
    """Aux ids as a config states them: a non-empty list of layer numbers, none negative (an engine indexing its
    layers with one would count from the end: vLLM takes hidden_states[i] as given)."""
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(i, int) and not isinstance(i, bool) for i in value)
    ):
        raise BadInput(
            f"{where} must be a non-empty list of integers, found {value!r}", hint="fix that key in config.json"
        )
    return no_negative(value, where)


def no_negative(ids, where: str):
    """Aux ids wherever they are stated (a config key, --aux-layers, a registry entry): none negative."""
    if min(ids) < 0:
        raise BadInput(
            f"{where} holds a negative layer id: {list(ids)[:16]}",
            code="aux-ids-range",
            hint="give the ids of the target layers the drafter was trained on (0 or more)",
        )
    return ids


def rename(name: str, prefix_renames: Sequence[tuple[str, str]]) -> str:
    for old, new in [*prefix_renames, *LEGACY_RENAMES]:
        if name.startswith(old):
            return new + name[len(old) :]
    return name


def resolve_aux(
    found: list[tuple[list[int], Convention | None, str]], k_hint: int | None, opts: ReadOptions, d: Decisions
) -> AuxLayers:
    """Pick the aux ids with their convention. `found` lists (ids, convention or None if the dialect
    does not document one, where they were found)."""
    stated = _stated_aux(opts)
    resolved = [
        (AuxLayers(ids=tuple(ids), convention=_convention(ids, conv, where, opts, d)), where)
        for ids, conv, where in found
    ]
    _refuse_disagreement(resolved)
    if stated is not None:
        return _as_stated(stated, resolved, opts, d)
    if resolved:
        aux, where = resolved[0]
        d.decide(f"aux ids {list(aux.ids)} from {where} ({aux.convention} convention) = boundary {aux.boundary()}")
        return aux
    if opts.target_layers is not None and (k_hint in (None, 3)):
        return _default_aux(opts.target_layers, d)
    raise UsageError("the checkpoint carries no aux-layer ids", hint=AUX_HINT, code="aux-ids-missing")


def _stated_aux(opts: ReadOptions) -> tuple[AuxLayers, str] | None:
    """The aux ids the user or the registry entry states, with who stated them; None where nobody does."""
    given = opts.stated_aux()
    if given is None:
        return None
    ids, convention, stated_by = given
    if convention is None:
        raise UsageError(
            "--aux-layers needs --aux-convention (boundary or layer-output)",
            hint="boundary: vLLM/HF hidden_states[i]; layer-output: SGLang/ModelOpt/TRT-LLM",
        )
    return AuxLayers(ids=tuple(no_negative(ids, stated_by)), convention=convention), stated_by


def _convention(ids: list[int], conv: Convention | None, where: str, opts: ReadOptions, d: Decisions) -> Convention:
    """The convention of ids found at `where`: the dialect's (`conv`), refused where --aux-convention says another;
    where the dialect documents none, the one stated (`_undocumented_convention`)."""
    if conv is None:
        return _undocumented_convention(ids, where, opts, d)
    if opts.aux_convention is not None and opts.aux_layers is None and opts.aux_convention != conv:
        raise UsageError(
            f"{where} uses the '{conv}' convention in this dialect, but --aux-convention says '{opts.aux_convention}'",
            hint="drop --aux-convention, or give the ids in this dialect's own convention",
        )
    return conv


def _refuse_disagreement(resolved: list[tuple[AuxLayers, str]]) -> None:
    """Two lists of one checkpoint that select different boundaries: refused, naming both."""
    for (a, wa), (b, wb) in pairwise(resolved):
        if a.boundary() != b.boundary():
            raise BadInput(
                f"aux ids disagree: {wa} {list(a.ids)} ({a.convention}) selects boundary "
                f"{a.boundary()}, {wb} {list(b.ids)} ({b.convention}) selects {b.boundary()}",
                hint="one list was copied across conventions without the +1 (vLLM #43671)",
                code="aux-ids-disagree",
            )


def _as_stated(
    stated: tuple[AuxLayers, str], resolved: list[tuple[AuxLayers, str]], opts: ReadOptions, d: Decisions
) -> AuxLayers:
    """The stated ids, refused where the checkpoint's own select another boundary."""
    aux, stated_by = stated
    if resolved and resolved[0][0].boundary() != aux.boundary():
        raise UsageError(
            f"{stated_by} selects boundary {aux.boundary()}, but {resolved[0][1]} selects {resolved[0][0].boundary()}",
            hint="fix the checkpoint's config instead of overriding it",
        )
    who = "the user" if opts.aux_layers is not None else f"registry entry {opts.registry_id}"
    d.decide(f"aux ids {list(aux.ids)} ({aux.convention}) as stated by {who} = boundary {aux.boundary()}")
    d.aux_stated_by = "user" if opts.aux_layers is not None else "registry"
    return aux


def _default_aux(n: int, d: Decisions) -> AuxLayers:
    """The documented default (2, L//2, L-3) for an `n`-layer target, refused where it is degenerate."""
    ids = default_boundary_ids(n)
    if len(set(ids)) != 3 or min(ids) < 1:
        raise UsageError(
            f"the checkpoint carries no aux-layer ids and the documented default (2, L//2, L-3) "
            f"is degenerate for a {n}-layer target: {ids}",
            hint=AUX_HINT,
        )
    d.decide(
        f"aux ids: none in the checkpoint; used the documented default (2, L//2, L-3) = {ids} "
        f"(boundary) for the {n}-layer target"
    )
    d.warn(
        "aux ids were not in the checkpoint: the documented default is only right if the drafter was "
        "trained on it (vLLM #50170)"
    )
    return AuxLayers(ids=tuple(ids), convention="boundary")


def _undocumented_convention(ids: list[int], where: str, opts: ReadOptions, d: Decisions) -> Convention:
    """The convention of ids a dialect stores without documenting one: the user's, else the registry entry's."""
    if opts.aux_convention is not None:
        d.decide(f"aux ids {ids} from {where}: convention '{opts.aux_convention}' as stated by the user")
        d.aux_stated_by = "user"
        return opts.aux_convention
    if opts.registry_convention is not None:
        d.decide(f"aux ids {ids} from {where}: convention '{opts.registry_convention}' as the registry entry states")
        d.aux_stated_by = "registry"
        return opts.registry_convention
    raise Ambiguous(
        f"{where} holds aux ids {ids} whose convention this dialect does not document",
        hint="state it with --aux-convention boundary|layer-output",
        code="aux-convention-unknown",
        fact="aux_convention",
        values=("boundary", "layer-output"),
    )


def _stored_flag(flag: str, cfg: dict, nested: dict, d: Decisions) -> bool | None:
    """A flag as config.json stores it: at the top level (fc_norm also under its legacy name use_aux_norm) and, for
    norm_before_fc, in the nested eagle_config too, the two agreeing; None where it is not stored."""
    top = cfg.get(flag)
    if flag == "fc_norm" and top is None and cfg.get("use_aux_norm") is not None:
        top = cfg["use_aux_norm"]
        d.decide(f"legacy use_aux_norm={top} read as fc_norm")
    inner = nested.get(flag) if flag == "norm_before_fc" else None
    for v, where in ((top, flag), (inner, f"eagle_config.{flag}")):
        if v is not None and not isinstance(v, bool):
            raise BadInput(
                f"config.json: {where} must be true or false, found {v!r}",
                hint="write true or false in config.json",
            )
    if top is not None and inner is not None and top != inner:
        raise BadInput(
            f"config.json: {flag}={top} at the top level but eagle_config.{flag}={inner}",
            hint="make the two agree in config.json (eaglezoo convert writes both from one value)",
        )
    return top if top is not None else inner


def read_flags(
    cfg: dict, nested: dict, opts: ReadOptions, d: Decisions, defaults: dict[str, bool], ambiguous: dict[str, str]
) -> dict[str, bool]:
    """Flags from top level (and nested eagle_config for norm_before_fc); user statements win.
    `ambiguous` maps a flag to the reason its stored value cannot be trusted without a statement."""
    values: dict[str, bool] = {}
    for flag in FLAGS:
        stored = _stored_flag(flag, cfg, nested, d)
        if flag in opts.flags:
            d.decide(f"{flag}={opts.flags[flag]} as stated by the user (config: {stored})")
            values[flag] = opts.flags[flag]
        elif flag in ambiguous and stored is not None and opts.trust_stored_flags:
            d.decide(f"{flag}={stored} read as stored, although this dialect leaves it ambiguous")
            values[flag] = stored
        elif flag in ambiguous and stored is not None:
            raise Ambiguous(
                f"{flag}={stored} in this dialect is ambiguous: {ambiguous[flag]}",
                hint=f"state the trained behaviour with --flag {flag}=true|false",
                code="flag-ambiguous",
                fact=flag,
                values=(stored, not stored),
            )
        elif stored is None:
            values[flag] = defaults.get(flag, False)
            if flag in ("norm_before_residual", "norm_output"):
                d.decide(f"{flag} absent: {values[flag]} (this dialect's semantics), now written explicitly")
        else:
            values[flag] = stored
    return values


@dataclass(frozen=True)
class FlatRules:
    """How a flat dialect lays a drafter out: its name (None: no dialect claims the config), the convention of the
    aux ids under `eagle_config` (nested) and at the top level (None: the dialect documents none), the prefixes
    renamed to canonical tensor names, the flags' values where the config leaves them unstated, and the flags whose
    stated value is ambiguous (the warning each gets)."""

    dialect: str | None
    nested_convention: Convention | None
    top_convention: Convention | None
    prefix_renames: Sequence[tuple[str, str]] = ()
    flag_defaults: dict[str, bool] | None = None
    ambiguous_flags: dict[str, str] | None = None


def read_flat(
    rules: FlatRules,
    cfg: dict,
    ckpt: Checkpoint,
    opts: ReadOptions,
    *,
    extra_drops: Callable[[str], str | None] = lambda n: None,
    layer_cfg: dict | None = None,
) -> Reading:
    """Read a drafter whose decoder keys live in `layer_cfg` (the config itself for HF-flat dialects)
    and whose EAGLE keys live at the top of `cfg`."""
    d = Decisions()
    layer_cfg = cfg if layer_cfg is None else layer_cfg
    top = cfg
    nested = top.get("eagle_config") or layer_cfg.get("eagle_config") or {}
    if not isinstance(nested, dict):
        raise BadInput(
            "config.json: eagle_config must be an object",
            hint="fix config.json: eagle_config holds the EAGLE keys as an object",
        )
    if nested.get("use_aux_hidden_state") is False:
        raise BadInput(
            "eagle_config.use_aux_hidden_state is false: not an EAGLE-3 drafter",
            hint="this is not an EAGLE-3 drafter; eaglezoo reads EAGLE-3 and 3.1 drafters only",
        )
    geometry = _geometry(layer_cfg, top, d)
    flags = read_flags(top, nested, opts, d, rules.flag_defaults or {}, rules.ambiguous_flags or {})
    if flags["fc_norm"] and flags["norm_before_fc"]:
        raise BadInput(
            "config.json: fc_norm and norm_before_fc are both true; they are mutually exclusive "
            "(speculators rejects it, vLLM silently applies both)",
            code="flags-exclusive",
            hint="set one of them to false in config.json (3.1 drafters use fc_norm)",
        )
    renames, drops = _tensor_names(ckpt, rules.prefix_renames, extra_drops)  # first: the aux count can come from fc
    found = _stated_aux_ids(top, nested, rules.top_convention, rules.nested_convention)
    aux, k = _aux_layers(found, top, _fan_in_k(ckpt, renames, geometry.target_hidden), geometry, opts, d)
    if layer_cfg.get("tie_word_embeddings"):
        d.warn("tie_word_embeddings was true: written false (SGLang would tie lm_head to embed_tokens)")
    architectures = top.get("architectures") or layer_cfg.get("architectures")
    spec = DrafterSpec(
        arch=arch_of({**layer_cfg, "architectures": architectures}),
        architectures=list(architectures or []),
        num_layers=geometry.num_layers,
        hidden_size=geometry.hidden,
        target_hidden_size=geometry.target_hidden,
        vocab_size=geometry.vocab,
        draft_vocab_size=geometry.draft_vocab,
        num_aux=k,
        aux=aux,
        dtype=top.get("torch_dtype") or top.get("dtype") or layer_cfg.get("torch_dtype") or layer_cfg.get("dtype"),
        layer_config=_carried_layer_config(layer_cfg, nested),
        **flags,
    )
    return Reading(rules.dialect, spec, renames, drops, d.decisions, d.warnings, d.aux_stated_by)


@dataclass
class Geometry:
    hidden: int
    vocab: int
    draft_vocab: int
    target_hidden: int
    num_layers: int


def _geometry(layer_cfg: dict, top: dict, d: Decisions) -> Geometry:
    hidden = require_int(layer_cfg, "hidden_size")
    vocab = require_int(layer_cfg, "vocab_size")
    require_int(layer_cfg, "num_attention_heads")
    draft_vocab = top.get("draft_vocab_size", layer_cfg.get("draft_vocab_size"))
    if draft_vocab is None:
        draft_vocab = vocab
        d.decide(f"draft_vocab_size absent: equal to vocab_size ({vocab})")
    elif not isinstance(draft_vocab, int) or draft_vocab <= 0 or draft_vocab > vocab:
        raise BadInput(
            f"config.json: draft_vocab_size must be an integer in 1..vocab_size ({vocab}), found {draft_vocab!r}",
            hint="fix draft_vocab_size in config.json",
        )
    target_hidden = top.get("target_hidden_size")
    if target_hidden is None:
        if "target_hidden_size" in top:
            d.decide(
                "target_hidden_size: null read as hidden_size "
                "(the key is omitted on output: vLLM's HF path crashes on null)"
            )
        target_hidden = hidden
    elif not isinstance(target_hidden, int) or target_hidden <= 0:
        raise BadInput(
            f"config.json: target_hidden_size must be a positive integer, found {target_hidden!r}",
            hint="fix target_hidden_size in config.json",
        )
    num_layers = layer_cfg.get("num_hidden_layers", 1)
    if not isinstance(num_layers, int) or num_layers <= 0:
        raise BadInput(
            f"config.json: num_hidden_layers must be a positive integer, found {num_layers!r}",
            hint="fix num_hidden_layers in config.json",
        )
    return Geometry(hidden, vocab, draft_vocab, target_hidden, num_layers)


def _tensor_names(
    ckpt: Checkpoint, prefix_renames: Sequence[tuple[str, str]], extra_drops: Callable[[str], str | None]
) -> tuple[dict[str, str], dict[str, str]]:
    """(source name -> canonical name, source name -> why it is dropped)."""
    renames, drops = {}, {}
    for name in ckpt.refs:
        reason = extra_drops(name)
        if reason:
            drops[name] = reason
        else:
            renames[name] = rename(name, prefix_renames)
    _check_unique(renames)
    return renames, drops


def _stated_aux_ids(
    top: dict, nested: dict, top_convention: Convention | None, nested_convention: Convention | None
) -> list[tuple[list[int], Convention | None, str]]:
    found = []
    for block, convention, where in ((top, top_convention, ""), (nested, nested_convention, "eagle_config.")):
        if block.get("eagle_aux_hidden_state_layer_ids") is not None:
            key = f"{where}eagle_aux_hidden_state_layer_ids"
            found.append((parse_ids(block["eagle_aux_hidden_state_layer_ids"], key), convention, key))
    return found


def _fan_in_k(ckpt: Checkpoint, renames: dict[str, str], target_hidden: int) -> int | None:
    """The aux count fc.weight's fan-in implies (k x target_hidden_size), when it divides evenly."""
    fc = next((ckpt.refs[s] for s, c in renames.items() if c == "fc.weight"), None)
    if fc is None or len(fc.shape) != 2 or fc.shape[1] % target_hidden:
        return None
    return fc.shape[1] // target_hidden


def _aux_layers(
    found, top: dict, fan_k: int | None, g: Geometry, opts: ReadOptions, d: Decisions
) -> tuple[AuxLayers | None, int]:
    """The aux ids (None only when lint tolerates their absence) and the aux count, checked against the target."""
    k = top.get("num_aux_hidden_states")
    if k is not None and (not isinstance(k, int) or k <= 0):
        raise BadInput(
            f"config.json: num_aux_hidden_states must be a positive integer, found {k!r}",
            hint="fix num_aux_hidden_states in config.json",
        )
    if opts.allow_missing_aux and opts.stated_aux() is None and (not found or _convention_unknown(found, opts)):
        return None, k or fan_k or (len(found[0][0]) if found else 3)
    aux = resolve_aux(found, k or fan_k or (len(found[0][0]) if found else None), opts, d)
    k = len(aux.ids) if k is None else k
    if len(aux.ids) != k:
        raise BadInput(
            f"config.json: {len(aux.ids)} aux ids but num_aux_hidden_states is {k}",
            code="aux-count",
            hint="give as many aux ids as the drafter has aux slots (--aux-layers), or fix config.json",
        )
    if len(set(aux.ids)) != len(aux.ids):
        raise BadInput(
            f"aux ids {list(aux.ids)} are not distinct (duplicated aux slots)",
            code="aux-ids-duplicate",
            hint="each aux slot captures another target layer: fix the ids (--aux-layers) or config.json",
        )
    return aux, k


def _convention_unknown(found, opts: ReadOptions) -> bool:
    stated = opts.aux_convention is not None or opts.registry_convention is not None
    return any(conv is None for _, conv, _ in found) and not stated


def _carried_layer_config(layer_cfg: dict, nested: dict) -> dict:
    """The decoder keys eaglezoo does not interpret, carried through to the output as they are."""
    layer_config = {key: v for key, v in layer_cfg.items() if key not in INTERPRETED}
    nested_extra = {key: v for key, v in nested.items() if key not in NESTED_INTERPRETED}
    if nested_extra:
        layer_config["eagle_config"] = nested_extra
    return layer_config


def _check_unique(renames: dict[str, str]) -> None:
    seen: dict[str, str] = {}
    for src, dst in renames.items():
        if dst in seen:
            raise BadInput(
                f"tensors {seen[dst]!r} and {src!r} both map to {dst!r}",
                hint=f"if the dialect was misdetected, {NAME_THE_DIALECT}; else remove one of the tensors",
            )
        seen[dst] = src


def trivial_vocab_map_drop(ckpt: Checkpoint, draft_vocab: int | None, vocab: int | None) -> Callable[[str], str | None]:
    """d2t/t2d are dropped when V_d == V, and only when they are the identity (else: an error)."""
    if draft_vocab is None or vocab is None or draft_vocab != vocab:
        return lambda n: None

    def drop(name: str) -> str | None:
        if name not in ("d2t", "t2d"):
            return None
        t = ckpt.load(name)
        trivial = bool((t == 0).all()) if name == "d2t" else bool(t.bool().all())
        if not trivial:
            raise BadInput(
                f"{name} is not the identity map although draft_vocab_size == vocab_size",
                hint="the maps must be absent when both vocabularies are the same: re-export without d2t/t2d",
            )
        return (
            "identity vocabulary map (draft_vocab_size == vocab_size); engines reject d2t then "
            "(see docs/formats.md#identity-vocabulary-maps)"
        )

    return drop


AUX_HINT = (
    "give the registry id instead of the folder (its entry carries the ids), or pass the ids the drafter was "
    "trained on, e.g. --aux-layers 2,3,4 --aux-convention boundary"
)


def detect_convention(value: str | None) -> Convention | None:
    if value is None:
        return None
    if value not in CONVENTIONS:
        raise UsageError(f"unknown aux convention {value!r}", hint="use boundary or layer-output")
    return value  # type: ignore[return-value]
