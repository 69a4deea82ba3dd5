"""Writes docs/report.md from the report models (eaglezoo/reports.py); a test keeps the two equal.

    python scripts/write_report_docs.py
"""

from pathlib import Path

from eaglezoo.reports import schema_markdown

if __name__ == "__main__":
    path = Path(__file__).resolve().parent.parent / "docs" / "report.md"
    path.write_text(schema_markdown(), encoding="utf-8")
    print(f"wrote {path}")
