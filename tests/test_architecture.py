"""The package's shape: one direction of imports, thin top layers, one error catalogue."""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "jta"
MODULES = {p.stem: ast.parse(p.read_text(), str(p)) for p in sorted(PACKAGE.glob("*.py"))}


def _jta_imports(node: ast.AST) -> set[str]:
    """Modules of jta that ``node`` imports (``from . import x``, ``from .x import y``, ``import jta.x``)."""
    found = set()
    for n in ast.walk(node):
        if isinstance(n, ast.ImportFrom) and n.level == 1:
            if n.module:
                found.add(n.module.split(".")[0])
            else:
                found.update(a.name for a in n.names)
        elif isinstance(n, ast.ImportFrom) and n.module and n.module.split(".")[0] == "jta":
            found.add(n.module.split(".")[1] if "." in n.module else "__init__")
        elif isinstance(n, ast.Import):
            found.update(a.name.split(".")[1] for a in n.names if a.name.startswith("jta."))
    return found & set(MODULES)


def _graph() -> dict[str, set[str]]:
    return {name: _jta_imports(tree) - {name} for name, tree in MODULES.items() if name not in ("__init__", "__main__")}


def test_no_import_inside_a_function():
    for name, tree in MODULES.items():
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert not _jta_imports(fn), f"jta/{name}.py imports jta inside {fn.name}()"


def test_import_graph_is_acyclic():
    graph = _graph()
    done: set[str] = set()

    def visit(node: str, path: tuple[str, ...]) -> None:
        assert node not in path, "import cycle: " + " -> ".join((*path, node))
        if node in done:
            return
        for dep in sorted(graph.get(node, ())):
            visit(dep, (*path, node))
        done.add(node)

    for node in graph:
        visit(node, ())


@pytest.mark.parametrize("layer", ["raw_ops", "gradients", "throwing", "_describe", "tensor_array"])
def test_top_layers_use_no_private_members_of_the_array(layer):
    """The Python and raw-op layers call public functions of the lower layers; they never reach
    into an array's underscore members (leaves, metadata)."""
    private = {"_data", "_flags", "_traced_size", "_error", "_flow", "_meta"}
    for n in ast.walk(MODULES[layer]):
        if isinstance(n, ast.Attribute) and n.attr in private:
            raise AssertionError(f"jta/{layer}.py line {n.lineno} reads .{n.attr}")


def test_every_error_text_lives_in_the_catalogue():
    """No module but the catalogue builds an exception from a string literal."""
    names = {"InvalidArgumentError", "OutOfRangeError", "UnimplementedError", "NotFoundError",
             "ResourceExhaustedError", "ValueError", "TypeError"}
    for name, tree in MODULES.items():
        if name in ("_catalogue", "__main__"):
            continue
        for n in ast.walk(tree):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in names:
                assert not n.args or not isinstance(n.args[0], (ast.Constant, ast.JoinedStr)), (
                    f"jta/{name}.py line {n.lineno} writes an error text outside jta/_catalogue.py")
