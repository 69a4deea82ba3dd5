"""How the suite's tests reach pytest-xdist's workers under `--dist loadfile` (scripts/test.sh, the fast tier's
command): whole modules, in collection order: the slow tiers' longest first, then the rest of them, then the fast tier,
so that short tests fill the workers' last minutes instead of one long module running alone at the end.

Two things xdist 3.8 does not do by itself here. It reorders the modules by how many tests each holds, largest first
(its `--loadscope-reorder`, on by default), which put the long engine modules of one to three tests last whatever
the collection order was; `scheduler` keeps the collection order. And a module goes to one worker whole, so the
shared fixtures (a conversion, an engine start, a local Hub) are built once; but in SPLIT, modules whose tests each
start an engine of their own, each test function is a unit of its own (parametrized cases stay together, and so do
the tests named to share a costly module fixture), so both workers can run the module. (`--dist loadgroup` with
`xdist_group` marks would say the same, but xdist 3.8 sets the group through `item._nodeid`, which pytest 9.2's
nodeid no longer reads: its groups are ignored.)"""

from __future__ import annotations

from pathlib import Path

import pytest

# The longest modules first (measured, docs/notes/test-suite.md), by module name, every tier: the engine, Hub,
# end-to-end and docs tiers' longest, then the fast tier's (tests/unit, tests/cli) own longest.
LONGEST_FIRST = (
    "test_readme",
    "test_doctor",
    "test_doctor_families",
    "test_verify_vllm",
    "test_tune",
    "test_tune_default",
    "test_native_batching",
    "test_smollm2_pair",
    "test_prompt_suites",
    "test_vllm_serves_converted",
    "test_example_pair",
    "test_vllm_refusals",
    "test_verify_endpoint",
    "test_verify_llamacpp",
    "test_doctor_llamacpp",
    "test_convert_gguf_vs_llamacpp",
    "test_doctor_hostile_server",
    "test_registry_update",
    "test_vllm_accepts_printed",
    "test_push_pull",
    "test_misbehaving_hub",
    "test_compare_engines",
    "test_pages_in_browser",
    "test_publish_safety",
    "test_registry_sync",
    "test_hub_inputs",
    "test_verify_native_targets",
    "test_safetensors_fuzz",
    "test_registry_record_pinned",
    "test_wheel",
    "test_output_contract",
    "test_report_size",
    "test_report_hostile_text",
    "test_compare",
    "test_input_files",
)
TESTS = Path(__file__).resolve().parent.parent
# The tiers whose modules, named above or not, go before the fast tier's (tests/unit, tests/cli).
SLOW_TIERS = ("engine", "e2e", "docs", "hub", "pages", "real")
# Modules whose tests start their own engines, split by test function; each names the tests that share one costly
# module fixture and so stay in one unit (built once); a fixture only one test uses is built once wherever that test
# runs. A test not named that shares one builds it again on the other worker: a cost, not a failure. Cheap module
# fixtures (one conversion) may be built on both workers.
# CHEAP_SHARED: the module fixtures of those modules that may be built on both workers.
CHEAP_SHARED = ("drafter",)
SPLIT: dict[str, tuple[str, ...]] = {
    "test_doctor": (),
    "test_doctor_families": (),  # each server fixture serves one test
    "test_vllm_refusals": (),
    "test_prompt_suites": (),
    "test_verify_vllm": (  # `compared`: one native and vLLM verify
        "test_vllm_equals_native_in_fp32_prompt_by_prompt",
        "test_the_engines_acceptance_by_k_is_an_estimate_close_to_the_exact_table",
        "test_engine_report_has_the_native_schema_and_an_engine_block",
        "test_prompts_over_max_model_len_are_skipped_and_reported",
    ),
    "test_verify_endpoint": (  # `server`: one vLLM server
        "test_endpoint_equals_native_prompt_by_prompt",
        "test_endpoint_serving_another_drafter_is_refused",
        "test_endpoint_with_another_depth_is_refused",
        "test_endpoint_serving_another_target_is_refused",
        "test_a_sampled_row_leaves_the_greedy_rows_as_they_are",
    ),
}


def rank(path: Path) -> tuple[int, int]:
    """The slow tiers first, then the fast tier; in each, the modules named in LONGEST_FIRST in its order first."""
    named = {name: n for n, name in enumerate(LONGEST_FIRST)}
    tier = path.relative_to(TESTS).parts[0] if path.is_relative_to(TESTS) else ""
    return (0 if tier in SLOW_TIERS else 1, named.get(path.stem, len(named)))


def order(items: list[pytest.Item]) -> None:
    """Sorts in place; stable, so a module's tests keep their order."""
    items.sort(key=lambda item: rank(Path(item.path)))


def unit(nodeid: str) -> str:
    """The unit of work a test's node id belongs to: its module, or in SPLIT its test function."""
    module, _, rest = nodeid.partition("::")
    together = SPLIT.get(Path(module).stem)
    if together is None:
        return module
    function = rest.split("[")[0]
    return f"{module}::{'(shared)' if function in together else function}"


def scheduler(config: pytest.Config, log: object) -> object:
    """xdist's loadfile scheduling, by `unit`, in collection order."""
    from xdist.scheduler import LoadScopeScheduling  # noqa: PLC0415 - only the xdist controller needs it

    class ByUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit(nodeid)

    config.option.loadscopereorder = False
    return ByUnit(config, log)
