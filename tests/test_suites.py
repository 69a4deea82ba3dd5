"""`verify --suite standard`: MT-bench's 80 first turns (by category) and HumanEval's 164 prompts, shipped with
their licences and their provenance, measured per bucket; the target's chat template applied when it has one."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections import Counter

from conftest import EXAMPLE, ROOT, assert_clean_failure

SUITES = ROOT / "eaglezoo" / "data" / "suites"
CATEGORIES = {"writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities"}


def test_the_suite_ships_with_its_licences_and_provenance():
    rows = [json.loads(line) for line in (SUITES / "standard.jsonl").read_text().splitlines()]
    buckets = Counter(r["bucket"] for r in rows)
    assert buckets == {**{c: 10 for c in CATEGORIES}, "humaneval": 164}
    assert all(r["chat"] is True and r["prompt"].strip() for r in rows)
    readme = (SUITES / "README.md").read_text()
    digest = re.search(r"sha256 of the file: `([0-9a-f]{64})`", readme).group(1)
    assert hashlib.sha256((SUITES / "standard.jsonl").read_bytes()).hexdigest() == digest
    assert "Apache License" in (SUITES / "licenses" / "mt-bench-LICENSE").read_text()
    assert "MIT" in (SUITES / "licenses" / "humaneval-LICENSE").read_text()
    package_data = (ROOT / "pyproject.toml").read_text()
    assert '"data/suites/*.jsonl"' in package_data and '"data/suites/licenses/*"' in package_data


def test_verify_measures_the_suite_per_category(cli):
    r = cli("verify", "tiny-example-eagle31", "--suite", "standard", "--max-new-tokens", "16", "--min-al", "1",
            "--json")
    assert r.code == 0, r.err
    report = r.json()
    assert report["num_prompts"] == 244
    assert set(report["drift"]["mean_acceptance_length_by_bucket"]) == CATEGORIES | {"humaneval"}
    assert "244 chat prompt(s) as raw text: the target's tokenizer has no chat template" in report["notes"]


def test_a_target_with_a_chat_template_gets_the_prompts_in_it(cli, tmp_path):
    target = shutil.copytree(EXAMPLE / "target", tmp_path / "target")
    config = json.loads((target / "tokenizer_config.json").read_text())
    config["chat_template"] = "{% for m in messages %}<|user|>{{ m['content'] }}\n{% endfor %}<|assistant|>"
    (target / "tokenizer_config.json").write_text(json.dumps(config))
    args = ["tiny-example-eagle31", "--suite", "standard", "--max-prompts", "3", "--max-new-tokens", "8",
            "--min-al", "1", "--json"]
    templated = cli("verify", *args, "--target", target)
    assert templated.code == 0, templated.err
    assert "3 chat prompt(s) in the target's chat template" in templated.json()["notes"]


def test_bad_suite_requests(cli):
    assert_clean_failure(cli("verify", "tiny-example-eagle31", "--suite", "nope"), None, contains="unknown suite")
    r = cli("verify", "tiny-example-eagle31", "--suite", "standard", "--prompts", EXAMPLE / "prompts.jsonl")
    assert_clean_failure(r, None, contains="--prompts and --suite")
