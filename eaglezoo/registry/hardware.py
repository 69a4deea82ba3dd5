"""The hardware class a target needs for verification on vLLM: one documented rule over the target's
weight bytes and config (docs/registry.md, "Hardware rule").

Per GPU vLLM may use 90 % of the memory (its default `gpu_memory_utilization`); that must hold the
weights split over the GPUs, the KV cache of the verify workload split over the GPUs, and a fixed
4 GiB for activations, CUDA graphs and the drafter. The first layout in `LAYOUTS` that fits wins.
"""

from __future__ import annotations

from ..checkpoint.st_header import ST_DTYPES
from .schema import Hardware

GiB = 1024**3
UTILISATION = 0.9
OVERHEAD = 4 * GiB
KV_TOKENS = 8 * 8192  # verify's heaviest default workload: 8 sequences in flight at --max-model-len 8192
# (GPU memory GB, GPUs per node, nodes), smallest first: the runner classes CI has.
LAYOUTS = ((80, 1, 1), (80, 2, 1), (80, 4, 1), (80, 8, 1), (141, 8, 1), (141, 8, 2))
RUNNERS = tuple(
    Hardware(gpu_memory_gb=m, gpus_per_node=g, nodes=n, tensor_parallel_size=g * n, source="").runner
    for m, g, n in LAYOUTS
)  # the self-hosted runner labels: one per layout
EXPERT_KEYS = ("num_experts", "n_routed_experts", "num_local_experts")
# `int4`: a checkpoint a card calls native INT4 (Kimi K2.5-K2.7: compressed-tensors pack-quantized, group 32): half a
# byte a weight plus one 16-bit scale per group of 32 weights = 0.5625 bytes (4.5 bits) a parameter, over every
# parameter (the layers such a checkpoint keeps in bf16 are not separated: no card states the split)
INT4_GROUP = 32
# target_dtype -> bytes per weight: as sync names it (the safetensors dtype), `fp8` where a model card says the
# checkpoint is FP8 without its exact format (every FP8 format is one byte), `int4` as above
DTYPE_BYTES = {name: bits / 8 for name, bits in ST_DTYPES.values()} | {"fp8": 1.0, "int4": 0.5 + 2 / INT4_GROUP}
WIDTH_RULE = {"int4": f"0.5 byte a weight + a 2-byte scale per {INT4_GROUP} weights"}


