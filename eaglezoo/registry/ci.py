"""The zoo's CI: `registry plan` (entries grouped by hardware class, with the exact verify command
each runs; an entry whose class is not known yet waits on the sync that computes it) and `registry record`
(a verify report of the entry's own drafter and target into that entry; `verified` only when it passed the
entry's own floors)."""

from __future__ import annotations

import datetime as dt
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import BadInput, EaglezooError, UsageError
from ..fsutil import atomic_write_bytes, atomic_write_text, inside
from ..hub.card_figures import CardComparison
from ..names import FAMILIES_MEASURED
from ..verify.saved import read_report
from .conditions import UNKNOWN, Conditions, Figure, parsed_version
from .hardware import RUNNERS, sized_hardware
from .listing import beside_run, target_name
from .llamacpp import has_llamacpp_job
from .load import Registry
from .schema import Entry, Floor, Hardware, Measured, Repo
from .yaml_edit import set_values

MAX_MODEL_LEN = 8192  # capped by the drafter's own context
WAITING = "waiting-on-sync"  # the plan's class of entries whose hardware class `registry sync ID --write` computes


@dataclass
class Job:
    entry_id: str
    k: int
    temperature: float
    report: str
    command: list[str]
    after: list[str] | None = None  # the command this job waits on (a waiting-on-sync job: the sync)

    @property
    def shell(self) -> str:
        return shlex.join(self.command)


@dataclass
class Plan:
    classes: dict[str, list[Job]] = field(default_factory=dict)  # runner label -> jobs; WAITING last
    waiting: dict[str, str] = field(default_factory=dict)  # entry id -> why its class waits on a sync
    estimated: dict[str, str] = field(default_factory=dict)  # entry id -> the class the plan computed, and from what
    unrunnable: dict[str, str] = field(default_factory=dict)  # entry id -> its class, which no runner has
    unverifiable: dict[str, str] = field(default_factory=dict)  # entry id -> why verify cannot run it (its family)

    @property
    def runners(self) -> list[str]:
        """The runner labels that have jobs (the workflow's matrix): every class but WAITING."""
        return [r for r in self.classes if r != WAITING]


def sync_command(entry: Entry, registry_arg: str | None = None) -> list[str]:
    """What records the target's weight bytes and config, and with them the entry's hardware class."""
    where = ["--registry", registry_arg] if registry_arg else []
    return ["eaglezoo", "registry", "sync", entry.id, "--write", *where]


def plan(reg: Registry, only_runner: str | None = None, registry_arg: str | None = None) -> Plan:
    """Every published entry gets its jobs: in its runner class (the entry's, else the rule's over a size the entry
    states with evidence), else in WAITING behind the sync that records the target's size. `registry_arg`: the
    --registry the plan was asked with, passed on to every command (else each would use the default registry's
    entry of the same id)."""
    result = Plan()
    for entry in reg.entries.values():
        if not entry.drafter.repo:
            continue  # the embedded examples run in the test suite
        _place(result, entry, only_runner, registry_arg)
    result.classes = {r: result.classes[r] for r in (*RUNNERS, WAITING) if r in result.classes}
    return result


def _place(result: Plan, entry: Entry, only_runner: str | None, registry_arg: str | None) -> None:
    """One published, verifiable entry's jobs into `result`: in its runner class, in WAITING, or refused."""
    if engine_of(entry) is None:
        result.unverifiable[entry.id] = unverifiable_why(entry)
        return
    hardware, why = entry.hardware, None
    if hardware is None:
        sized = sized_hardware(entry)
        if sized is None:
            if only_runner is None:
                result.waiting[entry.id] = entry.null_reasons.get("hardware", "no hardware class given")
                after = sync_command(entry, registry_arg)
                result.classes.setdefault(WAITING, []).extend(
                    Job(j.entry_id, j.k, j.temperature, j.report, j.command, after)
                    for j in jobs_for(entry, registry_arg)
                )
            return
        hardware, why = sized
        if hardware is not None:
            result.estimated[entry.id] = f"{hardware.runner}: {hardware.source}"
    if hardware is None:
        result.unrunnable[entry.id] = f"no runner class holds its target: {why}"
    elif hardware.runner not in RUNNERS:
        result.unrunnable[entry.id] = (
            f"hardware class {hardware.runner} has no CI runner (runners: {', '.join(RUNNERS)})"
        )
    elif only_runner in (None, hardware.runner):
        result.classes.setdefault(hardware.runner, []).extend(jobs_for(entry, registry_arg, hardware))


