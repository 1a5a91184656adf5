"""Dotted paths into nested configs: ``arch.stages.0.repeat`` names a key, an integer part a list index.

Sweep parameters, ``--set`` flags and the spec's nested ``parameters:`` blocks all address a
trial's config this way; this module is the one place that walks such a path.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


def split(path: str) -> list[str]:
    return path.split(".")


def set_path(config: dict, path: str, value: Any) -> None:
    """Set ``value`` at ``path`` in ``config`` in place.

    Missing mapping keys are created; a list must already hold the index (the base config
    says how long a list is, a swept value only replaces one item of it).
    """
    parts = split(path)
    node: Any = config
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        where = ".".join(parts[:i]) or "the config"
        if isinstance(node, list):
            if not part.lstrip("-").isdigit():
                raise KeyError(f"{where} is a list, so {part!r} must be an index")
            index = int(part)
            if not -len(node) <= index < len(node):
                raise KeyError(f"index {index} is out of range: {where} has {len(node)} items")
            if last:
                node[index] = value
            else:
                node = node[index]
        elif isinstance(node, dict):
            if part.lstrip("-").isdigit() and part not in node:
                raise KeyError(f"{part} indexes a list, but {where} is not a list")
            if last:
                node[part] = value
            else:
                if node.get(part) is None:
                    node[part] = {}
                node = node[part]
        else:
            raise KeyError(f"{where} is a {type(node).__name__}, not a mapping or list")


def get_path(config: Any, path: str) -> Any:
    """The value at ``path`` in ``config``, or None where the path leads nowhere."""
    node = config
    for part in split(path):
        if isinstance(node, list) and part.lstrip("-").isdigit() and -len(node) <= int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return None
    return node


def apply_overrides(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict:
    """A deep copy of ``base`` with every ``dotted.path: value`` in ``overrides`` set."""
    config = copy.deepcopy(dict(base))
    for path, value in overrides.items():
        set_path(config, path, value)
    return config