def kv_bytes_per_token(cfg: dict) -> int:
    """K and V for one token over every layer, in 16-bit: MLA caches one latent per layer instead."""
    layers = int(cfg.get("num_hidden_layers") or 0)
    if cfg.get("kv_lora_rank"):
        return layers * (int(cfg["kv_lora_rank"]) + int(cfg.get("qk_rope_head_dim") or 0)) * 2
    heads = int(cfg.get("num_attention_heads") or 0)
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or (int(cfg.get("hidden_size") or 0) // max(heads, 1)))
    return 2 * layers * kv_heads * head_dim * 2


def quantization(cfg: dict) -> str | None:
    q = cfg.get("quantization_config")
    if not isinstance(q, dict):
        return None
    method = str(q.get("quant_method") or "unknown")
    algo = q.get("quant_algo")
    return f"{method}-{algo}".lower() if algo else method.lower()


def is_moe(cfg: dict) -> bool:
    return any(isinstance(cfg.get(k), int) and cfg[k] > 1 for k in EXPERT_KEYS)


def plan_hardware(weight_bytes: int, cfg: dict, source: str) -> tuple[Hardware | None, str | None]:
    """The smallest layout that holds the target, or None and why."""
    kv = kv_bytes_per_token(cfg) * KV_TOKENS
    for memory_gb, per_node, nodes in LAYOUTS:
        gpus = per_node * nodes
        need = (weight_bytes + kv) / gpus + OVERHEAD
        if need <= UTILISATION * memory_gb * 1e9:
            tp, pp = parallel_sizes(gpus, cfg)
            return Hardware(
                gpu_memory_gb=memory_gb,
                gpus_per_node=per_node,
                nodes=nodes,
                tensor_parallel_size=tp,
                pipeline_parallel_size=pp,
                expert_parallel=is_moe(cfg) and gpus > 1,
                quantization=quantization(cfg),
                source=source,
            ), None
    biggest = LAYOUTS[-1]
    return None, (
        f"{weight_bytes / 1e9:.0f} GB of weights do not fit {biggest[2]}x{biggest[1]}x{biggest[0]} GB "
        "GPUs, the largest runner class"
    )


def sized_hardware(entry) -> tuple[Hardware | None, str | None] | None:
    """The class DERIVED by the rule from a size the entry states with its evidence: the target's weight bytes, else
    its parameter count times its dtype's bytes per weight (2 when none is stated), plus the KV cache of the verify
    workload where the entry states the target's layers and hidden size (an upper bound: every head cached, as the
    entry states no KV-head count), labelled `derived:` with the arithmetic. None when it states no size."""
    if entry.target_weight_bytes:
        nbytes, fact = entry.target_weight_bytes, "target_weight_bytes"
        how = f"{nbytes / 1e9:.0f} GB of weights"
    elif entry.target_parameters:
        width = DTYPE_BYTES.get(entry.target_dtype or "", 2)
        nbytes, fact = int(entry.target_parameters * width), "target_parameters"
        how = (
            f"{entry.target_parameters / 1e9:.0f}B parameters at {width:g} bytes ({_width_why(entry)}) = "
            f"{nbytes / 1e9:.0f} GB of weights"
        )
    else:
        return None
    evidence = entry.evidence[fact]  # the schema refuses the fact without it
    kv, kv_how = kv_bound(entry)
    name = entry.target.repo or entry.target.path
    source = (
        f"derived: {name}'s {how} ({fact}, {evidence.level}: {evidence.source}); {kv_how}; by the docs/registry.md "
        "rule; `registry sync` replaces it with the target's header bytes and config"
    )
    return plan_hardware(nbytes + kv, {}, source)


def _width_why(entry) -> str:
    """Where the bytes a parameter come from: the stated dtype (with its evidence and, for int4, the rule), else bf16
    assumed."""
    dtype = entry.target_dtype
    if dtype not in DTYPE_BYTES:
        return "bf16 assumed"
    rule = f": {WIDTH_RULE[dtype]}" if dtype in WIDTH_RULE else ""
    evidence = entry.evidence.get("target_dtype")
    cited = f", target_dtype {evidence.level}: {evidence.source}" if evidence and dtype in WIDTH_RULE else ""
    return f"as {dtype}{rule}{cited}"


def kv_bound(entry) -> tuple[int, str]:
    """The verify workload's KV cache at most (bytes) and the arithmetic, from the target's layers and hidden size
    the entry states: 2 (K and V) x layers x hidden x 2 bytes a token, for KV_TOKENS tokens."""
    layers, hidden = entry.target_num_layers, entry.target_hidden_size
    if not (layers and hidden):
        return 0, "KV cache not counted: the entry states no target_num_layers and target_hidden_size"
    per_token = 2 * layers * hidden * 2
    total = per_token * KV_TOKENS
    return total, (
        f"KV cache at most 2 x {layers} layers x {hidden} hidden x 2 bytes x {KV_TOKENS} tokens = {total / 1e9:.1f} GB"
    )


def parallel_sizes(gpus: int, cfg: dict) -> tuple[int, int]:
    """Tensor parallelism over every GPU when the attention heads divide evenly (vLLM's requirement);
    otherwise the largest such tensor size, with pipeline stages for the rest."""
    heads = int(cfg.get("num_attention_heads") or gpus)
    tp = gpus
    while tp > 1 and heads % tp:
        tp //= 2
    return tp, gpus // tp
