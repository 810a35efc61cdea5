"""The ``params`` keys of a TF2 function's captured variables.

A key is a Keras 3 variable's ``path`` (``m/dense/kernel``) where a Keras 3 variable wraps the captured
``tf.Variable``, else the variable's name without ``:0`` (``tf.Variable``, ``tf_keras``); where keys
repeat (two ``tf.Variable(...)`` without a name are both ``Variable:0``), ``_1``, ``_2``, ... in capture
order.

With the TensorFlow backend a ``keras.Variable`` holds a ``tf.Variable`` (its ``_value``) and the function
captures only that, which does not refer back to it. The Keras 3 variables are found from the Python
objects the function reaches (:func:`_reached`: the ``tf.function``'s Python function, its closure, the
globals it names, bound ``self``, and the ``variables`` of the Keras layers, models and optimizers among
them), which costs nothing for a program without Keras. Only where those objects do not tell (a
``ConcreteFunction`` given without its Python function; a Keras program with a variable they do not
reach) are the live Keras 3 variables looked up in the whole heap (``gc.get_objects()``: about 0.1 s per
400,000 objects, which a long session or a test run multiplies by every import).
"""

from __future__ import annotations

import collections
import gc
import sys
import types
from collections.abc import Callable
from typing import Any, Optional

# how far the walk from the function goes (function -> global -> object -> attribute -> container), and
# how many objects it visits at most
_DEPTH = 5
_VISITS = 5000
_LEAVES = (str, bytes, int, float, complex, bool, type(None), type, types.ModuleType, types.CodeType)


def params_keys(variables: dict[str, Any], roots: Optional[tuple[Any, ...]]) -> dict[str, str]:
    """Each captured variable's ``params`` key, by placeholder (``variables``: placeholder -> ``tf.Variable``).
    ``roots``: the Python objects of the function (None where there are none to walk: the whole heap is
    looked up; ``()``: no Keras 3 variable can wrap these, as a loaded SavedModel's)."""
    paths = _keras_paths(list(variables.values()), roots)
    out: dict[str, str] = {}
    taken: set[str] = set()
    for placeholder, v in variables.items():
        base = key = paths.get(id(v)) or _name(v)
        k = 0
        while key in taken:
            k += 1
            key = f"{base}_{k}"
        out[placeholder] = key
        taken.add(key)
    return out


def _name(v: Any) -> str:
    name = v.name
    return name[:-2] if name.endswith(":0") else name


def _keras_paths(variables: list[Any], roots: Optional[tuple[Any, ...]]) -> dict[int, str]:
    """The Keras 3 ``path`` of each of ``variables`` (by ``id``) that a Keras 3 variable wraps; a variable
    that no Keras 3 variable, or more than one path, claims keeps its name."""
    module = sys.modules.get("keras.src.backend.common.variables")
    keras_variable = getattr(module, "Variable", None)
    if not isinstance(keras_variable, type) or not variables or roots == ():
        return {}
    ids = {id(v): v for v in variables}
    found: dict[int, set[str]] = {}

    def claim(obj: Any) -> None:
        held, path = getattr(obj, "_value", None), getattr(obj, "path", None)
        if isinstance(path, str) and path and ids.get(id(held)) is held:
            found.setdefault(id(held), set()).add(path)

    reached, keras_seen = ([], False) if roots is None else _reached(roots, lambda obj: isinstance(obj, keras_variable))
    for obj in reached:
        claim(obj)
    if roots is None or (keras_seen and len(found) < len(ids)):
        for obj in gc.get_objects():
            if isinstance(obj, keras_variable):
                claim(obj)
    return {i: next(iter(p)) for i, p in found.items() if len(p) == 1}


def captured_variables(handles: set[int], roots: Optional[tuple[Any, ...]], variable: type) -> dict[int, Any]:
    """The ``variable``s (``tf.Variable``) whose handles (by ``id``) the function captures but does not list
    among its variables (a legacy optimizer's ``iterations``, made while it was first traced), found among
    the objects it reaches, else (no ``roots``, or not reached) in the whole heap."""
    def owns(obj: Any) -> bool:
        return isinstance(obj, variable) and id(getattr(obj, "handle", None)) in handles

    found = {id(v.handle): v for v in (_reached(roots, owns)[0] if roots else [])}
    if len(found) < len(handles):
        found.update({id(v.handle): v for v in gc.get_objects() if owns(v) and id(v.handle) not in found})
    return found


def _reached(roots: tuple[Any, ...], wanted: Callable[[Any], bool]) -> tuple[list[Any], bool]:
    """The objects the function reaches that are ``wanted`` (breadth first, within ``_DEPTH`` steps and
    ``_VISITS`` objects), and whether it reaches any Keras object."""
    out: list[Any] = []
    keras_seen = False
    seen: set[int] = set()
    todo = collections.deque((r, 0) for r in roots)
    while todo and len(seen) < _VISITS:
        obj, depth = todo.popleft()
        if isinstance(obj, _LEAVES) or id(obj) in seen:
            continue
        seen.add(id(obj))
        keras = (getattr(type(obj), "__module__", None) or "").startswith("keras.")
        keras_seen = keras_seen or keras
        if wanted(obj):
            out.append(obj)
        elif keras:
            todo.extend((v, depth + 1) for v in _keras_state(obj))
        elif depth < _DEPTH:
            todo.extend((c, depth + 1) for c in _children(obj))
    return out, keras_seen


def _keras_state(obj: Any) -> list[Any]:
    """A Keras layer's, model's, metric's or optimizer's variables (random seeds included), and a
    compiled model's optimizer."""
    try:
        state = list(getattr(obj, "variables", None) or ())
    except Exception:  # noqa: BLE001 -- a property of an object half built: nothing to claim there
        state = []
    optimizer = getattr(obj, "__dict__", {}).get("optimizer")
    return state + ([optimizer] if optimizer is not None else [])


def _children(obj: Any) -> list[Any]:
    """The objects ``obj`` refers to that may lead to a Keras object."""
    if isinstance(obj, (list, tuple, set, frozenset)):
        return list(obj)
    if isinstance(obj, dict):
        return list(obj.values())
    if isinstance(obj, types.MethodType):
        return [obj.__self__, obj.__func__]
    if isinstance(obj, types.FunctionType):
        cells = []
        for cell in obj.__closure__ or ():
            try:
                cells.append(cell.cell_contents)
            except ValueError:  # an empty cell (a name assigned after the function was made)
                pass
        named = [obj.__globals__[n] for n in _names(obj.__code__) if n in obj.__globals__]
        return [*cells, *named, *(obj.__defaults__ or ()), *(obj.__kwdefaults__ or {}).values(),
                *([obj.__wrapped__] if hasattr(obj, "__wrapped__") else [])]
    try:  # (an object's __getattr__ may raise anything)
        python_function = getattr(obj, "python_function", None)  # a tf.function
        attributes = getattr(obj, "__dict__", None)
    except Exception:  # noqa: BLE001 -- nothing to follow there
        return []
    if python_function is not None:
        return [python_function]
    return list(attributes.values()) if isinstance(attributes, dict) else []


def _names(code: types.CodeType) -> set[str]:
    """The global names ``code`` and the functions defined in it read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names
