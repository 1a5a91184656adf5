"""The package is laid out by where its code runs, and each layer imports only those below it:
spec/ (pure) <- search/ <- driver/; runs/ reads run dirs with no Ray and nothing of the driver;
trial/ never imports the driver; no module imports another in a circle, type hints and deferred
imports included (an import anywhere in a module counts); and no module is over 400 lines, no
function over 60."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "raysweep"
# A layer's modules may not import these (prefixes of module names).
FORBIDDEN = {
    "raysweep.spec": ("raysweep.search", "raysweep.driver", "raysweep.trial", "raysweep.runs", "raysweep.api"),
    "raysweep.search": ("raysweep.driver", "raysweep.trial", "raysweep.api"),
    "raysweep.runs": ("raysweep.driver", "raysweep.trial", "raysweep.search", "raysweep.api", "ray"),
    "raysweep.trial": ("raysweep.driver", "raysweep.api", "raysweep.cli"),
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """Every module ``path`` imports, wherever in the file: ``from raysweep.trial import gang``
    names ``raysweep.trial.gang`` (not the package) when gang is a module."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = {f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in modules}
            found |= subs if len(subs) == len(node.names) else {node.module} | subs
    return found


def test_no_module_imports_from_a_layer_above_it():
    modules = _modules()
    wrong = [
        f"{name} imports {target}"
        for name, path in modules.items()
        for layer, forbidden in FORBIDDEN.items()
        if name.startswith(layer + ".") or name == layer
        for target in imports(path, modules)
        if any(target == f or target.startswith(f + ".") for f in forbidden)
    ]
    assert wrong == []


def test_no_module_imports_another_in_a_circle():
    """Anywhere in the package (a deferred import or a type hint's counts too): the circle
    spec.distributions -> spec.law -> spec.param -> spec.distributions was kept from failing by a
    ``TYPE_CHECKING`` import until the laws took a ``Protocol`` of the fields they read."""
    modules = _modules()
    graph = {name: imports(modules[name], modules) & modules.keys() for name in modules}
    circle = _a_circle(graph)
    assert circle is None, " -> ".join(circle)


MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def test_no_module_is_over_400_lines_and_no_function_over_60():
    """Split along the seams the code has (docs/architecture.md): a long module or function is
    where the next maintainer has to search."""
    long_modules, long_functions = [], []
    for name, path in _modules().items():
        text = path.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            long_modules.append(f"{name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long_functions.append(f"{name}.{node.name}: {length} lines")
    assert long_modules == [] and long_functions == []


def test_the_checks_see_a_circle_and_a_layer_broken():
    assert _a_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _a_circle({"a": {"b"}, "b": set()}) is None
    source = ROOT / "raysweep" / "spec" / "model.py"
    assert "raysweep.words" in imports(source, _modules())  # the import walk finds what a module imports


def _a_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` (a path that comes back to its start), or None."""
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = "done"
        path.pop()
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_every_environment_variable_raysweep_uses_is_in_its_table_and_the_guide():
    """raysweep/env.py lists every variable, and docs/environment.md's table is made from it; a
    module that names a variable (a quoted name of Ray's, Tune's, torch's, torchrun's or W&B's, or
    any RAYSWEEP_* name) the table lacks fails here (issue 45: six were read in three modules, three
    documented; issue 52: the scripts' variables and RAY_AUTH_MODE were missing)."""
    import re

    from raysweep.env import VARIABLES, markdown_table

    assert markdown_table() in (ROOT / "docs" / "environment.md").read_text()
    names = {v.name for v in VARIABLES}
    quoted = re.compile(
        r"[\"']((?:RAYSWEEP|RAY|TUNE|WANDB|CUDA|NCCL|GLOO|MASTER|LOCAL|GROUP|NODE|WORLD|TORCHELASTIC|OMP)_[A-Z0-9_]+"
        r"|RANK|PYTHONPATH|PYTHONUNBUFFERED)[\"']"
    )
    used = set()
    for path in (ROOT / "raysweep").rglob("*.py"):
        text = path.read_text()
        used |= set(quoted.findall(text)) | set(re.findall(r"RAYSWEEP_[A-Z_]+", text))
    assert used - {"RAYSWEEP_KEYS"} <= names, used - names


def test_every_environment_variable_is_named_through_its_constant_in_env_py():
    """Issue 76: 28 names sat as bare strings in 9 modules (15 in trial/program.py). A variable's
    name is written once, in env.py; every other module (a docstring aside) uses its constant."""
    from raysweep.env import VARIABLES

    names = {v.name for v in VARIABLES}
    bare = []
    for name, path in _modules().items():
        if name == "raysweep.env":
            continue
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        bare += [
            f"{name}:{node.lineno} {node.value}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in names and id(node) not in docstrings
        ]
    assert bare == []


def test_importing_raysweep_changes_no_environment_variable():
    """Issue 45: ``ray_settings`` set Ray's variables as its import's side effect, so which process had
    them hung on what it had imported. The driver sets them when it starts Ray (``ray_settings.apply``)."""
    import subprocess
    import sys

    modules = sorted(m for m in _modules() if not m.endswith("__main__") and "program_hook" not in m)
    code = (
        "import importlib, os, ray, ray.tune, ray.train, torch\n"
        "before = dict(os.environ)\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print(sorted(set(os.environ.items()) ^ set(before.items())))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
