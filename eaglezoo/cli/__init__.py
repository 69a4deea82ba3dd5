"""The command line: the only place where a name becomes a folder, a registry entry or a Hub repo."""

from .app import run

__all__ = ["run"]
