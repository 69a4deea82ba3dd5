"""`eaglezoo serve-config`: the serving command for a drafter folder or a registry entry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ..errors import UsageError, printable
from ..limits import MAX_K
from .common import JsonOpt, RegistryOpt, app, emit, out

if TYPE_CHECKING:
    from ..requirements import Requirements
    from ..serving import ServeConfig

DEFAULT_K = 3


@app.command("serve-config")
def serve_config_cmd(
    drafter: Annotated[
        str, typer.Argument(metavar="DRAFTER", help="Registry id (or its YAML file) or drafter directory.")
    ],
    engine: Annotated[str, typer.Option(help="vllm, sglang or llamacpp (llama-server).")] = "vllm",
    num_spec_tokens: Annotated[
        Optional[int],
        typer.Option(
            "--num-spec-tokens",
            "-k",
            min=1,
            max=MAX_K,
            metavar="K",
            help="Draft depth K (default: the drafter's recommended K, from its entry or its config; else 3).",
        ),
    ] = None,
    target: Annotated[
        str | None, typer.Option(metavar="TARGET", help="Target to serve (default: the registry's).")
    ] = None,
    registry_dir: RegistryOpt = None,
    as_json: JsonOpt = False,
):
    """The exact serving command: convert first where needed, then serve.

    Example: eaglezoo serve-config tiny-example-eagle3 --engine vllm

    With the --speculative-config JSON, the engine's version floor and warnings. With --engine llamacpp: the
    target's GGUF, the drafter's GGUF, then llama-server on both."""
    result = serve_config_for(drafter, engine, num_spec_tokens, target, registry_dir)

    def render():
        for w in result.warnings:  # first, where they are read before any command is copied
            out.print(f"# warning: {w}", markup=False, soft_wrap=True)
        if result.target_convert_command:  # llama.cpp: three steps, each labelled
            for label, step in zip(LLAMACPP_LABELS, result.steps, strict=True):
                out.print(label, markup=False)
                out.print(step, markup=False, soft_wrap=True)
        elif result.convert_command:
            out.print("# 1. convert (the warning above says why)", markup=False)
            out.print(result.convert_command, markup=False, soft_wrap=True)
            out.print("# 2. serve the converted folder", markup=False)
        if not result.target_convert_command:
            out.print(result.command, markup=False, soft_wrap=True)
        if result.diagnose_command:
            from ..serving import DIAGNOSE_LABEL

            out.print(f"# {DIAGNOSE_LABEL}", markup=False, soft_wrap=True)
            out.print(result.diagnose_command, markup=False, soft_wrap=True)
        if result.speculative_config:
            out.print("# --speculative-config: " + json.dumps(result.speculative_config), markup=False)
        out.print(f"# aux layers the engine captures ({result.aux_convention}): {_captured_text(result)}", markup=False)
        out.print(f"# minimum {engine} version: {result.min_version or 'unknown'}", markup=False)
        for note in result.notes:
            out.print(f"# {note}", markup=False)

    emit(result.model_dump(mode="json"), as_json, render)


LLAMACPP_LABELS = (
    "# 1. the target's GGUF (eaglezoo writes it: llama.cpp's converter refuses some tokenizers)",
    "# 2. the drafter's GGUF, every fact written explicitly",
    "# 3. serve both (add --port PORT, -t THREADS as you need)",
)


def _captured_text(result: ServeConfig) -> str:
    """The aux comment's value: the ids the config states, or the engine's default, said to be one."""
    if not result.aux_layers_default:
        return str(result.aux_layers_captured)
    from ..serving import DEFAULT_CAPTURE

    default = f"the engine's default {DEFAULT_CAPTURE[result.aux_convention]}"
    if result.target_num_layers is None:
        return f"unknown: {default} for the target's layer count L"
    return f"{result.aux_layers_captured}, {default} for the {result.target_num_layers}-layer target"


def serve_config_for(
    drafter: str, engine: str, k: int | None, target: str | None = None, registry_dir=None
) -> ServeConfig:
    """`eaglezoo serve-config`: for a drafter folder (read from its files) or a registry entry."""
    from .sources import classify

    kind = classify(drafter)
    if kind == "dir":
        return _serve_folder(Path(drafter), engine, k, target)
    if kind == "hub":
        raise UsageError(
            f"{drafter}: give a registry id or a drafter folder",
            hint="pull it first (eaglezoo pull), or add it to the registry",
        )
    return _serve_entry(drafter, engine, k, target, registry_dir)


def _serve_entry(name: str, engine: str, k: int | None, target: str | None, registry_dir) -> ServeConfig:
    from ..checkpoint.config import target_config, target_layers
    from ..registry.load import lookup
    from ..serving import serve_entry

    entry, reg = lookup(name, registry_dir)
    spec = entry.spec()
    model_type = None
    if target is None:
        target_name, layers = _entry_place(entry.target, reg, "target"), entry.target_num_layers
        if (Path(target_name) / "config.json").is_file():
            model_type = target_config(Path(target_name)).get("model_type")
    else:
        target_name, tcfg = _checked_target(target)
        layers, model_type = target_layers(tcfg), (tcfg or {}).get("model_type")
        if tcfg and entry.target_hidden_size and entry.target_vocab_size:  # spec() fills unknown sizes with 1
            _refuse_misfit(spec, tcfg)
    source = [name, *(["--registry", _whole(registry_dir)] if registry_dir else [])]
    result = serve_entry(
        entry,
        engine,
        _entry_place(entry.drafter, reg, "drafter"),
        target_name,
        served_k(k, entry.requirements),
        source,
        layers,
        into=_whole("."),
        target_model_type=model_type,
    )
    return with_requirements(result, entry.requirements, k)


def _serve_folder(path, engine: str, k: int | None, target: str | None) -> ServeConfig:
    from ..checkpoint.config import target_layers
    from ..checkpoint.formats.base import ReadOptions
    from ..checkpoint.read import read_drafter
    from ..serving import serve_drafter

    if target is None:
        raise UsageError(
            "--target is needed when serving a drafter directory",
            hint="add --target TARGET (the model the engine serves)",
        )
    target_name, tcfg = _checked_target(target)
    drafter = read_drafter(path, None, ReadOptions(allow_missing_aux=True), strict=False)
    if tcfg:
        _refuse_misfit(drafter.spec, tcfg)
    from ..convert_requirements import declared

    requirements = declared(None, drafter.config)  # the K its config proposes
    result = serve_drafter(
        drafter,
        engine,
        _whole(path),
        target_name,
        served_k(k, requirements),
        [_whole(path)],
        target_layers(tcfg),
        into=_whole("."),
        target_model_type=(tcfg or {}).get("model_type"),
    )
    return with_requirements(result, requirements, k)


def served_k(asked: int | None, requirements: Requirements) -> int:
    """-k where given, else the drafter's recommended K, else 3."""
    return asked or requirements.recommended_k or DEFAULT_K


