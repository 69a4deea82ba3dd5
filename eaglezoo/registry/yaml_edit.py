"""Minimal edits to a YAML file: set values at key paths and leave every other line as it was
(key order, comments, quoting, folded lines). Each edit replaces one value's span, or inserts one
key after the last line of its mapping; the result is re-read and must equal the intended data."""

from __future__ import annotations

from typing import Any

import yaml

from ..errors import BadInput

Path_ = tuple[str, ...]


class _CannotEdit(Exception):
    pass


def set_values(text: str, changes: dict[Path_, Any], name: str = "YAML") -> str:
    expected = yaml.safe_load(text)
    for path, value in changes.items():
        try:
            text = _set(text, path, value)
        except (yaml.YAMLError, _CannotEdit):
            raise BadInput(
                f"{name}: cannot set {'.'.join(path)} in place; edit it by hand", hint="edit that key by hand"
            ) from None
        _assign(expected, path, value)
    if yaml.safe_load(text) != expected:
        raise BadInput(f"{name}: cannot edit it in place; edit it by hand", hint="edit the entry by hand")
    return text


def _assign(data: dict, path: Path_, value: Any) -> None:
    for key in path[:-1]:
        if not isinstance(data.get(key), dict):
            data[key] = {}
        data = data[key]
    data[path[-1]] = value


def _set(text: str, path: Path_, value: Any) -> str:
    node = yaml.compose(text)
    for depth, key in enumerate(path):
        child = next((v for k, v in node.value if k.value == key), None)
        if child is None:
            return _insert(text, node, path[depth:], value)
        if depth < len(path) - 1 and not isinstance(child, yaml.MappingNode):
            value = _nest(path[depth + 1 :], value)  # a null where a mapping is wanted: replace it whole
        if depth == len(path) - 1 or not isinstance(child, yaml.MappingNode):
            return _replace(text, child, value, key_indent=node.value[0][0].start_mark.column)
        node = child
    return text


def _nest(path: Path_, value: Any) -> Any:
    for key in reversed(path):
        value = {key: value}
    return value


def _replace(text: str, node, value: Any, key_indent: int) -> str:
    """Block values stay block (a list at its key's indentation, a mapping two deeper); scalars and
    short lists of scalars go on the key's line."""
    block = (isinstance(value, dict) and bool(value)) or (
        isinstance(value, list) and any(isinstance(x, dict) for x in value)
    )
    if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and not node.flow_style:
        start, end = _line_start(text, node.start_mark.index), _line_end(text, _last_index(node))
        if block:
            return text[:start] + _block(value, node.start_mark.column).rstrip("\n") + text[end:]
        return text[:start].rstrip() + " " + _flow(value) + text[end:]
    start, end = node.start_mark.index, node.end_mark.index
    if block:
        indent = key_indent + (2 if isinstance(value, dict) else 0)
        return text[:start].rstrip(" ") + "\n" + _block(value, indent).rstrip("\n") + text[end:]
    head = text[:start] if text[start - 1 : start].isspace() else text[:start] + " "
    return head + _flow(value) + text[end:]


def _insert(text: str, mapping, path: Path_, value: Any) -> str:
    """Adds `key: value` as the mapping's last entry, at the indentation of its first key."""
    if mapping.flow_style or not mapping.value:
        raise _CannotEdit  # only block mappings take a new line
    indent = mapping.value[0][0].start_mark.column
    at = _line_end(text, _last_index(mapping))
    block = _block(_nest(path, value), indent)
    return text[:at] + "\n" + block.rstrip("\n") + text[at:]


def _last_index(node) -> int:
    while isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and node.value and not node.flow_style:
        last = node.value[-1]
        node = last[1] if isinstance(node, yaml.MappingNode) else last
    return max(node.end_mark.index - 1, node.start_mark.index)


def _line_start(text: str, index: int) -> int:
    return text.rfind("\n", 0, index) + 1


def _line_end(text: str, index: int) -> int:
    end = text.find("\n", index)
    return len(text) if end < 0 else end


def _flow(value: Any) -> str:
    out = yaml.safe_dump(value, default_flow_style=True, width=1 << 16, sort_keys=False, allow_unicode=True)
    return out.removesuffix("\n").removesuffix("\n...").strip()


class _Dumper(yaml.SafeDumper):
    """Block mappings; lists of scalars in flow style, as the registry's files write them."""


def _list(dumper, data):
    flow = all(not isinstance(x, (dict, list)) for x in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Dumper.add_representer(list, _list)


def _block(value: Any, indent: int) -> str:
    out = yaml.dump(value, Dumper=_Dumper, default_flow_style=False, width=1 << 16, sort_keys=False, allow_unicode=True)
    pad = " " * indent
    return "".join(pad + line if line.strip() else line for line in out.splitlines(keepends=True))
