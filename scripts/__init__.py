"""The project's scripts, run from the repository root as modules: `python -m scripts.<folder>.<name>`."""
