"""Reading a sweep file: safe YAML (W&B's ``1e-5`` is a float), size limits, and ``--set``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from raysweep.errors import SpecError
from raysweep.spec.wandb_keys import RAYSWEEP_KEYS


class _SweepLoader(yaml.SafeLoader):
    """SafeLoader that also reads ``1e-5`` as a float (YAML 1.1 wants ``1.0e-5``)."""


_SweepLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


MAX_FILE_BYTES = 10 * 2**20  # a sweep file or base_config is a few KiB; refuse to parse a huge one

MAX_VALUES = 1_000_000  # values in a document once YAML aliases are expanded (billion laughs)


def read_yaml(path: str | Path) -> Any:
    """Load a YAML file safely; a missing, binary or huge file or a syntax error is a ``SpecError``."""
    path = Path(path)
    if not path.is_file():
        raise SpecError([f"file not found: {path}" + (" (it is a directory)" if path.is_dir() else "")])
    if path.stat().st_size > MAX_FILE_BYTES:
        raise SpecError([f"{path} is {path.stat().st_size:,} bytes; a sweep file must be under {MAX_FILE_BYTES:,}"])
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = ""
    if not text and raw or "\0" in text:
        raise SpecError([f"{path} is not a text file (expected YAML or JSON)"])
    try:
        return yaml.load(text, Loader=_SweepLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise SpecError([f"YAML syntax error at {where}{e.problem or e}"], source=str(path)) from None
    except yaml.YAMLError as e:
        raise SpecError([f"YAML error: {e}"], source=str(path)) from None
    except RecursionError:
        raise SpecError(["YAML nesting too deep"], source=str(path)) from None


def apply_set(doc: dict, item: str, problems: list[str]) -> None:
    """Apply one ``path=value`` to the raw document; the value is read as YAML.

    Dotted parameter names (``parameters.arch.stages.0.repeat.values=[1,2]``) are matched
    against the keys the document already has, longest first.
    """
    key, sep, raw = item.partition("=")
    if not sep or not key:
        problems.append(f"--set {item!r}: expected path=value, e.g. base_config.epochs=2")
        return
    try:
        value = yaml.load(raw, Loader=_SweepLoader)  # noqa: S506
    except yaml.YAMLError:
        value = raw
    parts = key.split(".")
    if parts[0] in RAYSWEEP_KEYS and parts[0] not in doc and isinstance(doc.get("raysweep"), dict):
        parts.insert(0, "raysweep")  # --set base_config.epochs=2 means raysweep.base_config.epochs
    node = doc
    while len(parts) > 1:
        for n in range(len(parts) - 1, 0, -1):
            head = ".".join(parts[:n])
            if isinstance(node, dict) and isinstance(node.get(head), dict):
                node, parts = node[head], parts[n:]
                break
        else:
            node = node.setdefault(parts[0], {}) if isinstance(node, dict) else None
            parts = parts[1:]
        if not isinstance(node, dict):
            problems.append(f"--set {key}: {'.'.join(key.split('.')[: -len(parts)])} is not a mapping")
            return
    node[parts[0]] = value
