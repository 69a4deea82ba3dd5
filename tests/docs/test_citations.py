"""What users (and the tests) read cites what the project ships: no citation of notes kept outside the repository
(the engineers' reference notes), and every `docs/formats.md#anchor` names a heading that exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = [ROOT / "eaglezoo", ROOT / "scripts", ROOT / "docs", ROOT / "README.md", ROOT / "tests"]
# Text that names the notes on purpose: this test's own patterns, and registry sources that `registry check` must
# refuse (bad input, not citations).
DELIBERATE = {
    "tests/docs/test_citations.py": None,
    "tests/cli/registry/test_registry_evidence.py": (
        "shared/reference/peers.md §2 row 1",
        "shared/reference/formats.md §16",
    ),
}
BINARY = {".png", ".jpg", ".jpeg", ".gif", ".pyc", ".gz", ".safetensors", ".bin"}

# The notes' file names; the project's own docs/formats.md is the one allowed spelling of formats.md.
OUTSIDE = re.compile(
    r"(?<!docs/)\bformats\.md\b|\b(?:peers|hub-api|small-models|vllm-cpu|families)\.md\b"
    r"|shared/reference"
)
CITATION = re.compile(r"docs/formats\.md#([\w-]+)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
FORMATS = ROOT / "docs" / "formats.md"


def scanned_files() -> list[Path]:
    files = []
    for top in SCANNED:
        paths = [top] if top.is_file() else sorted(top.rglob("*"))
        files += [p for p in paths if p.is_file() and p.suffix not in BINARY and "__pycache__" not in p.parts]
    return files


def deliberate(path: str, line: str) -> bool:
    if path not in DELIBERATE:
        return False
    return DELIBERATE[path] is None or any(text in line for text in DELIBERATE[path])


def lines_matching(pattern: re.Pattern) -> list[tuple[str, int, str, str]]:
    hits = []
    for path in scanned_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        name = path.relative_to(ROOT).as_posix()
        for number, line in enumerate(text.splitlines(), 1):
            for match in pattern.finditer(line):
                if not deliberate(name, line):
                    hits.append((name, number, match.group(0), line.strip()))
    return hits


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped (hyphens and underscores kept),
    spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match:
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def test_slug_is_githubs():
    assert slug("Aux-layer conventions") == "aux-layer-conventions"
    assert slug("RoPE theta default") == "rope-theta-default"
    assert slug("What `d2t` means, in 3.1") == "what-d2t-means-in-31"


def test_no_citation_of_notes_outside_the_repository():
    hits = lines_matching(OUTSIDE)
    assert not hits, (
        "citations of notes the project does not ship (cite docs/formats.md#anchor or the upstream "
        "source instead):\n" + "\n".join(f"{p}:{n}: {m!r} in {line}" for p, n, m, line in hits)
    )


def test_formats_anchors_cited_exist():
    assert FORMATS.is_file(), "docs/formats.md is missing"
    known = anchors(FORMATS.read_text(encoding="utf-8"))
    cited = lines_matching(CITATION)
    assert cited, "nothing cites docs/formats.md#anchor: the pattern no longer finds the citations"
    missing = [(p, n, m) for p, n, m, _ in cited if m.split("#", 1)[1] not in known]
    assert not missing, (
        "docs/formats.md has no heading for these anchors:\n"
        + "\n".join(f"{p}:{n}: {m}" for p, n, m in missing)
        + f"\nknown anchors: {', '.join(sorted(known))}"
    )


def test_formats_internal_links_resolve():
    text = FORMATS.read_text(encoding="utf-8")
    known = anchors(text)
    missing = sorted({a for a in re.findall(r"\]\(#([\w-]+)\)", text) if a not in known})
    assert not missing, f"docs/formats.md links to anchors it does not have: {', '.join(missing)}"
