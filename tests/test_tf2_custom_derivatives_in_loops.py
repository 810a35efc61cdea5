"""Every custom derivative of the importer, inside a loop body: ``jax.grad`` against TensorFlow's tape.

The importer writes some ops with a ``jax.custom_jvp``/``jax.custom_vjp`` (TensorFlow's registered gradient
differs from JAX's derivative, or the derivative needs the op's own draws or values). A rule that closes over
a value traced in the op's call leaks that tracer once the op runs in a loop body (a ``while``/``scan``
body is its own trace): ``tf.random.stateless_gamma``'s did (JAX's ``UnexpectedTracerError``). This file
enumerates the class from the code, not from a list kept by hand:

* :func:`_definitions`: every custom-derivative object of ``jta.graph_import`` (the module-level ones, the
  ones a factory made at module level, and those a function defines for each call, found in the modules'
  syntax trees);
* :func:`_elementwise_ops`: every op of :data:`jta.graph_import._ops.OPS` whose implementation holds one of
  :mod:`jta.graph_import._derivatives`'s functions (TensorFlow's elementwise derivatives) or a custom
  derivative, directly or through an op table.

:data:`CASES` must cover both (a new custom derivative, or a new op on one, fails
:func:`test_the_cases_cover_every_custom_derivative` until a case covers it), and each case's run checks
that ``jax.grad`` went through the definitions it claims (the custom rules' calls are recorded). Each case
is a small TF2 program whose op runs in a loop body, its input depending on the loop's counter and on the
argument: an autograph ``for i in tf.range(3)`` or a ``tf.scan``. ``jax.grad`` of the import, eagerly and
under ``jax.jit``, must be the ``GradientTape``'s, and the imported train step (the tape inside the
``tf.function``) TensorFlow's; where TensorFlow's registry has no gradient for the op, both raise its
``LookupError``. A case costs seconds (the loop's gradient compiles three times): by default the cases of
the custom derivatives defined anew in each call (whose rules can close over what the call traced, as the
gamma draws' did) run in the ``for`` loop; under ``--long`` every case runs in each form (and in a third:
the ``for`` loop with the op's input a ``tf.Variable``, differentiated in the variable).
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import importlib
import inspect
import pkgutil
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402

import jta  # noqa: E402
import jta.graph_import  # noqa: E402
from jta.graph_import import _derivatives  # noqa: E402
from jta.graph_import._ops import OPS  # noqa: E402
from tests.helpers.tf2_steps import op_types, tape_step  # noqa: E402

_CUSTOM = (jax.custom_jvp, jax.custom_vjp)
_TRIPS = 3
_MODULES = {m.name: importlib.import_module(f"{jta.graph_import.__name__}.{m.name}")
            for m in pkgutil.iter_modules(jta.graph_import.__path__)}


# -- the enumeration ----------------------------------------------------------------------------------
def _short(module: str) -> str:
    return module.rpartition(".")[2]


def _globals() -> dict[int, str]:
    """The module-level custom derivatives by ``id``: ``module.name``, the module that defines the rule's
    function where several hold it (an import), else the one holding it."""
    names: dict[int, str] = {}
    for name, module in sorted(_MODULES.items()):
        for attr, value in vars(module).items():
            if isinstance(value, _CUSTOM) and (id(value) not in names or value.fun.__module__ == module.__name__):
                names[id(value)] = f"{name}.{attr}"
    return names


_GLOBALS = _globals()


def _key(obj: Any) -> str:
    """A custom derivative's name: its module-level name, else its function's ``module.qualname``."""
    return _GLOBALS.get(id(obj)) or f"{_short(obj.fun.__module__)}.{obj.fun.__qualname__}"


def _decorated(node: ast.AST) -> bool:
    return any(word in ast.unparse(d) for d in getattr(node, "decorator_list", ()) for word in ("custom_jvp", "custom_vjp"))


# The functions that make custom derivatives by a call (not a decorator), whose products are module-level
# (each product is then a definition): a new one fails :func:`_definitions` until its products are named.
_FACTORIES = {"_derivatives._with_tangent"}


def _nested_definitions(name: str, tree: ast.Module, factories: set[str]) -> set[str]:
    """The functions ``tree`` decorates as custom derivatives inside other functions (one per call); the
    functions that call ``custom_jvp``/``custom_vjp`` go to ``factories``."""
    found: set[str] = set()

    def walk(node: ast.AST, scope: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if scope and isinstance(child, ast.Call) and ast.unparse(child.func).endswith(("custom_jvp", "custom_vjp")):
                factories.add(f"{name}.{'.<locals>.'.join(scope)}")
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if scope and _decorated(child):
                    found.add(f"{name}.{'.<locals>.'.join([*scope, child.name])}")
                walk(child, [*scope, child.name])
            elif isinstance(child, ast.ClassDef):
                walk(child, [*scope, child.name])
            else:
                walk(child, scope)
    walk(tree, [])
    return found


def _definitions() -> set[str]:
    """Every custom derivative of ``jta.graph_import``: the module-level objects (decorated, or made by a
    factory such as :func:`._derivatives._with_tangent`) and the decorated functions nested in others. A
    module that names ``custom_jvp``/``custom_vjp`` must contribute one (a form this scan does not see
    fails here, not silently)."""
    found, factories = set(_GLOBALS.values()), set()
    for name, module in _MODULES.items():
        source = inspect.getsource(module)
        found |= _nested_definitions(name, ast.parse(source), factories)
        if "custom_jvp" in source or "custom_vjp" in source:
            assert any(k.startswith(f"{name}.") for k in found), f"{name}: a custom derivative this scan misses"
    assert factories == _FACTORIES, f"functions making custom derivatives by a call: {sorted(factories)}"
    return found


def _held(fn: Any) -> list[Any]:
    """What a function holds: its closure's values and its defaults (``simple``'s ``fn=fn``)."""
    cells = []
    for cell in getattr(fn, "__closure__", None) or ():
        with contextlib.suppress(ValueError):
            cells.append(cell.cell_contents)
    return cells + list(getattr(fn, "__defaults__", None) or ())


def _derivative_functions() -> set[int]:
    """``id``s of :mod:`._derivatives`'s functions on a custom derivative: one itself, one holding one
    (``_either``'s), or one calling such a function of the module by name (``divide``)."""
    found = {id(v) for v in vars(_derivatives).values()
             if isinstance(v, _CUSTOM) or (callable(v) and any(isinstance(h, _CUSTOM) for h in _held(v)))}
    for value in vars(_derivatives).values():
        if isinstance(value, types.FunctionType) and value.__module__ == _derivatives.__name__ and any(
                id(getattr(_derivatives, n, None)) in found for n in value.__code__.co_names):
            found.add(id(value))
    return found


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    """``code`` and the code of the functions it defines."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _elementwise_ops() -> set[str]:
    """The ops of ``OPS`` on a custom derivative through an elementwise table: the op's function holds one
    (or one of :mod:`._derivatives`'s), or a module-level table maps the op's name to one."""
    derivative = _derivative_functions()
    names = {n for n, v in vars(_derivatives).items() if id(v) in derivative}

    def on_one(v: Any) -> bool:
        """A custom derivative, one of those functions, or a function calling one (``_derivatives.divide``)."""
        if isinstance(v, _CUSTOM) or id(v) in derivative:
            return True
        code = getattr(v, "__code__", None)
        called = {n for c in _codes(code) for n in c.co_names} if code is not None else set()
        return "_derivatives" in called and bool(called & names)

    ops = {op for op, fn in OPS.items() if any(on_one(h) for h in _held(fn))}
    for module in _MODULES.values():
        for table in vars(module).values():
            if isinstance(table, dict):
                ops |= {op for op, fn in table.items() if isinstance(op, str) and op in OPS and on_one(fn)}
    return ops


# -- the cases -----------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Case:
    """``op`` in a loop body: ``body(x, i, t)`` with ``i`` the loop's counter (int32) and ``t`` it as a
    float; ``covers``: the custom derivatives its gradient runs (:func:`_definitions`' names)."""

    op: str
    body: Callable[[Any, Any, Any], Any]
    x: np.ndarray
    covers: tuple[str, ...]
    tol: float = 2e-5
    no_entry: bool = False  # TensorFlow's registry has no gradient: both raise its LookupError


def _f32(*shape: int, low: float = -1.0, high: float = 1.0, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


_X = np.float32([0.3, -1.4, 2.2, 0.8])


def _custom_gradient_op(x: Any) -> Any:
    """An identity whose gradient TensorFlow takes from the ``tf.custom_gradient`` (an ``IdentityN``)."""
    @tf.custom_gradient
    def clipped(y: Any) -> Any:
        return tf.identity(y), lambda dy: 3 * tf.clip_by_value(dy * y, -0.5, 0.5)
    return clipped(x)


def _crop(x: Any, t: Any) -> Any:
    boxes = tf.stack([tf.stack([0.1 + 0.05 * t, 0.2, 0.8 + 0.1 * x[0, 0], 0.9])])
    return tf.image.crop_and_resize(x[None, :, :, None] * (1 + t), boxes, [0], [3, 3])


def _ctc(x: Any, t: Any) -> Any:
    labels = tf.SparseTensor(tf.constant([[0, 0], [0, 1], [1, 0]], tf.int64), tf.constant([1, 2, 1], tf.int32), [2, 2])
    return tf.compat.v1.nn.ctc_loss(labels, x * (1 + 0.1 * t), tf.constant([4, 3], tf.int32))


_D = "_derivatives."
CASES = [
    Case("Sqrt", lambda x, i, t: tf.sqrt(x * x + 0.5 + t), _X, (_D + "_SQRT",)),
    Case("Rsqrt", lambda x, i, t: tf.math.rsqrt(x * x + 0.5 + t), _X, (_D + "_RSQRT",)),
    Case("Reciprocal", lambda x, i, t: tf.math.reciprocal(x + 3 + t), _X, (_D + "_RECIPROCAL",)),
    Case("Inv", lambda x, i, t: tf.raw_ops.Inv(x=x + 3 + t), _X, (_D + "_RECIPROCAL",)),
    Case("Abs", lambda x, i, t: tf.abs(x - t), _X, (_D + "_ABS",)),
    Case("Relu", lambda x, i, t: tf.nn.relu(x - t), _X, (_D + "_RELU",)),
    Case("Relu6", lambda x, i, t: tf.nn.relu6(3 * x + t), _X, (_D + "_RELU6",)),
    Case("Elu", lambda x, i, t: tf.nn.elu(x - t), _X, (_D + "_ELU",)),
    Case("Selu", lambda x, i, t: tf.nn.selu(x - t), _X, (_D + "_SELU",)),
    Case("Acosh", lambda x, i, t: tf.math.acosh(x * x + 1.5 + t), _X, (_D + "_ACOSH",)),
    Case("Maximum", lambda x, i, t: tf.maximum(x, t - 1), _X, (_D + "_MAXIMUM",)),
    Case("Minimum", lambda x, i, t: tf.minimum(x, t - 1), _X, (_D + "_MINIMUM",)),
    Case("Xlogy", lambda x, i, t: tf.math.xlogy(x, x * x + 1 + t), _X, (_D + "_XLOGY",)),
    Case("Xlog1py", lambda x, i, t: tf.math.xlog1py(x, x * x + t), _X, (_D + "_XLOG1PY",)),
    Case("Pow", lambda x, i, t: tf.pow(x * x + 1, 0.5 * t + x), _X, (_D + "_POW",)),
    Case("RealDiv", lambda x, i, t: x / (x * x + 1 + t), _X, (_D + "_DIVIDE",)),
    Case("Div", lambda x, i, t: tf.raw_ops.Div(x=x, y=x * x + 1 + t), _X, (_D + "_DIVIDE",)),
    Case("DivNoNan", lambda x, i, t: tf.math.divide_no_nan(x + t, x * x * tf.cast(x > 0, tf.float32)), _X,
         (_D + "_DIVIDE",)),
    Case("BesselI0", lambda x, i, t: tf.math.special.bessel_i0(x * (1 + t)), _X, (_D + "bessel_i0",)),
    Case("BesselI1", lambda x, i, t: tf.math.special.bessel_i1(x * (1 + t)), _X, (_D + "bessel_i1",)),
    Case("Igamma", lambda x, i, t: tf.math.igamma(x * x + 1, x + 2 + t), _X, ("_ops_special._igamma",), tol=1e-4),
    Case("Igammac", lambda x, i, t: tf.math.igammac(x * x + 1, x + 2 + t), _X, ("_ops_special._igammac",), tol=1e-4),
    Case("Ndtri", lambda x, i, t: tf.math.ndtri(tf.sigmoid(x - 0.5 * t)), _X, ("_ops_special._ndtri",), tol=1e-4),
    Case("Cumprod", lambda x, i, t: tf.math.cumprod(x + t), _X, ("_ops_tf2jax._cumprod",)),
    Case("TensorScatterUpdate", lambda x, i, t: tf.tensor_scatter_nd_update(
        x * (1 + t), tf.reshape(tf.math.floormod(i, 4), [1, 1]), x[1:2] * 2), _X, ("_ops_tf2jax._scatter_update",)),
    Case("RGBToHSV", lambda x, i, t: tf.image.rgb_to_hsv(tf.sigmoid(x + 0.3 * t)), _f32(2, 3, seed=1),
         ("_ops_color._rgb_to_hsv",), tol=1e-4),
    Case("MatrixSquareRoot", lambda x, i, t: tf.linalg.sqrtm(tf.matmul(x, x, transpose_b=True) + (1 + t) * tf.eye(3)),
         _f32(3, 3, seed=2), ("_ops_linalg._sqrtm",), tol=1e-3),
    Case("TridiagonalSolve", lambda x, i, t: tf.linalg.tridiagonal_solve(
        x + tf.constant([[0.0], [4.0], [0.0]]) * (1 + t), tf.ones([4, 1])), _f32(3, 4, seed=3),
         ("_ops_tridiagonal._solve",), tol=1e-4),
    Case("ImageProjectiveTransformV3", lambda x, i, t: tf.raw_ops.ImageProjectiveTransformV3(
        images=x[None, :, :, None] * (1 + t), transforms=tf.stack([[1.0, 0.1 * t, 0.5, 0.0, 1.0, -0.3, 0.0, 0.0]]),
        output_shape=[4, 4], fill_value=0.0, interpolation="BILINEAR", fill_mode="REFLECT"), _f32(4, 4, seed=4),
         ("_ops_projective._projective",), tol=1e-4),
    Case("ScaleAndTranslate", lambda x, i, t: tf.raw_ops.ScaleAndTranslate(
        images=x[None, :, :, None] * (1 + t), size=[6, 5], scale=[1.5, 1.25], translation=[0.0, 0.5]),
         _f32(4, 4, seed=5), ("_ops_resize._scale_and_translate.<locals>.resize",), tol=1e-4),
    Case("CropAndResize", lambda x, i, t: _crop(x, t), _f32(4, 4, seed=6), ("_ops_image.stored",), tol=1e-4),
    Case("StatelessRandomGammaV3", lambda x, i, t: tf.random.stateless_gamma([2, 4], tf.stack([i, 5]), x * x + 0.5),
         _X, ("_ops_gamma._gamma.<locals>.sample",), tol=1e-4),
    Case("DynamicStitch", lambda x, i, t: tf.dynamic_stitch([[0, 2], [1, 2]], [x[:2] * (1 + t), x[2:] * 2]), _X,
         ("_ops_sizes._stitched",)),
    Case("UnsortedSegmentProd", lambda x, i, t: tf.math.unsorted_segment_prod(
        x + t, tf.stack([tf.math.floormod(i, 2), 0, 1, 1]), 2), _X, ("_ops_segments._traced_prod",)),
    Case("CTCLoss", lambda x, i, t: _ctc(x, t), _f32(4, 2, 3, seed=7), ("_ops_ctc._ctc", "_ops_ctc._prevented"),
         tol=1e-4),
    Case("IdentityN", lambda x, i, t: _custom_gradient_op(x * (1 + t)), _X,
         ("_custom_gradients._identity.<locals>.region",)),
    Case("AdjustContrastv2", lambda x, i, t: tf.image.adjust_contrast(x[None, :, :, None] + t, 2.0),
         _f32(3, 3, seed=8), ("_no_gradient._unregistered.<locals>.identity",), no_entry=True),
]
_BY_OP = {c.op: c for c in CASES}


def test_the_cases_cover_every_custom_derivative() -> None:
    """Every custom derivative of the importer and every elementwise op on one has a case (add one for a
    new one: a program whose op runs in a loop body, its input depending on the counter and the argument)."""
    definitions = _definitions()
    covered = {k for c in CASES for k in c.covers}
    assert definitions - covered == set(), f"custom derivatives without a case: {sorted(definitions - covered)}"
    assert covered - definitions == set(), f"cases of custom derivatives that are gone: {sorted(covered - definitions)}"
    ops = _elementwise_ops()
    assert ops - set(_BY_OP) == set(), f"ops on a custom derivative without a case: {sorted(ops - set(_BY_OP))}"
    assert all(c.op in OPS or c.op == "IdentityN" for c in CASES)


# -- the checks ----------------------------------------------------------------------------------------
@contextlib.contextmanager
def _recorded() -> Iterator[set[str]]:
    """The custom derivatives called meanwhile (their names, :func:`_key`)."""
    hits: set[str] = set()
    originals = {cls: cls.__call__ for cls in _CUSTOM}

    def recording(cls: Any) -> Any:
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            hits.add(_key(self))
            return originals[cls](self, *args, **kwargs)
        return call

    try:
        for cls in _CUSTOM:
            cls.__call__ = recording(cls)
        yield hits
    finally:
        for cls, call in originals.items():
            cls.__call__ = call


def _weighted(y: Any) -> Any:
    """A scalar of ``y`` with unequal weights (each element's gradient differs)."""
    return tf.reduce_sum(y * tf.cos(tf.reshape(tf.cast(tf.range(tf.size(y)), y.dtype), tf.shape(y))))


def _loss(case: Case, form: str) -> Callable[[Any], Any]:
    """``case``'s op in a loop body, three trips: ``for i in tf.range(3)`` (autograph) or a ``tf.scan``."""
    def trip(x: Any, i: Any) -> Any:
        return _weighted(case.body(x, i, tf.cast(i, tf.float32)))

    def loss(x: Any) -> Any:
        if form == "scan":
            return tf.scan(lambda total, i: total + trip(x, i), tf.range(_TRIPS), tf.zeros([]))[-1]
        total = tf.zeros([])
        for i in tf.range(_TRIPS):
            total += trip(x, i)
        return total
    return loss


def _tape(f: Any, x: np.ndarray) -> np.ndarray:
    watched = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(watched)
        value = f(watched)
    return tape.gradient(value, watched).numpy()


def _run(case: Case, form: str) -> None:
    """``jax.grad`` of the import (eagerly, under ``jit``) against the tape's, the imported train step against
    TensorFlow's; the op in the graph, the custom derivatives the case claims run by ``jax.grad``. Form
    ``variable``: the ``for`` loop, the op's input a ``tf.Variable`` (plus the argument, zeros)."""
    variable = tf.Variable(case.x, name="v") if form == "variable" else None
    loss = _loss(case, form) if variable is None else (lambda x: _loss(case, "range")(x + variable))
    x = np.zeros_like(case.x) if variable is not None else case.x
    f = tf.function(loss, input_signature=[tf.TensorSpec(case.x.shape, tf.float32)])
    assert case.op in op_types(f)
    watched = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(watched)
        value = f(watched)
    want = tape.gradient(value, watched if variable is None else variable).numpy()
    fn, params = jta.import_function(f, x)
    if variable is None:
        grad = jax.grad(lambda x: fn(params, x))
    else:
        (name,) = params
        grad = jax.grad(lambda v: fn({name: v}, x))  # (in the variable, at its value; the argument zeros)
    with _recorded() as hits:
        got = grad(case.x)
    assert set(case.covers) <= hits, f"the gradient did not run {sorted(set(case.covers) - hits)}"
    for g, what in ((got, "jax.grad"), (jax.jit(grad)(case.x), "jit(jax.grad)")):
        np.testing.assert_allclose(g, want, rtol=case.tol, atol=case.tol, err_msg=what)
    step = tape_step(loss, [x], (0,) if variable is None else (), [] if variable is None else [variable])
    jax_step, step_params = jta.import_function(step, x)
    for g, w in zip(jax.jit(jax_step)(step_params, x), step(x), strict=True):
        np.testing.assert_allclose(g, w.numpy(), rtol=case.tol, atol=case.tol, err_msg="train step")


def _refused(case: Case, form: str) -> None:
    """TensorFlow's registry has no gradient for the op: the tape, ``jax.grad`` (eagerly, under ``jit``) and
    the train step's trace all raise TensorFlow's ``LookupError``."""
    loss = _loss(case, form)
    f = tf.function(loss, input_signature=[tf.TensorSpec(case.x.shape, tf.float32)])
    # (TensorFlow's text in a graph: "No gradient defined for operation'while/...' (op type: ...)"; jta's, its
    # eager tape's, which names no node: jta's guard knows the op's type only)
    graph_text, text = rf"\(op type: {case.op}\)", f"gradient registry has no entry for: {case.op}"
    with pytest.raises(LookupError, match=graph_text):
        _tape(f, case.x)
    with pytest.raises(Exception, match=graph_text) as traced:  # (autograph's StagingError around it)
        tape_step(loss, [case.x], (0,)).get_concrete_function()
    assert isinstance(traced.value, LookupError) or "LookupError" in str(traced.value)
    fn, params = jta.import_function(f, case.x)
    grad = jax.grad(lambda x: fn(params, x))
    for g in (grad, jax.jit(grad)):
        with _recorded() as hits, pytest.raises(LookupError, match=text):
            g(case.x)
        assert set(case.covers) <= hits


# The default run: the custom derivatives a function defines for each call (their rules may close over
# what that call traced, as the gamma draws' did), in the ``for`` loop, but the gamma draws' (whose loops
# tests/test_tf2_random_gamma.py's test_gradient_of_draws_seeded_in_a_loop runs by default); each case costs
# seconds (the loop's gradient compiles), so the others, and the ``tf.scan`` and variable forms, run under
# ``--long``.
_DEFAULT = {c.op for c in CASES if any("<locals>" in k for k in c.covers)} - {"StatelessRandomGammaV3",
                                                                               "ScaleAndTranslate"}  # (6 s)


@pytest.mark.parametrize("op,form", [
    pytest.param(c.op, form, marks=() if c.op in _DEFAULT and form == "range" else pytest.mark.long_only)
    for c in CASES for form in ("range", "scan", "variable") if not (c.no_entry and form == "variable")])
def test_each_custom_derivative_in_a_loop(op: str, form: str) -> None:
    """Each case in a loop body of each form: ``jax.grad`` (eagerly, under ``jit``) and the train step as
    TensorFlow's, or TensorFlow's ``LookupError`` where its registry has no gradient for the op."""
    case = _BY_OP[op]
    if case.no_entry:
        _refused(case, form)
    else:
        _run(case, form)
