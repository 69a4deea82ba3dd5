"""One module per on-disk dialect: `detect`, `read` (and `write_config` for the output formats)."""

from __future__ import annotations

from ...errors import UsageError
from . import eagle31, modelopt, nemo, safeai, specforge, speculators, torchspec

# Order matters only for error messages; detection must be unambiguous.
DIALECTS = {m.NAME: m for m in (eagle31, speculators, torchspec, modelopt, nemo, specforge, safeai)}
WRITERS = ("eagle31", "speculators")


def detect(cfg: dict, names: set[str], metadata: dict) -> str:
    matches = [name for name, mod in DIALECTS.items() if mod.detect(cfg, names, metadata)]
    for schema in WRITERS:  # a full schema wins over provenance markers carried through (e.g. torchspec_version)
        if schema in matches:
            return schema
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise UsageError("unknown dialect: the config and tensor names match none of "
                         f"{', '.join(DIALECTS)}", hint="name it with --from")
    raise UsageError(f"ambiguous dialect: matches {', '.join(matches)}", hint="name it with --from")


def get(name: str):
    if name not in DIALECTS:
        raise UsageError(f"unknown dialect {name!r}", hint=f"choose one of {', '.join(DIALECTS)}")
    return DIALECTS[name]