# The engines a verify job runs on, in this order: the first that measures the entry's family (vLLM: EAGLE-3,
# P-EAGLE, DFlash; llama.cpp: EAGLE-3, DFlash and DSpark, names.FAMILIES_MEASURED). DSpark, which vLLM's
# verify does not run, is verified on llama.cpp: `verify ID --engine llamacpp` downloads the drafter and target,
# converts both to GGUF (convert --to gguf reads the block, mask token and Markov head from the drafter's own files)
# and serves them with `--spec-type draft-dspark`. A family no engine measures has no job: the plan says why.
JOB_ENGINES = ("vllm", "llamacpp")


def engine_of(entry: Entry) -> str | None:
    return next((e for e in JOB_ENGINES if entry.family in FAMILIES_MEASURED[e]), None)


def unverifiable_why(entry: Entry) -> str:
    return (
        f"verify measures {entry.family} drafters on no engine yet (verify --engine llamacpp measures "
        f"{' and '.join(FAMILIES_MEASURED['llamacpp'])}; vLLM {' and '.join(FAMILIES_MEASURED['vllm'])}): "
        f"eaglezoo lint, convert and serve-config read it"
    )


def jobs_for(entry: Entry, registry_arg: str | None = None, hardware: Hardware | None = None) -> list[Job]:
    """One job per (K, temperature) with floors, once however many floors (conditions included) it has; an entry
    without floors is measured at its engine's K, greedily. Where the entry serves on llama.cpp
    (`engines: llamacpp`, registry/llamacpp.py) and vLLM measures it, a greedy llama.cpp job at the first K too.
    `hardware`: the class it runs on (None: not known yet, so no parallel options: the sync's class gives them)."""
    engine = engine_of(entry)
    if engine is None:
        return []
    k = next((e.num_speculative_tokens for e in entry.engines if e.engine == "vllm"), 3)
    floors = entry.acceptance_floors or [Floor(k=k, temperature=0.0, mean_acceptance_length=1.0, source="")]
    settings = dict.fromkeys((f.k, f.temperature) for f in floors)  # first-seen order
    jobs = [job(entry, k, temperature, registry_arg, hardware, engine) for k, temperature in settings]
    if engine != "llamacpp" and has_llamacpp_job(entry):
        jobs.append(job(entry, next(iter(settings))[0], 0.0, registry_arg, hardware, "llamacpp"))
    return jobs


