"""`eaglezoo convert`: the request from what SRC names, the plan, the conversion, the rendering."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.table import Table

from ..errors import UsageError
from .common import (
    AuxConventionOpt,
    AuxLayersOpt,
    DrafterArg,
    FlagOpt,
    FromOpt,
    JsonOpt,
    RegistryOpt,
    RevisionOpt,
    app,
    byte_progress,
    emit,
    human_bytes,
    out,
    read_options,
    shown,
)

if TYPE_CHECKING:
    from ..checkpoint.formats.base import ReadOptions
    from ..convert import ConvertRequest


@app.command()
def convert(
    src: DrafterArg,
    dst: Annotated[Path, typer.Argument(metavar="OUT", help="Output directory (must not exist unless --force).")],
    to: Annotated[
        str,
        typer.Option(
            "--to",
            metavar="FORMAT",
            help=(
                "Output format: eagle31, speculators, native (a P-EAGLE, DFlash or DSpark drafter's own form), or "
                "gguf (llama.cpp; needs --target)."
            ),
        ),
    ] = "eagle31",
    from_: FromOpt = None,
    target: Annotated[
        Optional[str], typer.Option(metavar="TARGET", help="Target model directory (or Hub id) to check against.")
    ] = None,
    aux_layers: AuxLayersOpt = None,
    aux_convention: AuxConventionOpt = None,
    flag: FlagOpt = None,
    dtype: Annotated[
        Optional[str],
        typer.Option(metavar="DTYPE", help="Cast floating tensors (float32, float16, bfloat16); ints and bools never."),
    ] = None,
    verifier: Annotated[
        Optional[str], typer.Option(metavar="REPO", help="Target repo id written into speculators_config.verifier.")
    ] = None,
    borrow_from_target: Annotated[
        bool,
        typer.Option(
            "--borrow-from-target",
            rich_help_panel="DFlash, DSpark",
            help="With --to speculators: copy the target's embedding, lm_head and final norm in.",
        ),
    ] = False,
    revision: RevisionOpt = None,
    registry_dir: RegistryOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the plan; write nothing.")] = False,
    force: Annotated[bool, typer.Option(help="Replace OUT if it exists.")] = False,
    as_json: JsonOpt = False,
):
    """Convert a drafter to the EAGLE 3.1 schema (or speculators), losslessly.

    Example: eaglezoo convert tiny-example-eagle3 tiny-eagle31"""
    from ..convert import apply, check_destination, plan

    req = convert_request(
        src,
        target,
        read_options(aux_layers, aux_convention, flag),
        revision=revision,
        registry_dir=registry_dir,
        to=to,
        dialect=from_,
        dtype=dtype,
        verifier=verifier,
        borrow=borrow_from_target,
    )
    check_destination(req.source, dst, force)  # a dry run refuses what the real run would refuse
    if to == "gguf" and from_ is None and _is_target(req.source):
        _convert_target(req, dst, dry_run, force, as_json)
        return
    try:
        prepared = plan(req)
    except UsageError:
        if from_ is None and _is_target(req.source):  # read as a drafter only to fail: say what it is
            raise UsageError(
                f"{shown(req.source)} is a target (a plain causal LM), not a drafter: convert writes a target only as "
                "llama.cpp's GGUF",
                hint="eaglezoo convert TARGET OUT --to gguf",
            ) from None
        raise
    p = prepared.plan
    if dry_run:
        emit(
            {"dry_run": True, "plan": p.model_dump(mode="json"), "config": prepared.config},
            as_json,
            lambda: render_plan(p, "[dim]dry run: nothing written[/dim]"),
        )
        return
    with byte_progress("converting", p.num_bytes) as advance:
        record = apply(prepared, dst, force=force, progress=advance)
    emit(
        {"dry_run": False, "out": str(dst), "plan": p.model_dump(mode="json"), "record": record},
        as_json,
        lambda: render_plan(
            p,
            f"[green]wrote[/green] {shown(dst)} ({p.num_tensors} tensors, {human_bytes(p.num_bytes)}; "
            "conversion.json records every decision)",
        ),
    )


def _is_target(folder: Path) -> bool:
    from ..checkpoint.formats.gguf_target import is_target

    return is_target(folder)


def _convert_target(req: ConvertRequest, dst: Path, dry_run: bool, force: bool, as_json: bool) -> None:
    """`convert TARGET OUT --to gguf`: a plain causal-LM target (no drafter) as llama.cpp serves it
    (checkpoint/formats/gguf_target.py): OUT/target.gguf and OUT/conversion.json."""
    from ..checkpoint.formats.gguf_target import apply_target, plan_target

    given = [
        name
        for name, value in (
            ("--target", req.target),
            ("--verifier", req.verifier),
            ("--borrow-from-target", req.borrow),
            ("--aux-layers/--aux-convention/--flag", req.options != type(req.options)()),
        )
        if value
    ]
    if given:
        raise UsageError(
            f"{given[0]} applies to a drafter; {shown(req.source)} is a target (a plain causal LM)",
            hint="convert the target alone: eaglezoo convert TARGET OUT --to gguf [--dtype DTYPE]",
        )
    p = plan_target(req.source, req.dtype or "float32")
    tensors = [
        {"name": t.name, "from": t.canonical, "dtype": t.dtype, "shape": list(t.shape), "transform": t.transform}
        for t in p.gguf.tensors
    ]
    plan_json = {"source": str(req.source), "kind": "target", "to": "gguf", "dtype": p.dtype, "tensors": tensors}
    plan_json["decisions"] = p.gguf.decisions
    plan_json["drops"] = p.drops

    def render(outcome: str) -> None:
        out.print(
            f"[bold]{shown(req.source)}[/bold]: target ({shown(p.config['architectures'][0])}) -> [cyan]gguf[/cyan]"
        )
        out.print(f"tensors: {len(tensors)} written ({p.dtype}; norms and 1-D tensors F32), {len(p.drops)} dropped")
        for name, why in p.drops.items():
            out.print(f"  drop   {shown(name)}: {shown(why)}")
        for dec in p.gguf.decisions:
            out.print(f"[blue]decision[/blue] {shown(dec)}")
        out.print(outcome)

    if dry_run:
        emit({"dry_run": True, "plan": plan_json}, as_json, lambda: render("[dim]dry run: nothing written[/dim]"))
        return
    with byte_progress("converting", sum(t.nbytes for t in p.gguf.tensors)) as advance:
        written = apply_target(p, dst, force, advance)
    emit(
        {"dry_run": False, "out": str(dst), "gguf": str(written.gguf), "plan": plan_json},
        as_json,
        lambda: render(
            f"[green]wrote[/green] {shown(written.gguf)} ({written.num_tensors} tensors, "
            f"{human_bytes(written.num_bytes)}; conversion.json records every tensor)"
        ),
    )


def render_plan(p, outcome: str) -> None:
    s = p.spec
    out.print(
        f"[bold]{shown(p.source)}[/bold]: dialect [cyan]{p.dialect}[/cyan] -> [cyan]{p.to}[/cyan]  "
        f"(EAGLE {s.eagle_version}, {s.arch}, k={s.num_aux}, aux boundary {s.aux.boundary() if s.aux else None}, "
        f"vocab {s.vocab_size}/{s.draft_vocab_size})"
    )
    out.print(
        f"tensors: {p.num_tensors} kept ({human_bytes(p.num_bytes)}), {len(p.renames)} renamed, "
        f"{len(p.drops)} dropped"
        + (
            f", cast to {p.dtype}"
            if p.dtype
            else ", bytes unchanged"
            if p.to != "gguf"
            else " (conversion.json: each tensor's dtype and transform)"
        )
    )
    for r in p.renames[:6]:
        out.print(f"  rename {shown(r.source)} -> {shown(r.output)}")
    if len(p.renames) > 6:
        out.print(f"  ... and {len(p.renames) - 6} more renames")
    for d in p.drops:
        out.print(f"  drop   {shown(d.name)}: {shown(d.reason)}")
    if p.config_diff:
        table = Table("config key", "before", "after", title="config changes", title_justify="left")
        for c in p.config_diff:
            table.add_row(shown(c.key), shown(json.dumps(c.before)), shown(json.dumps(c.after)))
        out.print(table)
    for dec in p.decisions:
        out.print(f"[blue]decision[/blue] {shown(dec)}")
    for w in p.warnings:
        out.print(f"[yellow]warning[/yellow] {shown(w)}")
    out.print(outcome)


def convert_request(
    src: str,
    target: str | None,
    opts: ReadOptions,
    *,
    revision: str | None = None,
    registry_dir: Path | None = None,
    **choices,
) -> ConvertRequest:
    """The request for what `src` and `target` name (a folder, a registry entry or a Hub repo), with the
    registry's aux ids where the command line gives none."""
    from ..convert import ConvertRequest
    from .sources import resolve

    source = resolve(src, revision, registry_dir=registry_dir)
    if source.entry:
        opts = source.entry.read_options(opts)
    target_dir = resolve(target, what="target", registry_ids=False).path if target else None
    requirements = source.entry.requirements if source.entry else None
    return ConvertRequest(
        source=source.path, target=target_dir, options=opts, origin=source.origin, requirements=requirements, **choices
    )
