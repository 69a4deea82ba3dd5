"""The HTML pages of verify, compare and tune, rendered in a real browser: headless Chromium (Debian's package,
installed by scripts/setup/chromium.sh) loads each page as a user opens the file, prints its DOM and takes a
screenshot. The page must load with no console error, hold non-empty plots, fetch nothing and link nowhere
broken; a saved report renders to the same bytes as the fresh one."""

from __future__ import annotations

import json
import re
from html import unescape

import pytest
from conftest import ROOT, run_inprocess
from support import saved_reports
from support.browser import CHROMIUM, assert_page, browse

from eaglezoo.pages import tune_page
from eaglezoo.reports import from_data

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (scripts/setup/chromium.sh)"
)


def test_the_verify_page_in_a_browser(tmp_path):
    report, page = tmp_path / "verify.json", tmp_path / "verify.html"
    r = run_inprocess(
        "verify", "tiny-example-eagle31", "-k", "4", "--max-prompts", "8", "--report", report, "--html", page
    )
    assert r.code == 0, r.err
    dom = assert_page(page, tmp_path, plots=4)  # per position, histogram, by K, drift by depth
    data = json.loads(report.read_text())
    assert f"{data['mean_acceptance_length']:.3f}" in dom and "vllm serve" in dom
    again = tmp_path / "again.html"
    r = run_inprocess("report", report, "--html", again, "--json")
    assert r.code == 0 and r.json() == {"report": str(report), "kind": "verify", "html": str(again)}, r.err
    assert again.read_bytes() == page.read_bytes()

    # with --speedup's block (as the vLLM engine writes it), tokens/s by concurrency is drawn too
    def timing(rate: float) -> dict:
        return {
            "output_tokens": 64,
            "wall_s": 64 / rate,
            "output_tokens_per_s": rate,
            "mean_tpot_ms": 10.0,
            "mean_e2e_s": 0.5,
            "median_e2e_s": 0.5,
        }

    data["speedup"] = {
        "levels": [
            {"concurrency": c, "with_drafter": timing(150.0 * c), "without_drafter": timing(100.0 * c), "speedup": 1.5}
            for c in (1, 8)
        ],
        "identical_outputs": 1.0,
        "engine_start_s": {"with_drafter": 9.0, "without_drafter": 8.0},
    }
    report.write_text(json.dumps(data))
    faster = tmp_path / "speedup.html"
    assert run_inprocess("report", report, "--html", faster).code == 0
    assert "output tokens/s by concurrency" in assert_page(faster, tmp_path, plots=5)


def test_the_compare_page_in_a_browser(tmp_path):
    page = tmp_path / "compare.html"
    r = run_inprocess("compare", "tiny-example-eagle3", "tiny-example-eagle31", "--max-prompts", "12", "--html", page)
    assert r.code == 0, r.err
    dom = assert_page(page, tmp_path, plots=1)
    assert "B/A =" in dom and "Per bucket" in dom


def test_the_tune_page_in_a_browser(tmp_path):
    """From a saved tune report, read as `eaglezoo report` reads it (tests/engine/test_tune.py runs the real one)."""
    report = from_data(saved_reports.valid("tune"), "tune", "the saved tune report")
    page = tmp_path / "tune.html"
    page.write_text(tune_page(report))
    assert "Recommended: concurrency 1: K=1" in assert_page(page, tmp_path, plots=1)


def test_the_zoo_site_in_a_browser(tmp_path):
    """`registry site`: the index lists every entry, every page loads with no console error, every internal link
    lands on a page of the site, and the entries' recorded reports are drawn."""
    site = tmp_path / "site"
    r = run_inprocess("registry", "site", site, "--json")
    assert r.code == 0, r.err
    entries = run_inprocess("registry", "list", "--json").json()
    assert sorted(r.json()["pages"]) == sorted(["index.html", *(f"entries/{e['id']}.html" for e in entries)])
    dom, log = browse(site / "index.html", tmp_path / "index.png")
    assert "CONSOLE" not in log and "Uncaught" not in log, log
    listed = re.findall(r'<a href="entries/([^"]+)\.html">', dom)
    assert sorted(listed) == sorted(e["id"] for e in entries)
    for page in [site / "index.html", *sorted((site / "entries").glob("*.html"))]:
        html = page.read_text()
        assert not re.search(r"""(src|href)\s*=\s*["']?//|<link\b|\bsrc\s*=""", html), page
        for target in re.findall(r'href="(?!https://)([^"#]+)"', html):
            assert (page.parent / target).resolve().is_file(), (page.name, target)
    verified = site / "entries" / "tiny-example-eagle31.html"
    dom, log = browse(verified, tmp_path / "entry.png")
    assert "CONSOLE" not in log and dom.count("<svg") == 1 and "repo-file" in dom
    assert "vllm serve" in dom and "sglang.launch_server" in dom
    # the published SafeAILab folder is not served faithfully as is: the whole path, convert first, as serve-config
    sc = run_inprocess("serve-config", "tiny-example-eagle31", "--json").json()
    # serve-config names local folders whole from where it runs (here ROOT); the site as the registry does
    assert chr(10).join(sc["steps"]).replace(f"{ROOT}/", "") in unescape(verified.read_text())
    assert "development endpoints" in verified.read_text()  # what VLLM_SERVER_DEV_MODE=1 opens, said beside it
    assert sc["steps"][0].startswith("eaglezoo convert tiny-example-eagle31 ")
    unknown = (site / "entries" / "nebius-eagle3-llama-3.3-70b-instruct.html").read_text()
    assert "aux_layers</td><td>unknown" in unknown  # with its reason beside it
