"""eaglezoo: convert, lint, verify and publish EAGLE-3 / EAGLE 3.1 drafters."""

__version__ = "0.1.0"
