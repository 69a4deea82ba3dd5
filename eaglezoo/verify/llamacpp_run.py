"""`verify --engine llamacpp`: the drafter converted to GGUF as `eaglezoo convert --to gguf` writes it and the target
as `eaglezoo convert TARGET OUT --to gguf` writes it (unless --target-gguf names one), both fp32 into a temporary
folder; llama-server started with them (llamacpp_engine.py), the workload measured
through the same path as `--endpoint` on a llama-server (llamacpp_endpoint.py), the server stopped."""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

from ..checkpoint.config import target_config
from ..checkpoint.formats.gguf_target import write_target_gguf
from ..convert import ConvertRequest, apply, plan_gguf
from ..errors import EngineError
from .llamacpp_endpoint import llamacpp_props, measure_llamacpp
from .llamacpp_engine import LlamacppOptions, llama_server
from .workload import Measurement, Progress, Workload

EXIT_S = 0.5
GGUF_DTYPE = "float32"  # the native engine's reference precision: a fidelity comparison compares drafters, not casts


def convert_drafter(work: Workload, out: Path) -> tuple[Path, list[str]]:
    """The workload's drafter as llama.cpp reads it, and convert's warnings (each one is a reason llama.cpp may
    accept differently)."""
    drafter = work.drafter
    req = ConvertRequest(
        source=Path(drafter.path), to="gguf", target=work.target_dir, options=drafter.options, dtype=GGUF_DTYPE
    )
    prepared = plan_gguf(drafter, req, target_config(work.target_dir))
    apply(prepared, out)
    return out / "drafter.gguf", [f"convert --to gguf: {w}" for w in prepared.plan.warnings]


def gguf_pair(work: Workload, options: LlamacppOptions, tmp: Path, progress: Progress) -> tuple[Path, Path, list[str]]:
    """The target's GGUF (--target-gguf, else written by eaglezoo into `tmp`), the drafter's, and convert's warnings:
    what every llama-server eaglezoo starts serves (verify and tune)."""
    progress(0, None, phase="converting the drafter to GGUF")
    drafter_gguf, warnings = convert_drafter(work, tmp / "drafter")
    target_gguf = options.target_gguf
    if target_gguf is None:
        progress(0, None, phase="converting the target to GGUF")
        target_gguf = write_target_gguf(work.target_dir, tmp / "target", GGUF_DTYPE).gguf
    return target_gguf, drafter_gguf, warnings


@contextlib.contextmanager
def llamacpp_session(
    work: Workload, options: LlamacppOptions, progress: Progress
) -> Iterator[Callable[..., Measurement]]:
    """measure(work, speedup, progress) on one llama-server, started once for every workload given."""
    with tempfile.TemporaryDirectory(prefix="eaglezoo-llamacpp-") as tmp:
        target_gguf, drafter_gguf, warnings = gguf_pair(work, options, Path(tmp), progress)
        progress(0, None, phase="starting llama-server")
        family = work.drafter.spec.family
        # its one slot holds the workload's context (--max-model-len bounds it) and the K + 1 tokens asked past N
        server_options = replace(options.server, ctx=work.context + work.k + 2)
        with llama_server(target_gguf, drafter_gguf, family, work.k, server_options) as server:
            props = llamacpp_props(server.url) or {}

            def measure(sub: Workload, _speedup: object, shown: Progress) -> Measurement:
                try:
                    m = measure_llamacpp(sub, server.url, props, shown, started=True)
                except EngineError as exc:
                    time.sleep(EXIT_S)  # a request cut by the server's exit comes back before it is reaped
                    raise server.died(exc) from None
                return replace(m, notes=m.notes + warnings)

            yield measure
