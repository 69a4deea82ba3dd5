"""Headless Chromium (Debian's package, installed by scripts/setup/chromium.sh) opening a page as a user opens the
file: the DOM it built, its log and a screenshot, and what every page of eaglezoo must be in it."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

CHROMIUM = shutil.which("chromium")


def browse(page: Path, shot: Path) -> tuple[str, str]:
    """(the DOM Chromium built, its log) for the page opened as a file; a screenshot written to `shot`."""
    flags = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--window-size=1200,1600",
        "--enable-logging=stderr",
        "--v=0",
        "--host-resolver-rules=MAP * ~NOTFOUND",
    ]  # no network at all
    dom = subprocess.run([*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    subprocess.run([*flags, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120, check=True)
    return dom.stdout, dom.stderr


def assert_page(page: Path, tmp_path: Path, plots: int) -> str:
    dom, log = browse(page, tmp_path / f"{page.stem}.png")
    assert "CONSOLE" not in log and "Uncaught" not in log, log
    assert len(re.findall(r"<svg\b", dom)) == plots, dom[:500]
    for svg in re.findall(r"<svg\b.*?</svg>", dom, re.S):  # each plot drew something: paths beyond its frame
        assert len(re.findall(r"<path\b", svg)) >= 5
    html = page.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html), "the page fetches from the network"
    assert not re.search(r"<script\b|<link\b", html)
    for anchor in re.findall(r"""href\s*=\s*["']#([^"']+)""", html):  # internal links land on an id
        assert f'id="{anchor}"' in html, anchor
    from PIL import Image

    with Image.open(tmp_path / f"{page.stem}.png") as shot:
        assert shot.size == (1200, 1600)
        low, high = shot.convert("L").getextrema()
        assert high - low > 100, "the screenshot is blank"
    return dom
