"""`registry list` and the site answer "which drafter for my target?" (issue 36, item 5): every figure shown
carries its K, benchmark and engine; a figure from a known-broken setup is labelled and never shown first; the
most comparable figure is the one listed; each engine's path says whether the drafter serves as published or
needs `convert` first; a target no entry names gets the nearest ones; a mistyped id gets the nearest ids."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import assert_clean_failure, run_inprocess
from support.registry_entries import GOOD, figure

NVIDIA = "nvidia-llama-3.3-70b-instruct-eagle3"
LLAMA_70B = "meta-llama/Llama-3.3-70B-Instruct"

# Three figures in the order a publisher might list them: the least comparable first, a broken setup's last.
FIGURES = (
    GOOD
    + f"""reported:
- {figure(1.9, dataset="GSM8K", engine="sglang", k=3, source="https://example.org/a")}
- {
        figure(
            1.01,
            dataset="MT-Bench",
            engine="vllm",
            k=3,
            source="https://example.org/b",
            extra=", setup: broken, why: aux ids guessed",
        )
    }
- {figure(2.5, dataset="MT-Bench", engine="vllm", k=3, source="https://example.org/c")}
"""
)


def registry_of(tmp_path: Path, **entries: str) -> Path:
    folder = tmp_path / "registry"
    folder.mkdir()
    for name, text in entries.items():
        (folder / f"{name}.yaml").write_text(text)
    return folder


def listed(*args: str) -> dict[str, dict]:
    r = run_inprocess("registry", "list", "--json", *args)
    assert r.code == 0, r.err
    return {e["id"]: e for e in r.json()}


def test_the_nvidia_entry_shows_its_working_figure_and_labels_the_broken_one():
    entry = listed("--target", LLAMA_70B)[NVIDIA]
    assert entry["shown_reported"]["value"] == 2.77 and entry["shown_reported"]["conditions"]["k"] == 3
    broken = [x for x in entry["reported"] if x["value"] == 1.036]
    assert broken and broken[0]["setup"] == "broken" and "(2, 40, 77)" in broken[0]["why"]
    assert all("vllm/pull/50170" in x["conditions"]["source"] for x in entry["reported"])
    text = run_inprocess("registry", "list", "--target", LLAMA_70B).out
    row = next(line for line in text.splitlines() if NVIDIA in line)
    assert "2.77 (K=3, T=?, unknown, vllm)" in row and "1.036" not in row


def test_the_most_comparable_figure_is_shown_first_with_its_k_benchmark_and_engine(tmp_path):
    registry = registry_of(tmp_path, good=FIGURES)
    entry = listed("--registry", str(registry))["good"]
    assert entry["shown_reported"]["value"] == 2.5
    assert entry["shown_reported"]["label"] == "2.5 (K=3, T=?, MT-Bench, vllm)"
    page = tmp_path / "site"
    assert run_inprocess("registry", "site", page, "--registry", registry).code == 0
    index = (page / "index.html").read_text()
    assert "2.5 (K=3, T=?, MT-Bench, vllm)" in index and "1.01" not in index
    entry_page = (page / "entries" / "good.html").read_text()
    figures = entry_page[entry_page.index("Reported by others") :]
    assert figures.index("2.5 (K=3") < figures.index("1.9 (K=3, T=?, GSM8K") < figures.index("1.01 (K=3")
    assert "BROKEN SETUP: aux ids guessed" in figures


@pytest.mark.parametrize(
    "item,where",
    [
        (figure(1.0, extra=", setup: broken"), "setup: broken and its why go together"),
        (figure(1.0, extra=", why: guessed"), "setup: broken and its why go together"),
        (figure(1.0, extra=", setup: odd, why: w"), "reported.0.setup"),
    ],
)
def test_a_broken_setup_needs_its_why(tmp_path, item, where):
    registry = registry_of(tmp_path, good=GOOD + f"reported:\n- {item}\n")
    assert_clean_failure(run_inprocess("registry", "show", "good", "--registry", registry), None, contains=where)


def test_each_engine_says_whether_it_serves_as_published_or_after_convert():
    entries = listed()
    states = {i: {s["engine"]: s["state"] for s in e["serving"]} for i, e in entries.items()}
    assert states["tiny-example-eagle3"] == {"vllm": "convert first", "sglang": "convert first", "llamacpp": "converts"}
    assert states["nm-testing-qwen3-235b-a22b-eagle3-converted-speculators-lmsys"] == {
        "vllm": "as published",
        "sglang": "convert first",
        "llamacpp": "converts",
    }
    assert states[NVIDIA] == {"vllm": "aux ids unknown", "sglang": "aux ids unknown", "llamacpp": "aux ids unknown"}
    text = run_inprocess("registry", "list").out
    row = next(line for line in text.splitlines() if line.startswith("│ tiny-example-eagle3 "))
    assert "vllm: convert first; sglang: convert first; llamacpp: converts" in row


@pytest.mark.parametrize(
    "asked,nearest",
    [
        ("RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", LLAMA_70B),  # another owner's FP8 copy
        ("Qwen/Qwen3-8B-FP8", "Qwen/Qwen3-8B"),
        ("meta-llama/Meta-Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"),  # spelled otherwise
    ],
)
def test_a_target_with_no_drafter_gets_the_nearest_targets(asked, nearest):
    r = run_inprocess("registry", "list", "--target", asked, "--json")
    assert r.code == 0 and r.json() == []
    assert "did you mean" in r.err and nearest in r.err.split("did you mean", 1)[1].split("?")[0], r.err
    first = r.err.split("did you mean ", 1)[1].split(" or ")[0].split("?")[0]
    assert first == nearest and listed("--target", first)


def test_a_target_like_nothing_says_so():
    r = run_inprocess("registry", "list", "--target", "zzzz/qqqq")
    assert r.code == 0 and "did you mean" not in r.err and "registry list shows every target" in r.err


@pytest.mark.parametrize("command", [("registry", "show"), ("lint",), ("serve-config",)])
def test_a_mistyped_id_gets_the_nearest_ids(command):
    r = run_inprocess(*command, "nvidai-llama-3.3-70b-instruct-eagle3")
    assert_clean_failure(r, None, contains=f"did you mean {NVIDIA}")


def test_long_urls_wrap_on_the_site(tmp_path):
    registry = registry_of(
        tmp_path, good=FIGURES.replace("https://example.org/c", "https://example.org/" + "x" * 300 + " (a note)")
    )
    page = tmp_path / "site"
    assert run_inprocess("registry", "site", page, "--registry", registry).code == 0
    html = (page / "entries" / "good.html").read_text()
    assert "overflow-wrap:anywhere" in html
    assert f'href="https://example.org/{"x" * 300}"' in html  # the link is the URL; the note after it stays text
    assert " (a note)</td>" in html
