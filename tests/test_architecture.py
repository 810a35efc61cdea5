"""The package's shape: which part may import which, thin top layers, one error catalogue.

The layout, one folder per layer (bottom first): ``jta.errors``; the record format
(``jta/_records/``: the catalogue of errors, records and slot flags, their primitives); the
storage and kernel core (``jta/_core/``), which computes records as data; delivery
(``jta/_delivery/``: the value ops, the bare-jit callbacks, ``jta.checkify``'s interpreter and
hoisting, jta's changes to JAX's rules, the API); the public modules (``tensor_array``,
``raw_ops``, ``gradients``, ``loops`` and their private helpers ``_display``, ``_describe``,
``_serialization``, ``_loop_linear``); the TF1 graph importer (``jta/graph_import/``); the
package itself.
"""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "jta"
# Modules by dotted name below ``jta`` ("tensor_array", "_records.records", ...).
MODULES = {".".join(p.relative_to(PACKAGE).with_suffix("").parts): ast.parse(p.read_text(), str(p))
           for p in sorted(PACKAGE.rglob("*.py"))}
PACKAGES = {name.removesuffix(".__init__") for name in MODULES if name.endswith(".__init__")}
MODULES = {name.removesuffix(".__init__"): tree for name, tree in MODULES.items()}

# The layers, bottom first, one folder each (the public modules and the package at the top
# level): a module may import modules of its own layer and of the layers below it, never above.
LAYERS = [
    ("errors", {"errors"}),
    ("records", {name for name in MODULES if name.split(".")[0] == "_records"}),
    ("core", {name for name in MODULES if name.split(".")[0] == "_core"}),
    ("delivery", {name for name in MODULES if name.split(".")[0] == "_delivery"}),
    ("public", {"tensor_array", "raw_ops", "gradients", "loops", "_loop_linear", "_display", "_describe",
                "_serialization"}),
    ("graph import", {name for name in MODULES if name.split(".")[0] == "graph_import"}),
    ("package", {"__init__", "__main__"}),
]


def _resolve(module: str, level: int, importer: str) -> str:
    """The dotted name below ``jta`` of a relative import in ``importer``."""
    package = importer.split(".") if importer in PACKAGES else importer.split(".")[:-1]
    base = package[:len(package) - (level - 1)] if level > 1 else package
    return ".".join([*base, *filter(None, module.split("."))])


def _jta_imports(node: ast.AST, importer: str = "") -> set[str]:
    """Modules of jta that ``node`` imports (``from . import x``, ``from .x import y``, ``import jta.x``)."""
    found = set()
    for n in ast.walk(node):
        if isinstance(n, ast.ImportFrom) and n.level >= 1:
            if n.module:
                found.add(_resolve(n.module, n.level, importer))
            for alias in n.names:  # ``from . import x``: x may be a module
                found.add(_resolve(f"{n.module or ''}.{alias.name}", n.level, importer))
        elif isinstance(n, ast.ImportFrom) and n.module and n.module.split(".")[0] == "jta":
            found.add(n.module.partition(".")[2] or "__init__")
        elif isinstance(n, ast.Import):
            found.update(a.name.partition(".")[2] for a in n.names if a.name.startswith("jta."))
    return found & set(MODULES)


def _part(name: str) -> str:
    return name.split(".")[0]


def _graph() -> dict[str, set[str]]:
    return {name: _jta_imports(tree, name) - {name} for name, tree in MODULES.items()
            if name not in ("__init__", "__main__")}


def test_every_module_has_a_layer():
    placed = set().union(*(names for _, names in LAYERS))
    assert set(MODULES) <= placed, f"modules without a layer: {sorted(set(MODULES) - placed)}"


def test_imports_go_down_the_layers():
    """E.g. storage and kernels (core) compute records but never import delivery (the value ops,
    the interpreter, the API); the record format never imports the core."""
    rank = {name: k for k, (_, names) in enumerate(LAYERS) for name in names}
    for name, deps in _graph().items():
        for dep in deps:
            assert rank[dep] <= rank[name], (
                f"jta.{name} ({LAYERS[rank[name]][0]}) imports jta.{dep} ({LAYERS[rank[dep]][0]}), a higher layer")


def test_the_core_never_calls_up():
    """The storage/kernel core computes records as data: it imports the record format and
    ``jta.errors`` only, never delivery (the value ops, the interpreter, the API), nor a public module."""
    allowed = {"errors"} | {name for name in MODULES if _part(name) == "_records"}
    for name, deps in _graph().items():
        if _part(name) == "_core":
            outside = {d for d in deps if _part(d) != "_core"} - allowed
            assert not outside, f"jta.{name} (core) imports {sorted('jta.' + d for d in outside)}"


def test_only_the_importer_knows_tensorflow_graphs():
    """Only ``jta/graph_import/`` imports TensorFlow or the importer's private modules (the package's
    ``__init__`` imports ``jta.graph_import``'s public names)."""
    for name, tree in MODULES.items():
        inside = _part(name) == "graph_import"
        for n in ast.walk(tree):
            roots = ([a.name for a in n.names] if isinstance(n, ast.Import)
                     else [n.module or ""] if isinstance(n, ast.ImportFrom) and n.level == 0 else [])
            assert inside or not any(r.split(".")[0] == "tensorflow" for r in roots), (
                f"jta.{name} line {n.lineno} imports TensorFlow")
        if not inside:
            private = {d for d in _jta_imports(tree, name) if _part(d) == "graph_import" and d != "graph_import"}
            assert not private, f"jta.{name} imports the importer's private {sorted(private)}"
            assert name == "__init__" or "graph_import" not in _jta_imports(tree, name), (
                f"jta.{name} imports jta.graph_import")