def with_requirements(result: ServeConfig, requirements: Requirements, asked: int | None) -> ServeConfig:
    """The serving path with what the drafter requires said beside it: the route its requests take, each stated
    requirement as a note (with its source), and -k against the recommended K."""
    notes = [f"requires: {line}" for line in requirements.lines()]
    if requirements.route is not None:
        notes.append(f"send requests to {requirements.route}: the prompt format the drafter was trained on")
    if asked is not None and requirements.recommended_k not in (None, asked):
        notes.append(f"-k {asked} is not the drafter's recommended K={requirements.recommended_k}")
    return result.model_copy(update={"route": requirements.route, "notes": result.notes + notes})


def _whole(path) -> str:
    """A local path as the printed commands name it: whole (absolute), so that it names the same folder wherever
    the command runs and the server reports it (/server_info gives the speculative config's model as given), and
    doctor, run from another folder, reads the folder the server loaded (issue 46)."""
    import os

    return os.path.abspath(path)


def _entry_place(repo, reg, what: str) -> str:
    """A registry entry's drafter or target as the command names it: its Hub repo id, or its folder."""
    if repo.repo:
        return repo.repo
    from .sources import location

    return _whole(location(repo, reg, None, what).path)


def _checked_target(target: str) -> tuple[str, dict | None]:
    """--target as the command names it, and its config where it is a local folder that has one; else an
    owner/name repo id by the Hub client's own rules (never pulled: the validator passes a bare name, far
    likelier a missing folder than a legacy Hub id, and `verify` takes owner/name only)."""
    from ..checkpoint.config import target_config
    from ..hub.client import repo_id_problem

    path = Path(target)
    if target and path.is_dir():
        return _whole(path), target_config(path) if (path / "config.json").exists() else None
    if target and path.exists():
        raise UsageError(
            f"--target {printable(target)}: not a directory",
            hint="give the target model's folder (with its config.json) or its Hub repo id (owner/name)",
        )
    if "/" not in target or repo_id_problem(target):
        raise UsageError(
            f"--target {printable(repr(target))}: no such directory, nor a Hub repo id (owner/name)",
            hint="give the target model's folder or its Hub repo id (owner/name)",
        )
    return target, None


def _refuse_misfit(spec, tcfg: dict) -> None:
    from ..checkpoint.problems import refuse_misfit

    refuse_misfit(spec.aux, spec.target_hidden_size, spec.vocab_size, tcfg)
