"""The names eaglezoo gives its engines and dialects, each set defined once, as a Literal (what a model field or a
typed argument accepts) and its tuple (what a loop or a message lists); everything else imports them here. On the
ground floor, beside limits.py: the report models, the registry schema, the readers and the CLI all read them."""

from __future__ import annotations

from typing import Literal, get_args

# The engines that measure a drafter on this machine with a target eaglezoo loads or starts itself, prompt by prompt:
# compare's sides...
CompareEngine = Literal["native", "vllm"]
COMPARE_ENGINES: tuple[CompareEngine, ...] = get_args(CompareEngine)
# ...and verify's `--engine` (llama.cpp's llama-server on a GGUF pair besides)...
RunEngine = Literal[CompareEngine, "llamacpp"]
RUN_ENGINES: tuple[RunEngine, ...] = get_args(RunEngine)
# ...and every engine a verify report says it measured on (`engine.name`; a registry floor's `engine`): `--endpoint`
# measures a server already running.
VerifyEngine = Literal[CompareEngine, "endpoint", "llamacpp"]
VERIFY_ENGINES: tuple[VerifyEngine, ...] = get_args(VerifyEngine)

# The inference servers a drafter is served by (their versions' known bugs: engine_versions.py; the registry's
# serving summary; the model card's commands).
ServerEngine = Literal["vllm", "sglang"]
SERVER_ENGINES: tuple[ServerEngine, ...] = get_args(ServerEngine)
# What serve-config prints a path for: the servers, and llama.cpp's llama-server (a GGUF pair).
ServeEngine = Literal[ServerEngine, "llamacpp"]
SERVE_ENGINES: tuple[ServeEngine, ...] = get_args(ServeEngine)

# The dialects eaglezoo reads (checkpoint/formats, each module's NAME): EAGLE-3's, then those of the families beside
# it (docs/formats.md#families).
Eagle3Dialect = Literal[
    "safeai", "specforge", "speculators", "modelopt", "nemo", "torchspec", "eagle31", "deepspec-eagle3"
]
PeagleDialect = Literal["peagle", "speculators-peagle"]
DflashDialect = Literal["dflash", "speculators-dflash"]
DsparkDialect = Literal["dspark", "speculators-dspark"]
Dialect = Literal[Eagle3Dialect, PeagleDialect, DflashDialect, DsparkDialect]
DIALECTS: tuple[Dialect, ...] = get_args(Dialect)
EAGLE3_DIALECTS: tuple[Eagle3Dialect, ...] = get_args(Eagle3Dialect)
# family -> the dialects its drafters are written in (a family not named here: EAGLE3_DIALECTS)
DIALECTS_OF_FAMILY: dict[str, tuple[Dialect, ...]] = {
    "peagle": get_args(PeagleDialect),
    "dflash": get_args(DflashDialect),
    "dspark": get_args(DsparkDialect),
}

# The families each engine measures (docs/formats.md#families); the others are read, linted and served only.
FAMILIES_MEASURED = {
    "native": ("eagle3", "peagle", "dflash", "dspark"),  # DSpark: the anchor-sampled vanilla form (verify/dspark.py)
    "vllm": ("eagle3", "peagle", "dflash"),
    "llamacpp": ("eagle3", "dflash", "dspark"),  # src/models/eagle3.cpp, dflash.cpp (P-EAGLE: no llama.cpp graph)
    "endpoint": ("eagle3",),
}

# A target's thinking mode, as its chat template's switch (`enable_thinking`) sets it: what a drafter requires...
ThinkingMode = Literal["on", "off"]
# ...and as a figure or a verify report states it: `unknown` where its source does not say, or cannot.
Thinking = Literal[ThinkingMode, "unknown"]