def job(  # noqa: PLR0913 - the job's settings, each named
    entry: Entry,
    k: int,
    temperature: float,
    registry_arg: str | None = None,
    hardware: Hardware | None = None,
    engine: str = "vllm",
) -> Job:
    hw = hardware or entry.hardware
    report = f"reports/{entry.id}.k{k}.t{temperature:g}{'' if engine == 'vllm' else '.' + engine}.json"
    cmd = ["eaglezoo", "verify", entry.id, "--engine", engine, "--num-spec-tokens", str(k)]
    cmd += ["--temperature", f"{temperature:g}"]
    context = ["--max-model-len", str(min(MAX_MODEL_LEN, entry.max_position_embeddings or MAX_MODEL_LEN))]
    if engine != "vllm":  # vLLM's options (parallel sizes, remote code) are not another engine's; the context is
        # (llama-server's -c, verify/llamacpp_run.py): else it is the target's own, past the hardware rule's KV term
        cmd += context + (["--seed", "0"] if temperature > 0 else [])
        cmd += ["--registry", registry_arg] if registry_arg else []
        return Job(entry.id, k, temperature, report, cmd + ["--report", report])
    if hw is not None:
        cmd += [
            "--tensor-parallel-size",
            str(hw.tensor_parallel_size),
            "--pipeline-parallel-size",
            str(hw.pipeline_parallel_size),
        ]
    cmd += context
    cmd += ["--enable-expert-parallel"] if hw is not None and hw.expert_parallel else []
    cmd += ["--distributed-executor-backend", "ray"] if hw is not None and hw.nodes > 1 else []
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

    report = read_report(path, "report", needs="registry record")
    if report.num_drafts < 1:
        raise BadInput(
            f"report {path}: num_drafts is {report.num_drafts}; a run that drafted nothing measured "
            "nothing, and is never recorded",
            hint="verify again with prompts long enough for K drafts",
        )
    return report


@dataclass(frozen=True)
class Evidence:
    """What one verify report proves about one entry: the measured row and the status `registry record` writes
    from it, and why it did not pass (empty when it did)."""

    measured: Measured
    state: str
    why: list[str]


def evidence(report, report_path: Path, entry: Entry, reg: Registry) -> Evidence:
    """The row and status a report gives its entry, or one UsageError / BadInput when it may not be recorded
    there (another entry's, another drafter or target, a K and temperature without floors, floors compared not
    gated). The one rule: `registry record` writes what it returns, and `registry check` (so `registry update`
    too) refuses a row or a status that is not what it returns for the report the row names."""
    if report.registry_id != entry.id:
        named = f"entry {report.registry_id}" if report.registry_id else "no registry entry"
        raise UsageError(
            f"{report_path}: the report names {named}, not {entry.id}", hint="verify a registry id, not a folder"
        )
    k, temperature = report.num_spec_tokens, float(report.sampling.temperature)
    _check_same_pair(entry, report, reg)
    floor = entry.floor_for(k, temperature)
    if entry.acceptance_floors and floor is None:
        have = ", ".join(f"K={f.k} T={f.temperature:g}" for f in entry.acceptance_floors)
        raise UsageError(
            f"{report_path}: a report at K={k} T={temperature:g}; {entry.id} has floors for {have} only",
            hint="verify at a K and temperature the entry has floors for (eaglezoo registry show ID)",
        )
    if floor is not None and report.gate.entry_floors == "compared":
        reasons = "; ".join(report.gate.why_compared) or "another prompt set"
        raise UsageError(
            f"{report_path}: the entry's floors were compared with this run, not gated by it ({reasons})",
            hint=f"record a run on the prompts the floors were measured on: eaglezoo verify {entry.id} "
            "(no --prompts, --suite or --max-prompts)",
        )
    why = list(report.failures) + (below_floor(report, floor) if floor else [])
    passed = None if floor is None else not why
    engine = report.engine.name  # one of verify's engine names (the reader refuses any other)
    kept = inside(reg.directory, f"reports/{entry.id}.k{k}.t{temperature:g}.{engine}.json", "the kept report")
    measured = Measured(
        k=k,
        temperature=temperature,
        engine=engine,
        engine_version=report.engine.version,
        hardware=_where(report),
        acceptance_per_position=report.acceptance_per_position,
        mean_acceptance_length=report.mean_acceptance_length,
        num_drafts=report.num_drafts,
        passed=passed,
        date=dt.datetime.fromisoformat(report.created).date(),
        eaglezoo_version=report.eaglezoo_version,
        report=kept.relative_to(reg.root).as_posix(),
        conditions=measured_conditions(report, kept.relative_to(reg.root).as_posix(), entry),
    )
    state = {True: "verified", False: "failed", None: entry.status.state}[passed]
    return Evidence(measured, state, why if floor else ["the entry has no floors at this K and temperature"])


