"""The zoo's CI: `registry plan` (entries grouped by hardware class, with the exact verify command
each runs) and `registry record` (a verify report into its entry; `verified` only when it passed the
entry's own floors)."""

from __future__ import annotations

import datetime as dt
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import BadInput, UsageError
from ..fsutil import atomic_write_bytes, atomic_write_text, inside
from .hardware import RUNNERS
from .load import Registry
from .schema import Entry, Floor, Measured

MAX_MODEL_LEN = 8192  # capped by the drafter's own context


@dataclass
class Job:
    entry_id: str
    k: int
    temperature: float
    report: str
    command: list[str]

    @property
    def shell(self) -> str:
        return shlex.join(self.command)


@dataclass
class Plan:
    classes: dict[str, list[Job]] = field(default_factory=dict)  # runner label -> jobs
    unplanned: dict[str, str] = field(default_factory=dict)  # entry id -> why it has no hardware class
    unrunnable: dict[str, str] = field(default_factory=dict)  # entry id -> its class, which no runner has


def plan(reg: Registry, only_runner: str | None = None, registry_arg: str | None = None) -> Plan:
    """`registry_arg`: the --registry the plan was asked with, passed on to every command (else each would
    verify the default registry's entry of the same id)."""
    result = Plan()
    for entry in reg.entries.values():
        if not entry.drafter.repo:
            continue  # the embedded examples run in the test suite
        if entry.hardware is None:
            result.unplanned[entry.id] = f"no hardware class: {entry.null_reasons.get('hardware', 'not given')}"
        elif entry.hardware.runner not in RUNNERS:
            result.unrunnable[entry.id] = (f"hardware class {entry.hardware.runner} has no CI runner "
                                          f"(runners: {', '.join(RUNNERS)})")
        elif only_runner in (None, entry.hardware.runner):
            result.classes.setdefault(entry.hardware.runner, []).extend(jobs_for(entry, registry_arg))
    result.classes = {r: result.classes[r] for r in RUNNERS if r in result.classes}
    return result


def jobs_for(entry: Entry, registry_arg: str | None = None) -> list[Job]:
    """One job per (K, temperature) with floors, once however many floors (conditions included) it has; an entry
    without floors is measured at its engine's K, greedily."""
    k = next((e.num_speculative_tokens for e in entry.engines if e.engine == "vllm"), 3)
    floors = entry.acceptance_floors or [Floor(k=k, temperature=0.0, mean_acceptance_length=1.0, source="")]
    settings = dict.fromkeys((f.k, f.temperature) for f in floors)  # first-seen order
    return [job(entry, k, temperature, registry_arg) for k, temperature in settings]


def job(entry: Entry, k: int, temperature: float, registry_arg: str | None = None) -> Job:
    hw = entry.hardware
    report = f"reports/{entry.id}.k{k}.t{temperature:g}.json"
    cmd = ["eaglezoo", "verify", entry.id, "--engine", "vllm", "--num-spec-tokens", str(k),
           "--temperature", f"{temperature:g}", "--tensor-parallel-size", str(hw.tensor_parallel_size),
           "--pipeline-parallel-size", str(hw.pipeline_parallel_size),
           "--max-model-len", str(min(MAX_MODEL_LEN, entry.max_position_embeddings or MAX_MODEL_LEN))]
    cmd += ["--enable-expert-parallel"] if hw.expert_parallel else []
    cmd += ["--distributed-executor-backend", "ray"] if hw.nodes > 1 else []
    cmd += ["--trust-remote-code"] if entry.target_remote_code else []
    cmd += ["--seed", "0"] if temperature > 0 else []
    cmd += ["--registry", registry_arg] if registry_arg else []
    return Job(entry.id, k, temperature, report, cmd + ["--report", report])


# --------------------------------------------------------------------------------------------
# record


@dataclass
class Recorded:
    entry_id: str
    measured: Measured
    state: str
    why: list[str]


def load_report(path: Path):
    """The report, read strictly (verify/saved.read_report), that a registry entry may record: one that drafted."""
    from ..verify.saved import read_report

    report = read_report(path, "report", needs="registry record")
    if report.num_drafts < 1:
        raise BadInput(f"report {path}: num_drafts is {report.num_drafts}; a run that drafted nothing measured "
                       "nothing, and is never recorded", hint="verify again with prompts long enough for K drafts")
    return report


