"""`eaglezoo serve-config`: the serving command for a drafter folder or a registry entry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ..errors import UsageError
from .common import JsonOpt, NumSpecTokensOpt, RegistryOpt, app, emit, err, out

if TYPE_CHECKING:
    from ..serving import ServeConfig


@app.command("serve-config")
def serve_config_cmd(
    drafter: Annotated[str, typer.Argument(metavar="DRAFTER", help="Registry id (or its YAML file) or drafter directory.")],
    engine: Annotated[str, typer.Option(help="vllm or sglang.")] = "vllm",
    num_spec_tokens: NumSpecTokensOpt = 3,
    target: Annotated[Optional[str], typer.Option(metavar="TARGET", help="Target to serve (default: the registry's).")] = None,
    registry_dir: RegistryOpt = None,
    as_json: JsonOpt = False,
):
    """The exact serving command and --speculative-config JSON, version floor and warnings."""
    result = serve_config_for(drafter, engine, num_spec_tokens, target, registry_dir)

    def render():
        out.print(result.command, markup=False, soft_wrap=True)
        if result.speculative_config:
            out.print("# --speculative-config: " + json.dumps(result.speculative_config), markup=False)
        out.print(f"# aux layers the engine captures ({result.aux_convention}): {result.aux_layers_captured}", markup=False)
        out.print(f"# minimum {engine} version: {result.min_version or 'unknown'}", markup=False)
        for w in result.warnings:
            err.print(f"warning: {w}", markup=False)
    emit(result.model_dump(mode="json"), as_json, render)


def serve_config_for(drafter: str, engine: str, k: int, target: str | None = None,
                     registry_dir=None) -> ServeConfig:
    """`eaglezoo serve-config`: for a drafter folder (read from its files) or a registry entry."""
    from ..serving import schema_for, serve_config
    from .sources import classify

    kind = classify(drafter)
    if kind == "dir":
        return _serve_folder(Path(drafter), engine, k, target)
    if kind == "hub":
        raise UsageError(f"{drafter}: give a registry id or a drafter folder",
                         hint="pull it first (eaglezoo pull), or add it to the registry")
    from ..registry.load import lookup

    entry, _ = lookup(drafter, registry_dir)
    fmt = schema_for(entry.dialect)
    result = serve_config(entry.spec(), engine, entry.drafter.repo or entry.drafter.path, target or entry.target.repo
                          or entry.target.path, k, entry.drafter.revision, fmt,
                          has_top_level_ids=entry.aux_layers.ids is not None and entry.dialect in ("eagle31", "speculators"))
    if entry.aux_layers.ids is None:
        result.warnings.append("the registry does not know this drafter's aux ids: run eaglezoo lint on it first")
    elif entry.dialect not in ("eagle31", "speculators"):
        result.warnings.append(f"published in the {entry.dialect} dialect: convert it so that the engine reads the "
                               "ids where it looks (eaglezoo convert; then serve the converted folder)")
    return result



def _serve_folder(path, engine: str, k: int, target: str | None) -> ServeConfig:
    from ..checkpoint.formats.base import ReadOptions
    from ..checkpoint.read import read_drafter
    from ..serving import schema_for, serve_config

    if target is None:
        raise UsageError("--target is needed when serving a drafter directory",
                         hint="add --target TARGET (the model the engine serves)")
    drafter = read_drafter(path, None, ReadOptions(allow_missing_aux=True), strict=False)
    reading, cfg = drafter.reading, drafter.config
    fmt = schema_for(reading.dialect)
    result = serve_config(reading.spec, engine, str(path), target, k, None, fmt,
                          has_top_level_ids="eagle_aux_hidden_state_layer_ids" in cfg)
    if reading.dialect not in ("eagle31", "speculators"):
        result.warnings.append(f"{reading.dialect} dialect: convert it first (eaglezoo convert) so that every "
                               "engine finds the ids and flags where it reads them")
    return result