def record(report_path: Path, reg: Registry) -> Recorded:
    """Everything is computed and checked first (the report, the entry's new YAML text, the kept report's
    name and bytes); only then are the two files written, the YAML last, the kept report restored if it fails."""
    report = load_report(report_path)
    if not report.registry_id:
        raise UsageError(
            f"{report_path}: the report names no registry entry", hint="verify a registry id, not a folder"
        )
    entry = reg.get(report.registry_id)
    found = evidence(report, report_path, entry, reg)
    kept = reg.root / found.measured.report
    path, text = _entry_text(reg, entry, found.measured, found.state)
    _write_both(kept, report.model_dump_json(indent=2), path, text)
    return Recorded(entry.id, found.measured, found.state, found.why)


def recorded_problems(entry: Entry, reg: Registry) -> list[str]:
    """Each measured row is the row `registry record` writes from the report it names (`evidence`), and a status
    other than unverified is the one its report gave: nothing verified or measured that no report measured.
    A row whose report is missing or outside the copy is left to the path checks, which name it."""
    problems, rows = [], {}
    for i, row in enumerate(entry.measured):
        try:
            path = reg.path(row.report, f"measured.{i}.report")
            if not path.is_file():
                continue
            found = evidence(load_report(path), Path(row.report), entry, reg)
        except EaglezooError as exc:
            problems.append(f"measured.{i}: {exc.message}")
            continue
        differs = [name for name in Measured.model_fields if getattr(row, name) != getattr(found.measured, name)]
        if differs:
            problems.append(
                f"measured.{i}: {', '.join(differs)} not what its report {row.report} measured "
                f"(registry record writes the row from the report)"
            )
        else:
            rows[row.report] = row
    keys = [(m.k, m.temperature, m.engine) for m in entry.measured]
    if len(set(keys)) != len(keys):
        problems.append("measured: two rows for the same K, temperature and engine (registry record replaces the row)")
    return problems + _status_problems(entry, rows)


def _status_problems(entry: Entry, rows: dict[str, Measured]) -> list[str]:
    """`registry record` sets the status from the row it writes: verified when it passed, failed when not."""
    status = entry.status
    row = rows.get(status.report or "")
    if status.state == "unverified":
        return []
    if row is None:
        why = f"status.report {status.report} is not the report of a measured row its report confirms"
    elif {True: "verified", False: "failed"}.get(row.passed) != status.state:
        why = f"its measured row has passed: {'null' if row.passed is None else str(row.passed).lower()}"
    elif (status.date, status.eaglezoo_version) != (row.date, row.eaglezoo_version):
        why = "its date and eaglezoo_version are not those of its measured row"
    else:
        return []
    return [f"status {status.state}: {why} (registry record writes both)"]


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


MEASURE_AGAIN = "verify the entry itself (eaglezoo verify ID --report FILE, without --target or --revision)"


def _check_same_pair(entry: Entry, report, reg: Registry) -> None:
    """The report measured this entry's drafter and target, at the revisions the entry pins: a pinned revision
    the report does not state is not measured. Else one UsageError naming what differs."""
    drafter = _measured(report.drafter, entry.drafter, reg)
    if drafter is None:
        raise UsageError(
            f"the report measured drafter {report.drafter}; {entry.id}'s drafter is "
            f"{entry.drafter.path or entry.drafter.repo}",
            hint=MEASURE_AGAIN,
        )
    folder_sha = drafter[1]
    if folder_sha and report.drafter_revision and folder_sha != report.drafter_revision:
        raise UsageError(
            f"the report measured drafter {entry.drafter.repo} from its folder at {folder_sha}, but "
            f"states drafter_revision {report.drafter_revision}",
            hint=MEASURE_AGAIN,
        )
    _check_revision(entry, "drafter", entry.drafter, report.drafter_revision)
    if _measured(report.target, entry.target, reg) is None:
        want = (
            f"{entry.target.package.pypi} ({entry.target.package.gguf})"
            if entry.target.package
            else entry.target.path or entry.target.repo
        )
        raise UsageError(
            f"the report measured target {report.target}; {entry.id}'s target is {want}", hint=MEASURE_AGAIN
        )
    # verify states the target's revision as target_revision (None in a report written before it did)
    _check_revision(entry, "target", entry.target, getattr(report, "target_revision", None))