def record(report_path: Path, reg: Registry) -> Recorded:
    """Everything is computed and checked first (the report, the entry's new YAML text, the kept report's
    name and bytes); only then are the two files written, the YAML last, the kept report restored if it fails."""
    report = load_report(report_path)
    if not report.registry_id:
        raise UsageError(f"{report_path}: the report names no registry entry",
                         hint="verify a registry id, not a folder")
    entry = reg.get(report.registry_id)
    k, temperature = report.num_spec_tokens, float(report.sampling["temperature"])
    _check_same_drafter(entry, report, reg)
    floor = entry.floor_for(k, temperature)
    if entry.acceptance_floors and floor is None:
        have = ", ".join(f"K={f.k} T={f.temperature:g}" for f in entry.acceptance_floors)
        raise UsageError(f"{report_path}: a report at K={k} T={temperature:g}; {entry.id} has floors for {have} only",
                         hint="verify at a K and temperature the entry has floors for (eaglezoo registry show ID)")
    why = list(report.failures) + (below_floor(report, floor) if floor else [])
    passed = None if floor is None else not why
    engine = report.engine["name"]  # one of verify's engine names (the reader refuses any other)
    kept = inside(reg.directory, f"reports/{entry.id}.k{k}.t{temperature:g}.{engine}.json", "the kept report")
    measured = Measured(k=k, temperature=temperature, engine=engine,
                        engine_version=report.engine.get("version"), hardware=_where(report),
                        acceptance_per_position=report.acceptance_per_position,
                        mean_acceptance_length=report.mean_acceptance_length, num_drafts=report.num_drafts,
                        passed=passed, date=dt.datetime.fromisoformat(report.created).date(),
                        eaglezoo_version=report.eaglezoo_version, report=kept.relative_to(reg.root).as_posix())
    state = {True: "verified", False: "failed", None: entry.status.state}[passed]
    path, text = _entry_text(reg, entry, measured, state)
    _write_both(kept, report.model_dump_json(indent=2), path, text)
    return Recorded(entry.id, measured, state, why if floor else ["the entry has no floors at this K and temperature"])


def _write_both(kept: Path, report_text: str, path: Path, text: str) -> None:
    """The kept report, then the entry's YAML; when the YAML cannot be written the kept report is put back."""
    before = kept.read_bytes() if kept.is_file() else None
    kept.parent.mkdir(exist_ok=True)
    atomic_write_text(kept, report_text)
    try:
        atomic_write_text(path, text)
    except BaseException:
        if before is None:
            kept.unlink(missing_ok=True)
        else:
            atomic_write_bytes(kept, before)
        raise


def _check_same_drafter(entry: Entry, report, reg: Registry) -> None:
    if entry.drafter.path and Path(report.drafter).resolve() != reg.path(entry.drafter.path, "drafter.path").resolve():
        raise UsageError(f"the report measured {report.drafter}; {entry.id}'s drafter is {entry.drafter.path}",
                         hint="record a report of this entry's drafter (eaglezoo verify ID --report FILE)")
    pinned = entry.drafter.revision
    if pinned and report.drafter_revision and report.drafter_revision != pinned:
        raise UsageError(f"the report measured {entry.drafter.repo}@{report.drafter_revision}; "
                         f"{entry.id} pins {pinned}", hint="verify the pinned revision, or run registry sync first")


def below_floor(report, floor: Floor) -> list[str]:
    """The entry's own floors, applied here: whatever floors the run was given."""
    why = [f"acceptance at position {i + 1} is {got:.3f} < {want}"
           for i, (got, want) in enumerate(zip(report.acceptance_per_position, floor.per_position or []))
           if got < want]
    if floor.mean_acceptance_length is not None and report.mean_acceptance_length < floor.mean_acceptance_length:
        why.append(f"mean acceptance length {report.mean_acceptance_length:.3f} < {floor.mean_acceptance_length}")
    return why


def _where(report) -> str:
    parallel = report.engine.get("parallel") or {}
    sizes = ", ".join(f"{k.removesuffix('_parallel_size')} {v}" for k, v in parallel.items()
                      if k.endswith("_parallel_size") and v and v > 1)
    return f"{report.device} {report.dtype}" + (f" ({sizes})" if sizes else "")


def _entry_text(reg: Registry, entry: Entry, measured: Measured, state: str) -> tuple[Path, str]:
    """The entry's YAML file and its new text (nothing written)."""
    from .yaml_edit import set_values

    kept = [m for m in entry.measured if (m.k, m.temperature, m.engine) != (measured.k, measured.temperature,
                                                                            measured.engine)]
    changes = {("measured",): [m.model_dump() for m in [*kept, measured]]}
    if state != entry.status.state or measured.passed is not None:
        changes[("status",)] = {"state": state, "date": measured.date,
                                "eaglezoo_version": measured.eaglezoo_version, "report": measured.report}
    path = reg.directory / f"{entry.id}.yaml"
    return path, set_values(path.read_text(encoding="utf-8"), changes, str(path))
