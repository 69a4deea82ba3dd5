"""Writes docs/lint-codes.md from the catalogue of finding codes (eaglezoo/checkpoint/codes.py); a test keeps the
two equal.

    python -m scripts.docs.write_lint_codes
"""

from pathlib import Path

from eaglezoo.checkpoint.codes import markdown

if __name__ == "__main__":
    path = Path(__file__).resolve().parents[2] / "docs" / "lint-codes.md"
    path.write_text(markdown(), encoding="utf-8")
    print(f"wrote {path}")