def _check_revision(entry: Entry, role: str, repo: Repo, measured: str | None) -> None:
    pinned = repo.revision if repo.repo and not (repo.path or repo.package) else None  # what verify pulls
    if pinned and measured != pinned:
        at = f"@{measured}" if measured else " at no stated revision"
        raise UsageError(
            f"the report measured {role} {repo.repo}{at}; {entry.id} pins {role} {repo.repo}@{pinned}",
            hint="verify the pinned revision (eaglezoo verify ID --report FILE), or registry sync first",
        )


def _measured(reported: str, repo: Repo, reg: Registry) -> tuple[str, str | None] | None:
    """(what the report names, the commit its folder names) when it names this drafter or target, as verify
    writes it: the entry's folder (another checkout's included: CI verifies on one machine and records on
    another), the folder a packaged target is converted to, or the Hub repo: its id, or its snapshot in the Hub
    cache (.../models--OWNER--NAME/snapshots/SHA). None when it names another."""
    if repo.package:  # verify reads the package's GGUF, converted once to CACHE/targets/NAME-VERSION/STEM
        name, _, version = repo.package.pypi.partition("==")
        return (reported, None) if _ends_with(reported, (f"{name}-{version}", Path(repo.package.gguf).stem)) else None
    if repo.path:
        mine = reg.path(repo.path, "path").resolve()  # inside the registry's root (reg.path refuses other paths)
        same = Path(reported).resolve() == mine or _ends_with(reported, mine.relative_to(reg.root.resolve()).parts)
        return (reported, None) if same else None
    if reported == repo.repo:
        return reported, None
    snapshot = HUB_SNAPSHOT.search(reported.replace("\\", "/"))
    if snapshot and f"{snapshot['owner']}/{snapshot['name']}" == repo.repo:
        return repo.repo, snapshot["sha"]
    return None


# the Hub cache's folder of repo OWNER/NAME at a commit (a repo id holds no "--", so the first one splits it)
HUB_SNAPSHOT = re.compile(r"(^|/)models--(?P<owner>[^/]+?)--(?P<name>[^/]+)/snapshots/(?P<sha>[0-9a-f]{40})/?$")


def _ends_with(reported: str, parts: tuple[str, ...]) -> bool:
    have = Path(reported).parts
    return bool(parts) and have[-len(parts) :] == tuple(parts)


def below_floor(report, floor: Floor) -> list[str]:
    """The entry's own floors, applied here: whatever floors the run was given."""
    why = [
        f"acceptance at position {i + 1} is {got:.3f} < {want}"
        for i, (got, want) in enumerate(zip(report.acceptance_per_position, floor.per_position or [], strict=False))
        if got < want
    ]
    if floor.mean_acceptance_length is not None and report.mean_acceptance_length < floor.mean_acceptance_length:
        why.append(f"mean acceptance length {report.mean_acceptance_length:.3f} < {floor.mean_acceptance_length}")
    return why


CHAT_NOTE = re.compile(
    r"^(?P<n>\d+) chat prompt\(s\) (?P<how>in the target's chat template|as raw text)"
)  # prompting.py
TOP_P = {"vllm": 1.0}  # vLLM's SamplingParams default (vllm/sampling_params.py:312), which verify leaves as it is


