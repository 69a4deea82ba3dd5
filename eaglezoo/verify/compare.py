"""`verify --engine native,vllm`: fidelity as a product feature. Both engines measure the same
workload; the comparison reports every per-position difference, prompt by prompt, and hides none."""

from __future__ import annotations


def compare(ref, other) -> dict:
    """ref, other: VerifyReports of the same workload on two engines."""
    a, b = ref.engine["name"], other.engine["name"]
    steps = {p["index"]: p["accepted"] for p in ref.per_prompt}
    both = [p for p in other.per_prompt if p["index"] in steps]
    differing = [p["index"] for p in both if steps[p["index"]] != p["accepted"]]
    counts_equal = (ref.num_drafts, ref.num_accepted) == (other.num_drafts, other.num_accepted)
    return {
        "reference": a, "engine": b, "dtype": {a: ref.dtype, b: other.dtype},
        "acceptance_per_position": {a: ref.acceptance_per_position, b: other.acceptance_per_position},
        "difference_per_position": [y - x for x, y in zip(ref.acceptance_per_position, other.acceptance_per_position)],
        "mean_acceptance_length": {a: ref.mean_acceptance_length, b: other.mean_acceptance_length},
        "difference_mean_acceptance_length": other.mean_acceptance_length - ref.mean_acceptance_length,
        "num_drafts": {a: ref.num_drafts, b: other.num_drafts},
        "num_accepted": {a: ref.num_accepted, b: other.num_accepted},
        "prompts_compared": len(both), "prompts_identical": len(both) - len(differing),
        "differing_prompts": differing,
        "identical": counts_equal and not differing and len(both) == len(ref.per_prompt)
        and ref.acceptance_per_position == other.acceptance_per_position,
    }
