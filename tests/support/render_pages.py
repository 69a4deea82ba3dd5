"""Every kind of page eaglezoo writes, rendered into a folder: the page of each saved report (the shipped verify
reports, tune's, compare's and doctor's from saved_reports, and a verify report whose text is hostile markup) and
the zoo site of a small registry (a few shipped entries and their reports, one with hostile notes). Used by
tests/pages/test_pages_unchanged.py against the goldens in tests/data/pages/; run as a script to render the site
of the whole shipped registry too: `python -m tests.support.render_pages OUT`."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import yaml

from eaglezoo.reports import AnyReport
from tests.support import saved_reports

ROOT = Path(__file__).resolve().parents[2]
SITE_ENTRIES = (
    "tiny-example-eagle31",
    "tiny-example-peagle",
    "smollm2-135m-instruct-eagle31",
    "angelslim-qwen3-8b-eagle3",
    "lightseekorg-kimi-k2.6-eagle3.1-mla",
)
HOSTILE = "<script>alert(\"x\")</script> & 'q' \u202etxt.exe"


def _hostile(report: AnyReport) -> AnyReport:
    """A verify report's model with hostile text where a page shows text, set without validation (a saved report
    refuses control and bidi characters, a fresh one's values are shown as they come)."""
    hostile = {"drafter": HOSTILE, "failures": [HOSTILE], "serve": [f"vllm serve {HOSTILE}"]}
    return report.model_copy(update=hostile | {"gate": report.gate.model_copy(update={"verdict": "FAIL"})})


def reports() -> dict[str, dict]:
    """name -> a saved report's JSON, every kind."""
    out = {p.stem: json.loads(p.read_text()) for p in sorted((ROOT / "registry" / "reports").glob("*.json"))}
    out |= {kind: saved_reports.valid(kind) for kind in ("tune", "compare", "doctor")}
    return out | {"hostile-verify": saved_reports.valid("verify")}


def render_reports(out: Path) -> None:
    """The page of each report, read as `eaglezoo report REPORT --html` reads it."""
    from eaglezoo.pages import page_for
    from eaglezoo.reports import read_saved

    out.mkdir(parents=True, exist_ok=True)
    for name, data in reports().items():
        saved = saved_reports.write(out / f"{name}.json", data)
        report = read_saved(saved)
        page = page_for(_hostile(report) if name.startswith("hostile") else report)
        saved.unlink()
        (out / f"{name}.html").write_text(page, encoding="utf-8")


def small_registry(root: Path) -> Path:
    """A registry of SITE_ENTRIES (and their reports) under root; the last entry's notes are hostile markup."""
    (root / "registry" / "reports").mkdir(parents=True)
    for entry in SITE_ENTRIES:
        shutil.copy(ROOT / "registry" / f"{entry}.yaml", root / "registry")
    for report in (ROOT / "registry" / "reports").glob("*.json"):
        if report.name.split(".")[0] in SITE_ENTRIES:
            shutil.copy(report, root / "registry" / "reports")
    last = root / "registry" / f"{SITE_ENTRIES[-1]}.yaml"
    data = yaml.safe_load(last.read_text())
    data["notes"] = [*(data.get("notes") or []), HOSTILE]
    last.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return root / "registry"


def render_site(registry: Path, out: Path) -> None:
    from eaglezoo.registry.load import load
    from eaglezoo.registry.site import build

    build(load(registry), out)


def render_all(out: Path, scratch: Path) -> None:
    render_reports(out / "reports")
    render_site(small_registry(scratch), out / "site")


if __name__ == "__main__":
    target = Path(sys.argv[1])
    render_all(target / "small", target / "scratch")
    render_site(ROOT / "registry", target / "full-site")