def beside_registry(report, entries: dict[str, Entry]) -> CardComparison | None:
    """A verify report's acceptance length as `registry record` would write it (the same conditions), beside the
    figures of its entry's target (listing.beside_run): what the model card shows. None where the report names no
    entry of this registry: a folder verified has no target entry to stand beside."""
    entry = entries.get(report.registry_id or "")
    if entry is None:
        return None
    conditions = measured_conditions(report, "this run (eaglezoo verify)", entry)
    run = Figure(entry.id, "acceptance_length", "with-bonus", report.mean_acceptance_length, conditions, "measured")
    return beside_run(run, [e for e in entries.values() if target_name(e) == target_name(entry)])


def measured_conditions(report, source: str, entry: Entry) -> Conditions:
    """What a verify report was measured under, in a reported figure's shape: each condition the report states,
    `unknown` where it does not (the endpoint's server sampling defaults; the thinking mode of raw prompts, of a
    template without a switch, or of a report written before verify kept it). The native engine is eaglezoo's own
    code, so its version is eaglezoo's. verify drafts a chain of K tokens."""
    engine = report.engine.name
    version = report.eaglezoo_version if engine == "native" else report.engine.version
    temperature = float(report.sampling.temperature)
    return Conditions(
        k=report.num_spec_tokens,
        k_spelling=UNKNOWN,
        drafting="chain",
        temperature=temperature,
        top_p=TOP_P.get(engine, UNKNOWN),
        dataset=_dataset(report.prompt_set, entry) if report.prompt_set else UNKNOWN,
        dataset_size=report.num_prompts,
        max_new_tokens=report.max_new_tokens,
        engine=engine,
        engine_version=version if version and _is_version(version) else UNKNOWN,
        thinking=report.thinking or UNKNOWN,
        prompt_format=_prompt_format(report),
        source=source,
    )


def _dataset(prompt_set, entry: Entry) -> str:
    """The prompt set by name: `default`, `suite:NAME`, the entry's own `prompts` where the report's path ends in it
    (verify may have run in another checkout), else the file's name alone (a path on the machine that ran verify says
    nothing to another). From the report's words only, so that `registry check` reads the same in every copy."""
    name = prompt_set.name.replace("\\", "/")
    if name == "default" or name.startswith("suite:"):
        return name
    own = entry.prompts
    if own and (name == own or name.endswith("/" + own)):
        return own
    return name.rsplit("/", 1)[-1]


def _is_version(text: str) -> bool:
    try:
        parsed_version(text, "engine version")
    except ValueError:
        return False
    return True


def _prompt_format(report) -> str:
    """chat where verify's note says every prompt taken went through the chat template, raw where no prompt was
    a chat one (no note) or the target had no template for them; unknown for a mixed set."""
    taken = report.num_prompts + len(report.skipped_prompts)
    notes = [m for m in (CHAT_NOTE.match(n) for n in report.notes) if m]
    if not notes:
        return "raw"
    chats, how = int(notes[0]["n"]), notes[0]["how"]
    if how == "as raw text":
        return "raw"
    return "chat" if chats == taken else UNKNOWN


def _where(report) -> str:
    parallel = report.engine.parallel.model_dump() if report.engine.parallel else {}
    sizes = ", ".join(
        f"{k.removesuffix('_parallel_size')} {v}"
        for k, v in parallel.items()
        if k.endswith("_parallel_size") and v and v > 1
    )
    return f"{report.device} {report.dtype}" + (f" ({sizes})" if sizes else "")


def _entry_text(reg: Registry, entry: Entry, measured: Measured, state: str) -> tuple[Path, str]:
    """The entry's YAML file and its new text (nothing written)."""

    kept = [
        m
        for m in entry.measured
        if (m.k, m.temperature, m.engine) != (measured.k, measured.temperature, measured.engine)
    ]
    changes = {("measured",): [m.model_dump() for m in [*kept, measured]]}
    if state != entry.status.state or measured.passed is not None:
        changes[("status",)] = {
            "state": state,
            "date": measured.date,
            "eaglezoo_version": measured.eaglezoo_version,
            "report": measured.report,
        }
    path = reg.directory / f"{entry.id}.yaml"
    return path, set_values(path.read_text(encoding="utf-8"), changes, str(path))
