"""Every kind of page (verify, tune, compare, doctor, and the zoo site's index and entry pages) reads in a browser
as it did before the pages were built from templates: each is rendered now (tests/support/render_pages.py) and
compared, parsed, with its golden in tests/data/pages/ (written by the hand-escaping code of commit b47c3f3).
Regenerate after a deliberate change: `python -m tests.pages.test_pages_unchanged`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support.html_tree import canonical
from tests.support.render_pages import HOSTILE, render_all

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "pages"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("pages")
    render_all(out / "pages", out / "scratch")
    return out / "pages"


def test_every_page_and_no_other(rendered):
    now = sorted(str(p.relative_to(rendered)) for p in rendered.rglob("*.html"))
    assert now == sorted(str(p.relative_to(GOLDEN)) for p in GOLDEN.rglob("*.html"))
    assert any(n.startswith("site/entries/") for n in now) and "site/index.html" in now


@pytest.mark.parametrize("name", sorted(str(p.relative_to(GOLDEN)) for p in GOLDEN.rglob("*.html")))
def test_page_reads_as_before(rendered, name):
    assert canonical((rendered / name).read_text(encoding="utf-8")) == (GOLDEN / name).read_text(encoding="utf-8")


def test_hostile_text_is_text(rendered):
    """A report's or an entry's text is never markup, and its bidi override is shown, not obeyed."""
    pages = [rendered / "reports" / "hostile-verify.html", rendered / "site" / "entries"]
    texts = [p.read_text() for p in [pages[0], *pages[1].glob("*.html")]]
    assert all("<script>alert" not in t and "\u202e" not in t for t in texts)
    assert sum("&lt;script&gt;alert(" in t for t in texts) >= 2
    assert HOSTILE.startswith("<script>")


if __name__ == "__main__":  # write the goldens from the pages as the code renders them now
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        render_all(Path(tmp) / "pages", Path(tmp) / "scratch")
        for page in (Path(tmp) / "pages").rglob("*.html"):
            golden = GOLDEN / page.relative_to(Path(tmp) / "pages")
            golden.parent.mkdir(parents=True, exist_ok=True)
            golden.write_text(canonical(page.read_text(encoding="utf-8")), encoding="utf-8")
    sys.exit(0)
