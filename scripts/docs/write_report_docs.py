"""Writes docs/report.md from the report models (eaglezoo/reports.py); a test keeps the two equal.

python -m scripts.docs.write_report_docs
"""

from pathlib import Path

from eaglezoo.reports import schema_markdown

if __name__ == "__main__":
    path = Path(__file__).resolve().parents[2] / "docs" / "report.md"
    path.write_text(schema_markdown(), encoding="utf-8")
    print(f"wrote {path}")
