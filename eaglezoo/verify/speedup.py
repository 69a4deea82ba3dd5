"""`verify --speedup`: what users pay for. The same prompts on the same engine configuration, with
and without the drafter (warm-up excluded, prefix caching off), at each concurrency level."""

from __future__ import annotations

from statistics import mean, median


def speedup_report(with_drafter: dict, without: dict, temperature: float) -> dict:
    levels = []
    for spec, base in zip(with_drafter["passes"], without["passes"]):
        a, b = pass_timing(spec), pass_timing(base)
        levels.append({"concurrency": spec["concurrency"], "with_drafter": a, "without_drafter": b,
                       "speedup": a["output_tokens_per_s"] / b["output_tokens_per_s"]})
    pairs = list(zip(with_drafter["passes"][0]["requests"], without["passes"][0]["requests"]))
    identical = sum(x["tokens"] == y["tokens"] for x, y in pairs) / len(pairs)
    return {"levels": levels,
            # at T > 0 the two runs sample differently by design; equality is a greedy-only check
            "identical_outputs": identical if temperature == 0 else None,
            "engine_start_s": {"with_drafter": with_drafter["engine"]["start_s"],
                               "without_drafter": without["engine"]["start_s"]}}


def pass_timing(p: dict) -> dict:
    reqs = p["requests"]
    tokens = sum(len(r["tokens"]) for r in reqs)
    # time per output token after the first, as `vllm bench serve` reports TPOT
    tpot = [(r["e2e_s"] - r["ttft_s"]) / (len(r["tokens"]) - 1) for r in reqs
            if r["ttft_s"] is not None and len(r["tokens"]) > 1]
    e2e = [r["e2e_s"] for r in reqs]
    return {"output_tokens": tokens, "wall_s": p["wall_s"], "output_tokens_per_s": tokens / p["wall_s"],
            "mean_tpot_ms": 1000 * mean(tpot) if tpot else None, "mean_e2e_s": mean(e2e), "median_e2e_s": median(e2e)}
