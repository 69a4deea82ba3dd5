"""A page as what a browser reads from it: parsed with html.parser and written back in one canonical spelling
(entities resolved and re-escaped the same way, void elements closed the same way), so two pages that differ only
in how their text is escaped (`&quot;` or `&#34;`) compare equal and any other difference shows. The plots' SVG
(plots.py's, drawn by matplotlib) is kept as an empty <svg>: the pages' goldens test the page, not the drawing."""

from __future__ import annotations

from html import escape
from html.parser import HTMLParser

VOID = {"meta", "input", "br", "img", "hr", "link"}


class _Canonical(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.svg_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.svg_depth:
            self.svg_depth += tag == "svg"
            return
        shown = "".join(f' {k}="{escape(v or "")}"' for k, v in attrs)
        self.out.append(f"<{tag}{shown}>")
        self.svg_depth = int(tag == "svg")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if not self.svg_depth:
            self.handle_starttag(tag, attrs)
            self.svg_depth = 0

    def handle_endtag(self, tag: str) -> None:
        if self.svg_depth:
            self.svg_depth -= tag == "svg"
            if self.svg_depth:
                return
        if tag not in VOID:
            self.out.append(f"</{tag}>")

    def handle_data(self, data: str) -> None:
        if not self.svg_depth:
            self.out.append(escape(data))

    def handle_decl(self, decl: str) -> None:
        self.out.append(f"<!{decl}>")


def canonical(page: str) -> str:
    """The page in one spelling, one element per line (so a difference names its element)."""
    parser = _Canonical()
    parser.feed(page)
    parser.close()
    return "".join(p if not p.startswith("<") or p.startswith("</") else "\n" + p for p in parser.out).lstrip() + "\n"
