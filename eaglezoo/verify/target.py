"""The target model through transformers, with the drafter's aux hidden states captured by hooks.

Prompts are generated in batches (left padding, attention mask); each row's states are cut free of
its padding. Quantized targets: see `quantization.py`.

Hooks, not `output_hidden_states`: HF puts the *post*-final-norm state at index L, while engines
capture boundary L before the norm (vllm-project/speculators#313). Boundary 0 is the embedding output and
boundary i >= 1 is the output of decoder layer i-1 (docs/formats.md#aux-layer-conventions).
"""

from __future__ import annotations

import contextlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM
from transformers.utils import logging as hf_logging

from ..errors import UsageError
from .prompting import load_error, load_tokenizer
from .quantization import describe, load_failure, load_kwargs, quantization_config
from .workload import dtype_name


def resolve_device(device: str) -> str:
    """`auto` picks CUDA when present; asking for CUDA without it is a usage error."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise UsageError(
                f"--device {device} asked for, but CUDA is not available on this machine",
                hint="use --device cpu or --device auto",
            )
        index = int(device.split(":")[1]) if ":" in device else 0
        if index >= torch.cuda.device_count():
            raise UsageError(
                f"--device {device}: only {torch.cuda.device_count()} CUDA device(s) present",
                hint="pick one with --device cuda:N, or --device cpu",
            )
        return device
    if device != "cpu":
        raise UsageError(f"unknown --device {device!r}", hint="use auto, cpu, cuda or cuda:N")
    return device


def resolve_dtype(dtype: str, device: str) -> torch.dtype:
    if dtype == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    return getattr(torch, dtype_name(dtype))


@dataclass
class Generation:
    tokens: torch.Tensor  # [p + N] prompt then greedy continuation
    aux: list[torch.Tensor]  # k tensors [p + N - 1, H_t]: features of every position the target ran
    prompt_len: int


class Target:
    def __init__(
        self,
        path: str | Path,
        device: str = "cpu",
        dtype: torch.dtype = torch.float32,
        trust_remote_code: bool = False,
        dequantize_mxfp4: bool = False,
    ):
        path = Path(path)
        self.tokenizer = load_tokenizer(path, trust_remote_code)
        hf_logging.disable_progress_bar()  # our own progress is shown; a second bar garbles stderr
        qc = quantization_config(path)
        kwargs = {"dtype": dtype, "trust_remote_code": trust_remote_code, **load_kwargs(path, qc, dequantize_mxfp4)}
        # A quantizer that lacks its kernel or package here raises RuntimeError too.
        failures = (OSError, ValueError, KeyError, ImportError) + ((RuntimeError,) if qc else ())
        # Shard over every GPU when more than one is present (needs accelerate); else one device.
        sharded = device == "cuda" and torch.cuda.device_count() > 1
        if sharded and importlib.util.find_spec("accelerate") is None:
            raise UsageError(
                f"sharding target {path} over {torch.cuda.device_count()} GPUs needs accelerate",
                hint="pip install 'eaglezoo[multi-gpu]', or pick one GPU with --device cuda:0",
            )
        try:
            if sharded:
                self.model = AutoModelForCausalLM.from_pretrained(path, device_map="auto", **kwargs).eval()
            else:
                self.model = AutoModelForCausalLM.from_pretrained(path, **kwargs).to(device).eval()
        except failures as exc:
            raise (load_failure(path, qc) if qc else load_error(f"target {path} could not be loaded", exc)) from None
        self.config = self.model.config
        self.device = device
        self.dtype = dtype
        self.quantization = describe(self.model, qc)
        self.pad_id = self.config.pad_token_id if self.config.pad_token_id is not None else 0

    @property
    def num_layers(self) -> int:
        return int(self.config.num_hidden_layers)

    def input_embeddings(self) -> torch.Tensor:
        return self.model.get_input_embeddings().weight

    @contextlib.contextmanager
    def capture(self, boundary_ids: list[int]):
        """Collects, for each boundary id, the hidden states [B, T, H] of every forward call."""
        store: dict[int, list[torch.Tensor]] = {i: [] for i in boundary_ids}
        layers = self.model.get_decoder().layers
        handles = []

        def hook_for(ids):
            def hook(_module, _inputs, output):
                out = output[0] if isinstance(output, tuple) else output
                for i in ids:
                    store[i].append(out.detach())

            return hook

        by_module: dict[torch.nn.Module, list[int]] = {}
        for i in boundary_ids:
            if not 0 <= i <= self.num_layers:
                raise UsageError(
                    f"aux layer {i} (boundary) is outside the target's 0..{self.num_layers}",
                    hint="check the aux ids (--aux-layers, --aux-convention) against the target's layer count",
                )
            module = self.model.get_input_embeddings() if i == 0 else layers[i - 1]
            by_module.setdefault(module, []).append(i)
        for module, ids in by_module.items():
            handles.append(module.register_forward_hook(hook_for(ids)))
        try:
            yield store
        finally:
            for h in handles:
                h.remove()

    @torch.inference_mode()
    def greedy(self, prompts: list[list[int]], max_new_tokens: int, boundary_ids: list[int]) -> list[Generation]:
        """Greedy continuations of a batch of prompts in one `generate`: left-padded and masked
        (transformers derives each row's positions from the mask), padding stripped from the results.
        Past an end-of-sequence token the target goes on as vLLM's `ignore_eos` does: the token is
        generated, not stopped at and not masked (masking it, as `min_new_tokens` would, makes the
        target's text differ from vLLM's wherever it wants to stop)."""
        width = max(len(p) for p in prompts)
        pads = [width - len(p) for p in prompts]
        ids = torch.tensor(
            [[self.pad_id] * n + p for n, p in zip(pads, prompts, strict=True)], device=self.model.device
        )
        mask = torch.tensor(
            [[0] * n + [1] * len(p) for n, p in zip(pads, prompts, strict=True)], device=self.model.device
        )
        with self.capture(boundary_ids) as store:
            out = self.model.generate(
                ids,
                attention_mask=mask,
                max_new_tokens=max_new_tokens,
                eos_token_id=None,
                do_sample=False,
                pad_token_id=self.pad_id,
            )
        aux = [torch.cat(store[i], dim=1) for i in boundary_ids]  # [B, width + N - 1, H_t]
        return [
            Generation(out[j, n:], [a[j, n:] for a in aux], len(p))
            for j, (n, p) in enumerate(zip(pads, prompts, strict=True))
        ]
