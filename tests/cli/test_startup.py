"""Start-up (issue 46): every command pays for what `eaglezoo.cli` imports, so it imports no engine, no report model
and no heavy library; each command imports what it runs when it runs. `--help` took 0.23 s before the tune report
models came in at import (about 1 s); docs/benchmarks.md has the figure."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import CLI_ENV, ROOT

# What no command needs before it parses its options: the report models (pydantic schemas built at import), the
# engines and the libraries they pull.
HEAVY = (
    "torch",
    "pydantic",
    "numpy",
    "transformers",
    "safetensors",
    "huggingface_hub",
    "matplotlib",
    "yaml",
    "eaglezoo.tune.model",
    "eaglezoo.tune.report",
    "eaglezoo.tune.decide",
    "eaglezoo.tune.run",
    "eaglezoo.verify.report",
    "eaglezoo.verify.workload",
    "eaglezoo.verify.vllm_engine",
    "eaglezoo.reproduce",
    "eaglezoo.reports",
    "eaglezoo.doctor.report",
    "eaglezoo.registry.schema",
    "eaglezoo.checkpoint.config",
)


def loaded_by(statement: str) -> set[str]:
    code = f"import sys, json\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=CLI_ENV, cwd=ROOT, timeout=120, check=True
    )
    return set(json.loads(proc.stdout.splitlines()[-1]))


def test_the_cli_imports_no_report_model_engine_or_heavy_library():
    loaded = loaded_by("import eaglezoo.cli.app")
    assert "eaglezoo.cli.tune" in loaded  # the command modules themselves are imported (they register commands)
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_help_imports_none_of_them_either():
    loaded = loaded_by(
        "from eaglezoo.cli.app import run\nsys.argv = ['eaglezoo', '--help']\n"
        "try:\n    run()\nexcept SystemExit:\n    pass"
    )
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