def test_top_level_holds_the_public_modules():
    """At most 12 files directly in ``jta/``; the private ones among them are helpers of the public
    layer (the core and the importer live in their subpackages)."""
    files = sorted(p.name for p in PACKAGE.iterdir() if p.is_file() and "__pycache__" not in p.parts)
    assert len(files) <= 12, f"{len(files)} files in jta/: {files}"
    public = set().union(*(names for layer, names in LAYERS if layer in ("errors", "public", "package")))
    stray = [f for f in files if f.endswith(".py") and f.removesuffix(".py") not in public]
    assert not stray, f"top-level modules outside the public layer: {stray}"


# Two-letter aliases the reader knows from elsewhere (third-party conventions) and classes
# (``PartitionSpec as P``); anything else is imported under its own name.
CONVENTIONAL_ALIASES = {("numpy", "np"), ("tensorflow", "tf"), ("hypothesis.strategies", "st"),
                        ("jax._src.linear_util", "lu"), ("jax._src.interpreters.partial_eval", "pe")}
SOURCES = sorted([*PACKAGE.rglob("*.py"), *(ROOT / "tests").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py"),
                  *(ROOT / "notebooks").glob("*.py")])


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_short_module_aliases(path):
    """No ``import x as Y`` / ``from p import x as Y`` with a one- or two-letter ``Y`` (``A``, ``K``,
    ``GR`` said nothing), but for the conventions above."""
    for n in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(n, (ast.Import, ast.ImportFrom)):
            continue
        for a in n.names:
            if a.asname is None or len(a.asname) > 2:
                continue
            full = a.name if isinstance(n, ast.Import) else f"{n.module}.{a.name}" if n.module else a.name
            if (full, a.asname) in CONVENTIONAL_ALIASES or re.match(r"[A-Z][a-z]", a.name):  # a class
                continue
            raise AssertionError(f"{path.relative_to(ROOT)} line {n.lineno}: {a.name} imported as {a.asname}")


def test_no_import_inside_a_function():
    for name, tree in MODULES.items():
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert not _jta_imports(fn, name), f"jta.{name} imports jta inside {fn.name}()"


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


@pytest.mark.parametrize("layer", ["raw_ops", "gradients", "_delivery.api", "_describe", "tensor_array"])
def test_top_layers_use_no_private_members_of_the_array(layer):
    """The Python and raw-op layers call public functions of the lower layers; they never reach
    into an array's underscore members (leaves, metadata)."""
    private = {"_data", "_flags", "_traced_size", "_record", "_flow", "_meta"}
    for n in ast.walk(MODULES[layer]):
        if isinstance(n, ast.Attribute) and n.attr in private:
            raise AssertionError(f"jta.{layer} line {n.lineno} reads .{n.attr}")


def test_every_error_text_lives_in_the_catalogue():
    """No module but the catalogue builds an exception from a string literal."""
    names = {"InvalidArgumentError", "OutOfRangeError", "UnimplementedError", "NotFoundError",
             "ResourceExhaustedError", "ValueError", "TypeError"}
    for name, tree in MODULES.items():
        if name in ("_records.catalogue", "__main__"):
            continue
        for n in ast.walk(tree):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in names:
                assert not n.args or not isinstance(n.args[0], (ast.Constant, ast.JoinedStr)), (
                    f"jta.{name} line {n.lineno} writes an error text outside jta/_records/catalogue.py")


def test_no_module_passes_700_lines():
    long = {name: n for name in MODULES
            if (n := len((PACKAGE / (name.replace(".", "/") + ("/__init__" if name in PACKAGES else ""))).with_suffix(
                ".py").read_text().splitlines())) > 700}
    assert not long, f"split these modules: {long}"


def test_no_module_imports_another_modules_private_names():
    """``from .x import _name`` couples a module to another's internals: what is shared is named
    without the underscore (modules themselves may be private: ``from . import _resources``)."""
    found = []
    for name, tree in MODULES.items():
        for n in ast.walk(tree):
            if isinstance(n, ast.ImportFrom) and (n.level >= 1 or (n.module or "").startswith("jta")):
                source = _resolve(n.module or "", n.level, name) if n.level else (n.module or "").partition(".")[2]
                if source in PACKAGES or source not in MODULES:  # ``from . import _module``
                    continue
                found += [f"{name}: from {source} import {a.name}" for a in n.names
                          if a.name.startswith("_") and a.name != "__future__"]
    assert not found, found


VALUE_KERNELS = {"read", "pack_or_gather", "concat"}  # jta._core.kernels' functions that return values


def test_value_ops_report_through_one_path():
    """Only ``_delivery.value_ops`` calls the kernels that return a value (read, gather, concat):
    every op that returns one goes through it, which reports the record that made the value,
    so no op can return a value and skip its check."""
    offenders = []
    for name, tree in MODULES.items():
        if name in ("_delivery.value_ops", "_core.kernels"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in VALUE_KERNELS and \
                    isinstance(node.value, ast.Name) and node.value.id == "kernels":
                offenders.append(f"{name}:{node.lineno} kernels.{node.attr}")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").endswith("kernels"):
                offenders += [f"{name}:{node.lineno} {a.name}" for a in node.names if a.name in VALUE_KERNELS]
    assert not offenders, offenders


def test_each_folder_is_one_layer():
    """A subpackage's modules all sit in one layer, and that layer has no module elsewhere."""
    rank = {name: layer for layer, names in LAYERS for name in names}
    for folder in ("_records", "_core", "_delivery", "graph_import"):
        layers = {rank[name] for name in MODULES if _part(name) == folder}
        assert len(layers) == 1, (folder, layers)
        (layer,) = layers
        outside = sorted(name for name, lay in rank.items() if lay == layer and _part(name) != folder)
        assert not outside, (folder, outside)
