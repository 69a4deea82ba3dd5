"""Every `config.json` key eaglezoo reads or writes, validated where a config enters (from disk or the
Hub) and before convert writes one, so that garbage stops here and never reaches a serving engine.

Validation only judges: the caller keeps the original dict, so unknown keys, key order and value
types pass through untouched. A bad value is one line naming the file and the key path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Strict,
    Tag,
    ValidationError,
    WrapValidator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ..errors import BadInput, UsageError
from ..fsutil import read_json

# The dtype names transformers resolves with getattr(torch, name), plus its "auto".
TORCH_DTYPES = frozenset(
    {
        "auto",
        "float32",
        "float",
        "float16",
        "half",
        "bfloat16",
        "float64",
        "double",
        "float8_e4m3fn",
        "float8_e4m3fnuz",
        "float8_e5m2",
        "float8_e5m2fnuz",
        "float8_e8m0fnu",
        "float4_e2m1fn_x2",
        "int8",
        "uint8",
        "int16",
        "int32",
        "int64",
        "bool",
        "complex64",
        "complex128",
    }
)
ERROR = "config_value"
FLAT, PER_LAYER_TYPE = "<flat>", "<per layer type>"  # union tags pydantic puts in an error's location
SHOWN_CHARS = 60
MAX_DEPTH = 32  # real configs nest a handful of levels (quantization_config.config_groups.group_0.weights)


def described(what: str) -> WrapValidator:
    """Any failure of the wrapped type reads as one phrase, what the value must be."""

    def wrap(value: Any, handler):
        try:
            return handler(value)
        except ValidationError:
            raise PydanticCustomError(ERROR, what) from None

    return WrapValidator(wrap)


def object_or_null(value: Any) -> Any:
    if value is not None and not isinstance(value, dict):
        raise PydanticCustomError(ERROR, "an object or null")
    return value


_PositiveInt = Annotated[int, Strict(), Field(gt=0)]
_PositiveNumber = Annotated[float, Strict(), Field(gt=0, allow_inf_nan=False)]  # strict float takes ints, not strings
_Number = Annotated[float, Strict(), Field(allow_inf_nan=False)]
_Name = Annotated[str, Strict(), Field(min_length=1)]

PositiveInt = Annotated[_PositiveInt, described("a positive integer")]
PositiveIntOrNull = Annotated[_PositiveInt | None, described("a positive integer or null")]
PositiveNumber = Annotated[_PositiveNumber, described("a positive number")]
Number = Annotated[_Number, described("a finite number")]
Numbers = Annotated[list[_Number], described("a list of numbers")]
Name = Annotated[_Name, described("a non-empty string")]
BoolOrNull = Annotated[Annotated[bool, Strict()] | None, described("true, false or null")]
Architectures = Annotated[
    Annotated[list[_Name], Field(min_length=1)] | None, described("a non-empty list of non-empty strings")
]
LayerIds = Annotated[
    Annotated[list[Annotated[int, Strict()]], Field(min_length=1)] | None,
    described("a non-empty list of integers or null"),
]
Dtype = Annotated[
    Literal[tuple(sorted(TORCH_DTYPES))] | None,  # type: ignore[misc]
    described("a dtype name transformers knows (float16, bfloat16, float32, ...) or null"),
]


class Block(BaseModel):
    model_config = ConfigDict(extra="allow")


class RopeFactors(Block):
    factor: PositiveNumber = None
    original_max_position_embeddings: PositiveInt = None
    low_freq_factor: PositiveNumber = None
    high_freq_factor: PositiveNumber = None
    beta_fast: PositiveNumber = None
    beta_slow: PositiveNumber = None
    attention_factor: PositiveNumber = None
    mscale: Number = None
    mscale_all_dim: Number = None
    long_factor: Numbers = None
    short_factor: Numbers = None


class RopeScaling(RopeFactors):
    """transformers 4: `rope_scaling`, named by `rope_type` (or the older `type`)."""

    rope_type: Name = None
    type: Name = None

    @model_validator(mode="after")
    def _named(self):
        if self.rope_type is None and self.type is None:
            raise PydanticCustomError(ERROR, "null or an object with a string rope_type (or type)")
        return self


class RopeParameters(RopeFactors):
    """transformers 5: `rope_parameters`, with the theta inside."""

    rope_type: Name = None
    rope_theta: PositiveNumber = None


def _rope_form(value: Any) -> str:
    per_layer = isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values())
    return PER_LAYER_TYPE if per_layer else FLAT


# transformers 5 keys models with several attention kinds by layer type (Gemma 3: full_attention, sliding_attention).
_RopeForms = Annotated[RopeParameters, Tag(FLAT)] | Annotated[dict[str, RopeParameters], Tag(PER_LAYER_TYPE)]
RopeParametersField = Annotated[
    Annotated[_RopeForms, Discriminator(_rope_form)] | None, BeforeValidator(object_or_null)
]
RopeScalingField = Annotated[RopeScaling | None, BeforeValidator(object_or_null)]


class DecoderConfig(Block):
    """The keys of a decoder (a drafter's layer, a target's language model) eaglezoo reads."""

    architectures: Architectures = None
    model_type: Name = None
    hidden_size: PositiveInt = None
    intermediate_size: PositiveInt = None
    num_attention_heads: PositiveInt = None
    num_key_value_heads: PositiveIntOrNull = None
    head_dim: PositiveIntOrNull = None
    num_hidden_layers: PositiveInt = None
    vocab_size: PositiveInt = None
    max_position_embeddings: PositiveInt = None
    rms_norm_eps: PositiveNumber = None
    rope_theta: PositiveNumber = None
    rope_scaling: RopeScalingField = None
    rope_parameters: RopeParametersField = None
    torch_dtype: Dtype = None
    dtype: Dtype = None
    hidden_act: Name = None
    tie_word_embeddings: BoolOrNull = None
    attention_bias: BoolOrNull = None
    mlp_bias: BoolOrNull = None
    q_lora_rank: PositiveIntOrNull = None  # MLA (layout.py)
    kv_lora_rank: PositiveIntOrNull = None
    qk_nope_head_dim: PositiveInt = None
    qk_rope_head_dim: PositiveInt = None
    v_head_dim: PositiveInt = None


class EagleConfig(Block):
    eagle_aux_hidden_state_layer_ids: LayerIds = None
    use_aux_hidden_state: BoolOrNull = None
    norm_before_fc: BoolOrNull = None


class Verifier(Block):
    name_or_path: Annotated[_Name | None, described("a non-empty string or null")] = None


class SpeculatorsConfig(Block):
    verifier: Annotated[Verifier | None, BeforeValidator(object_or_null)] = None


class DrafterConfig(DecoderConfig):
    draft_vocab_size: PositiveIntOrNull = None
    target_hidden_size: PositiveIntOrNull = None
    num_aux_hidden_states: PositiveIntOrNull = None
    eagle_aux_hidden_state_layer_ids: LayerIds = None
    fc_norm: BoolOrNull = None
    norm_output: BoolOrNull = None
    norm_before_fc: BoolOrNull = None
    norm_before_residual: BoolOrNull = None
    use_aux_norm: BoolOrNull = None
    eagle_config: Annotated[EagleConfig | None, BeforeValidator(object_or_null)] = None
    speculators_model_type: Name = None
    speculators_config: Annotated[SpeculatorsConfig | None, BeforeValidator(object_or_null)] = None
    transformer_layer_config: Annotated[DecoderConfig | None, BeforeValidator(object_or_null)] = None


class TargetConfig(DecoderConfig):
    text_config: Annotated[DecoderConfig | None, BeforeValidator(object_or_null)] = None  # multimodal targets


class TargetLanguageModel(Block):
    """What every target must state (at the top level, or in `text_config`)."""

    hidden_size: PositiveInt
    num_hidden_layers: PositiveInt
    vocab_size: PositiveInt


def validate_config(raw: dict, where: str, kind: Literal["drafter", "target"]) -> dict:
    """`raw` itself, once every key eaglezoo knows holds a sensible value; else BadInput naming
    `where` (the file, or the Hub repo's file) and the key path."""
    label = f"{kind} config {where}"
    _check_values(raw, label)
    if kind == "drafter":
        _check(DrafterConfig, raw, label)
    else:
        _check(TargetConfig, raw, label)
        lm = raw.get("text_config") or raw  # as target_config below reads it
        _check(TargetLanguageModel, lm, label, prefix="text_config." if lm is not raw else "")
    return raw


def _check_values(raw: dict, label: str) -> None:
    """Every key, known or not (all are written out again): no absurd nesting, which breaks serialisers
    downstream, and no text UTF-8 cannot encode (a lone surrogate, which JSON's \\u escapes can hold)."""
    stack: list[tuple[tuple, Any]] = [((), raw)]
    while stack:
        path, value = stack.pop()
        if len(path) > MAX_DEPTH:
            raise BadInput(
                f"{label}: key {path[0]!r} is nested more than {MAX_DEPTH} levels deep",
                hint="flatten that key: a model config is a few levels deep",
            )
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for key, item in items:
            child = (*path, key)
            for text in (key, item):
                if isinstance(text, str) and not _encodable(text):
                    where = ".".join(map(str, child))
                    raise BadInput(
                        f"{label}: key {where!r} holds text that is not valid Unicode ({shown(text)})",
                        hint="re-save the file as valid UTF-8 JSON",
                    )
            stack.append((child, item))


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check(model: type[BaseModel], raw: dict, label: str, prefix: str = "") -> None:
    try:
        model.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors()
        more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        raise BadInput(
            f"{label}: {sentence(errors[0], prefix)}{more}",
            hint="fix that key in the file (it is read as transformers reads it)",
        ) from None


def sentence(error: dict, prefix: str = "") -> str:
    """One pydantic error as `key 'a.b' must be ... (got ...)`."""
    key = prefix + ".".join(str(part) for part in error["loc"] if part not in (FLAT, PER_LAYER_TYPE))
    if error["type"] == "missing":
        return f"key '{key}' is missing"
    if error["type"] == ERROR:
        return f"key '{key}' must be {error['msg']} (got {shown(error['input'])})"
    return f"key '{key}': {error['msg']} (got {shown(error['input'])})"


def shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."


def target_config(target: Path) -> dict:
    if not target.is_dir():
        raise UsageError(
            f"target {target}: not a directory",
            hint="name the target model's folder (with its config.json), or a Hub repo id",
        )
    path = target / "config.json"
    cfg = validate_config(read_json(path, "target config"), str(path), "target")
    return cfg.get("text_config") or cfg  # multimodal targets keep the LM under text_config


def target_layers(tcfg: dict | None) -> int | None:
    """A target config's decoder layer count, or None where it has none to give."""
    layers = (tcfg or {}).get("num_hidden_layers")
    return layers if isinstance(layers, int) and not isinstance(layers, bool) and layers > 0 else None
