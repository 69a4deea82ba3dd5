"""One exception hierarchy. The CLI turns each into a one-line message and its exit code."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FINDINGS = 1  # checks ran and found problems
EXIT_USAGE = 2  # usage error or bad input


class EaglezooError(Exception):
    exit_code = EXIT_USAGE

    def __init__(self, message: str, hint: str | None = None, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.code = code  # a stable finding code, where lint reports this problem

    def __str__(self) -> str:
        return self.message


class UsageError(EaglezooError):
    """The user asked for something that cannot be done as asked."""


class BadInput(EaglezooError):
    """A file, config or checkpoint is malformed or inconsistent."""


class HubError(EaglezooError):
    """The Hub (or a local mirror of it) refused or failed a request."""


class ChecksFailed(EaglezooError):
    exit_code = EXIT_FINDINGS
