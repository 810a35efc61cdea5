"""The ordinary (stateless) TensorFlow ops of an imported graph, as numpy-or-JAX functions.

Each entry of :data:`OPS` maps an op type to ``fn(node, args) -> list of outputs``. When every
input is a numpy array (a constant, or shape arithmetic on static shapes), the op computes in
numpy, so its result stays static under ``jit`` and can become a shape, an index or a trip
count; otherwise it computes with ``jax.numpy``. Shapes of traced values are static in JAX, so
``Shape``/``Size``/``Rank`` always give numpy.

jta writes this table itself instead of calling tf2jax's handlers (``tf2jax._src.ops``): those
import TensorFlow at module level (the returned function would keep a TensorFlow import), read
attributes from ``NodeDef`` protos, and lack the gradient-graph ops these graphs consist of
(``SigmoidGrad``, ``TanhGrad``, ``BiasAddGrad``, ``BroadcastGradientArgs``, ``ConcatOffset``,
``ShapeN``, ``DynamicStitch``, ``StridedSliceGrad``, ``ControlTrigger``, ...).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, Optional, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from .. import errors
from .._core import capacities
from . import _derivatives, _folding, _no_gradient, _ops_checks
from ._messages import GraphError
from ._nodes import Node

Op = Callable[[Node, list[Any]], list[Any]]
OPS: dict[str, Op] = {}


def is_static(v: Any) -> bool:
    """A numpy value (known while tracing)."""
    return isinstance(v, (np.ndarray, np.generic))


def xp_of(*args: Any) -> Any:
    return np if all(is_static(a) for a in args) else jnp


def as_numpy(v: Any) -> Any:
    return np.asarray(v) if isinstance(v, (np.generic, bool, int, float)) else v


def run_op(node: Node, args: list[Any]) -> list[Any]:
    """``OPS[node.op](node, args)``. An input the op's NumPy or JAX code rejects (a negative dimension, an
    axis or a permutation that does not fit: ``ValueError``, ``TypeError``, ``IndexError``, a division by a
    zero dimension) is bad input
    to TensorFlow's kernel too: it fails with TensorFlow's class, ``InvalidArgumentError``, naming the
    node. (An op that checks an input itself gives TensorFlow's text; tracer errors pass through.) An op
    of small static inputs runs now (:func:`._folding.folded`); ``jax.grad`` goes through it as
    TensorFlow's gradient registry says (:mod:`._no_gradient`)."""
    args = _no_gradient.guard(node.op, args)
    with rejected_as_invalid(node):
        folded = _folding.folded(OPS[node.op], node, args)
        return folded if folded is not None else OPS[node.op](node, args)


@contextlib.contextmanager
def rejected_as_invalid(node: Node) -> Iterator[None]:
    """Run ``node``'s code: an input its NumPy or JAX code rejects (``ValueError``, ``TypeError``,
    ``IndexError``, ``ArithmeticError``) fails with TensorFlow's ``InvalidArgumentError``, naming the node
    (JAX's tracer errors pass through)."""
    try:
        yield
    except (ValueError, TypeError, IndexError, ArithmeticError) as error:
        if isinstance(error, jax.errors.JAXTypeError):
            raise
        raise errors.InvalidArgumentError(f"Node {node.name} ({node.op}): {error}") from error


def static_value(node: Node, v: Any, what: str) -> np.ndarray:
    """``v`` as numpy where the op needs it known (an axis, a shape, a count: its output's shape depends
    on it): a constant, shape arithmetic, or a concrete argument of an eager call, which runs each op
    as TensorFlow does; a traced value (under ``jit``/``grad``) raises ``GraphError.NOT_STATIC``."""
    known = _ops_checks.known_now(v)
    if known is None:
        GraphError.NOT_STATIC.raise_(node=node.name, op=node.op, what=what)
    return known


def learned_size(node: Node, size: Any, what: str, first: int, most: Optional[int] = None, part: int = 0) -> int:
    """The row count ``size`` (a traced scalar: the data decides it) as an int: under ``jta.checked``, what
    it learned at run time (``first`` before a run told it, ``most`` the largest it can be where the shapes
    tell: :func:`jta._core.capacities.learned_rows`); elsewhere (a bare ``jit``, ``grad``) refused with
    ``GraphError.NOT_STATIC``, which names ``jta.checked``. ``part``: which of the node's sizes this is,
    where it has several (one size per node, ``what`` and ``part`` at a call site, however often traced)."""
    rows = capacities.learned_rows(size, node.name, stack=False, first=first, most=most, key=(id(node), what, part))
    if rows is None:
        GraphError.NOT_STATIC.raise_(node=node.name, op=node.op, what=what)
    return rows


def learned_value(node: Node, v: Any, what: str) -> np.ndarray:
    """:func:`static_value`, and under ``jta.checked`` a traced ``v`` learned at run time: each entry a
    size it compiles for (:func:`learned_size`, one compilation per value; its first guess 1)."""
    known = _ops_checks.known_now(v)
    if known is not None:
        return known
    flat, what = jnp.reshape(v, -1), f"{what} (jta.checked learns it at run time)"
    learned = [learned_size(node, flat[k], what, 1, part=k) for k in range(flat.shape[0])]
    return np.reshape(np.asarray(learned, np.dtype(v.dtype)), np.shape(v))


F = TypeVar("F", bound=Callable[..., Any])


def registrar(table: dict[str, F]) -> Callable[..., Callable[[F], F]]:
    """A decorator factory for an op table: ``@reg("OpA", "OpB")`` files the function under each name."""
    def reg(*names: str) -> Callable[[F], F]:
        def deco(fn: F) -> F:
            for n in names:
                table[n] = fn
            return fn
        return deco
    return reg


_reg = registrar(OPS)


def simple(names: tuple[str, ...], fn: Callable[..., Any]) -> None:
    for n in names:
        OPS[n] = lambda node, args, fn=fn: [as_numpy(_quietly(fn, xp_of(*args), *args))]


def _quietly(fn: Callable[..., Any], xp: Any, *args: Any) -> Any:
    """``fn(xp, *args)``; in numpy without its floating-point warnings (``log(0)``, ``0 * inf``), which
    TensorFlow and JAX do not give either."""
    if xp is not np:
        return fn(xp, *args)
    with np.errstate(all="ignore"):
        return fn(xp, *args)


def _cast(v: Any, dtype: Any) -> Any:
    # A traced value gets the dtype JAX has (int64 is int32 without x64), without JAX's truncation warning.
    return np.asarray(v).astype(dtype) if is_static(v) else jnp.asarray(v).astype(jax.dtypes.canonicalize_dtype(dtype))


# -- elementwise ------------------------------------------------------------------------------
_BINARY: dict[str, Callable[..., Any]] = {
    "Add": lambda xp, a, b: xp.add(a, b), "AddV2": lambda xp, a, b: xp.add(a, b),
    "Sub": lambda xp, a, b: xp.subtract(a, b), "Mul": lambda xp, a, b: xp.multiply(a, b),
    "RealDiv": _derivatives.divide, "Maximum": _derivatives.maximum,
    "Minimum": _derivatives.minimum, "Pow": _derivatives.power,
    "FloorMod": lambda xp, a, b: xp.mod(a, b), "FloorDiv": lambda xp, a, b: xp.floor_divide(a, b),
    "SquaredDifference": lambda xp, a, b: xp.square(xp.subtract(a, b)),
    "Equal": lambda xp, a, b: xp.equal(a, b), "NotEqual": lambda xp, a, b: xp.not_equal(a, b),
    "Less": lambda xp, a, b: xp.less(a, b), "LessEqual": lambda xp, a, b: xp.less_equal(a, b),
    "Greater": lambda xp, a, b: xp.greater(a, b), "GreaterEqual": lambda xp, a, b: xp.greater_equal(a, b),
    "LogicalAnd": lambda xp, a, b: xp.logical_and(a, b), "LogicalOr": lambda xp, a, b: xp.logical_or(a, b),
    "SigmoidGrad": lambda xp, y, dy: dy * y * (1 - y), "TanhGrad": lambda xp, y, dy: dy * (1 - y * y),
    "ReluGrad": lambda xp, dy, x: xp.where(x > 0, dy, xp.zeros_like(dy)),
    "SqrtGrad": _derivatives.sqrt_grad, "RsqrtGrad": _derivatives.rsqrt_grad,
    "ReciprocalGrad": _derivatives.reciprocal_grad, "InvGrad": _derivatives.reciprocal_grad,
}
_UNARY: dict[str, Callable[..., Any]] = {
    "Neg": lambda xp, x: xp.negative(x), "Reciprocal": _derivatives.reciprocal,
    "Inv": _derivatives.reciprocal, "Square": lambda xp, x: xp.square(x), "Sqrt": _derivatives.sqrt,
    "Rsqrt": _derivatives.rsqrt, "Exp": lambda xp, x: xp.exp(x), "Log": lambda xp, x: xp.log(x),
    "Abs": _derivatives.absolute, "Sign": lambda xp, x: xp.sign(x), "LogicalNot": lambda xp, x: xp.logical_not(x),
    "Tanh": lambda xp, x: xp.tanh(x), "Relu": _derivatives.relu,
    "Sigmoid": lambda xp, x: jax.nn.sigmoid(x) if xp is jnp else (1 / (1 + np.exp(-x))).astype(x.dtype),
    "Softplus": lambda xp, x: jax.nn.softplus(x) if xp is jnp else np.logaddexp(0, x).astype(x.dtype),
    "Floor": lambda xp, x: xp.floor(x), "Ceil": lambda xp, x: xp.ceil(x),
    "Sin": lambda xp, x: xp.sin(x), "Cos": lambda xp, x: xp.cos(x),
    "ZerosLike": lambda xp, x: xp.zeros_like(x), "OnesLike": lambda xp, x: xp.ones_like(x),
}
for _name, _fn in _BINARY.items():
    simple((_name,), _fn)
for _name, _fn in _UNARY.items():
    simple((_name,), _fn)
simple(("AddN",), lambda xp, *xs: sum(xs[1:], xs[0]))


@_reg("Identity", "Snapshot", "PreventGradient", "PlaceholderWithDefault")
def _identity(node: Node, args: list[Any]) -> list[Any]:
    return [args[0]]


@_reg("EnsureShape")
def _ensure_shape(node: Node, args: list[Any]) -> list[Any]:
    """``args[0]``, after TensorFlow's check that its shape is the node's."""
    _ops_checks.ensure_shape(node, args[0])
    return [args[0]]


@_reg("CheckNumerics")
def _check_numerics(node: Node, args: list[Any]) -> list[Any]:
    """``args[0]``, after TensorFlow's check that it holds no NaN and no infinity."""
    _ops_checks.numerics(node, args[0], node.attr("message", b"").decode() if isinstance(
        node.attr("message", b""), bytes) else str(node.attr("message", "")))
    return [args[0]]


@_reg("Assert")
def _assert(node: Node, args: list[Any]) -> list[Any]:
    """TensorFlow's ``Assert``: an error when the condition (``args[0]``) is false."""
    _ops_checks.assertion(node, args[0], args[1:], int(node.attr("summarize", 3)))
    return []


@_reg("IdentityN")
def _identity_n(node: Node, args: list[Any]) -> list[Any]:
    return list(args)


@_reg("StopGradient")
def _stop_gradient(node: Node, args: list[Any]) -> list[Any]:
    return [args[0] if is_static(args[0]) else jax.lax.stop_gradient(args[0])]


@_reg("NoOp", "ControlTrigger")
def _nothing(node: Node, args: list[Any]) -> list[Any]:
    return []


@_reg("Const")
def _const(node: Node, args: list[Any]) -> list[Any]:
    return [np.asarray(node.attr("value"))]


@_reg("Cast")
def _cast_op(node: Node, args: list[Any]) -> list[Any]:
    return [_cast(args[0], node.attr("DstT"))]


# -- linear algebra -------------------------------------------------------------------------
def _product_shapes(node: Node, a: tuple[int, ...], b: tuple[int, ...], flags: tuple[bool, bool], batch: bool) -> None:
    """``MatMul``'s and ``BatchMatMul``'s shape checks, in their kernels' order and texts (shapes as given,
    before any transpose; ``flags``: ``transpose_a``/``adj_x`` and the other)."""
    if batch:
        _ops_checks.matrix_ranks(node, a, b)
        _ops_checks.matrix_batches(node, a, b)
    for k, shape in enumerate((a, b)):  # (MatMul's text: without the rank)
        if len(shape) != 2 and not batch:
            _ops_checks.invalid(node, f"In[{k}] ndims must be >= 2")
    if a[-2 if flags[0] else -1] != b[-1 if flags[1] else -2]:
        _ops_checks.invalid(node, f"Matrix size-incompatible: In[0]: {_ops_checks.shape_text(a)}, In[1]: "
                                  f"{_ops_checks.shape_text(b)}" + (f" {int(flags[0])} {int(flags[1])}" if batch else ""))


@_reg("MatMul")
def _matmul(node: Node, args: list[Any]) -> list[Any]:
    a, b = args
    _product_shapes(node, np.shape(a), np.shape(b), (bool(node.attr("transpose_a")), bool(node.attr("transpose_b"))),
                    batch=False)
    xp = xp_of(a, b)
    a = a.T if node.attr("transpose_a") else a
    b = b.T if node.attr("transpose_b") else b
    return [as_numpy(xp.matmul(a, b))]


@_reg("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")
def _batch_matmul(node: Node, args: list[Any]) -> list[Any]:
    a, b = args
    _product_shapes(node, np.shape(a), np.shape(b), (bool(node.attr("adj_x")), bool(node.attr("adj_y"))), batch=True)
    xp = xp_of(a, b)
    a = xp.swapaxes(xp.conj(a), -1, -2) if node.attr("adj_x") else a
    b = xp.swapaxes(xp.conj(b), -1, -2) if node.attr("adj_y") else b
    return [as_numpy(xp.matmul(a, b))]


def _channel_axis(node: Node, ndim: int) -> int:
    return 1 if str(node.attr("data_format", "NHWC")).startswith("NC") and ndim > 2 else ndim - 1


@_reg("BiasAdd", "BiasAddV1")
def _bias_add(node: Node, args: list[Any]) -> list[Any]:
    x, b = args
    axis = _channel_axis(node, np.ndim(x))
    shape = [1] * np.ndim(x)
    shape[axis] = -1
    return [as_numpy(xp_of(x, b).add(x, b.reshape(shape)))]


@_reg("BiasAddGrad")
def _bias_add_grad(node: Node, args: list[Any]) -> list[Any]:
    (dy,) = args
    axis = _channel_axis(node, np.ndim(dy))
    return [as_numpy(xp_of(dy).sum(dy, axis=tuple(a for a in range(np.ndim(dy)) if a != axis)))]


# -- shapes -----------------------------------------------------------------------------------
@_reg("Shape")
def _shape(node: Node, args: list[Any]) -> list[Any]:
    return [np.asarray(np.shape(args[0]), node.attr("out_type", np.dtype("int32")))]


@_reg("ShapeN")
def _shape_n(node: Node, args: list[Any]) -> list[Any]:
    return [np.asarray(np.shape(a), node.attr("out_type", np.dtype("int32"))) for a in args]


@_reg("Size")
def _size(node: Node, args: list[Any]) -> list[Any]:
    return [np.asarray(np.size(args[0]), node.attr("out_type", np.dtype("int32")))]


@_reg("Rank")
def _rank(node: Node, args: list[Any]) -> list[Any]:
    return [np.asarray(np.ndim(args[0]), np.int32)]


@_reg("Reshape")
def _reshape(node: Node, args: list[Any]) -> list[Any]:
    x, shape = args
    dims = _ops_checks.reshape(node, learned_value(node, shape, "the shape"), int(np.size(x)))
    return [as_numpy(xp_of(x).reshape(x, dims))]


@_reg("Fill")
def _fill(node: Node, args: list[Any]) -> list[Any]:
    dims, value = args
    dims = _ops_checks.dimensions(node, learned_value(node, dims, "the dims"))
    return [as_numpy(xp_of(value).full(dims, value, dtype=np.asarray(value).dtype if is_static(value) else value.dtype))]


@_reg("ExpandDims")
def _expand_dims(node: Node, args: list[Any]) -> list[Any]:
    x, axis = args
    axis, rank = np.reshape(static_value(node, axis, "the axis"), -1), np.ndim(x)  # (any shape of one value)
    if axis.size != 1:
        _ops_checks.invalid(node, "'dim' must be a tensor with a single value")
    axis = int(axis[0])
    _ops_checks.axis_in(node, axis, rank + 1, f"Tried to expand dim index {axis} for tensor with {rank} dimensions.")
    return [as_numpy(xp_of(x).expand_dims(x, axis))]


@_reg("Squeeze")
def _squeeze(node: Node, args: list[Any]) -> list[Any]:
    (x,) = args
    dims = node.attr("squeeze_dims") or None
    return [as_numpy(xp_of(x).squeeze(x, axis=None if dims is None else tuple(dims)))]


@_reg("Transpose")
def _transpose(node: Node, args: list[Any]) -> list[Any]:
    x, perm = args
    return [as_numpy(xp_of(x).transpose(x, _ops_checks.permutation(node, static_value(node, perm, "perm"), np.ndim(x))))]


@_reg("InvertPermutation")
def _invert_permutation(node: Node, args: list[Any]) -> list[Any]:
    perm = _ops_checks.known_or_traced(args[0])[0]
    _ops_checks.invertible_permutation(node, perm)
    if is_static(perm):
        return [np.argsort(perm).astype(perm.dtype)]
    # a permutation computed at run time (the sort of run-time indices SparseReorder's gradient inverts)
    n = perm.shape[0]
    return [jnp.zeros(n, perm.dtype).at[perm].set(jnp.arange(n, dtype=perm.dtype), mode="drop")]


@_reg("Tile")
def _tile(node: Node, args: list[Any]) -> list[Any]:
    x, reps = args
    return [as_numpy(xp_of(x).tile(x, _ops_checks.multiples(node, learned_value(node, reps, "multiples"), np.ndim(x))))]


@_reg("Pack")
def _pack(node: Node, args: list[Any]) -> list[Any]:
    return [as_numpy(xp_of(*args).stack(args, axis=node.attr("axis", 0)))]


@_reg("Unpack")
def _unpack(node: Node, args: list[Any]) -> list[Any]:
    (x,) = args
    axis = node.attr("axis", 0)
    xp = xp_of(x)
    return [as_numpy(xp.take(x, k, axis=axis)) for k in range(np.shape(x)[axis])]


@_reg("ConcatV2", "Concat")
def _concat(node: Node, args: list[Any]) -> list[Any]:
    axis, values = (args[-1], args[:-1]) if node.op == "ConcatV2" else (args[0], args[1:])
    axis = _ops_checks.concat_axis(node, int(static_value(node, axis, "the axis")), [np.shape(v) for v in values])
    return [as_numpy(xp_of(*values).concatenate(values, axis=axis))]


@_reg("ConcatOffset")
def _concat_offset(node: Node, args: list[Any]) -> list[Any]:
    axis = int(static_value(node, args[0], "the axis"))
    shapes = [static_value(node, s, "the shapes") for s in args[1:]]
    axis = _ops_checks.concat_offset(node, axis, shapes)
    offsets, total = [], 0
    for s in shapes:
        o = np.zeros_like(s)
        o[axis] = total
        offsets.append(o)
        total += int(s[axis])
    return offsets


@_reg("Split")
def _split(node: Node, args: list[Any]) -> list[Any]:
    axis, x = args
    axis = _ops_checks.split_axis(node, int(static_value(node, axis, "the axis")), np.shape(x), node.attr("num_split"))
    return [as_numpy(v) for v in xp_of(x).split(x, node.attr("num_split"), axis=axis)]


@_reg("SplitV")
def _split_v(node: Node, args: list[Any]) -> list[Any]:
    x, sizes, axis = args
    axis = int(static_value(node, axis, "the axis")) % np.ndim(x)
    sizes = _ops_checks.split_sizes(node, static_value(node, sizes, "size_splits"), int(node.attr("num_split")),
                                    np.shape(x)[axis])
    return [as_numpy(v) for v in xp_of(x).split(x, np.cumsum(sizes)[:-1].tolist(), axis=axis)]


@_reg("BroadcastGradientArgs")
def _broadcast_gradient_args(node: Node, args: list[Any]) -> list[Any]:
    s0, s1 = (static_value(node, a, "the shapes") for a in args)
    n = max(len(s0), len(s1))
    a = np.concatenate([np.ones(n - len(s0), s0.dtype), s0])
    b = np.concatenate([np.ones(n - len(s1), s1.dtype), s1])
    out = _ops_checks.broadcast(node, tuple(int(v) for v in s0), tuple(int(v) for v in s1))
    r0 = [k for k in range(n) if a[k] == 1 and out[k] != 1 or (a[k] == 1 and b[k] == 1)]
    r1 = [k for k in range(n) if b[k] == 1 and out[k] != 1 or (a[k] == 1 and b[k] == 1)]
    return [np.asarray(r0, s0.dtype), np.asarray(r1, s0.dtype)]


# -- reductions, selection, gathers -----------------------------------------------------------
def _lowest_or_highest(dtype: Any, lowest: bool) -> Any:
    """The identity of a max (the lowest value of ``dtype``: ``-inf`` for floats) or of a min."""
    if np.issubdtype(dtype, np.floating):
        return -np.inf if lowest else np.inf
    if dtype == np.bool_:
        return not lowest
    info = np.iinfo(dtype)
    return info.min if lowest else info.max


def _reduction(fn_name: str) -> Op:
    def op(node: Node, args: list[Any]) -> list[Any]:
        x, axes = args
        axes = _ops_checks.reduction_axes(node, static_value(node, axes, "the axes"), np.ndim(x))
        xp = xp_of(x)
        keep = bool(node.attr("keep_dims", False))
        if fn_name in ("max", "min") and 0 in [np.shape(x)[a] for a in axes]:  # (TF: the identity, -inf or +inf)
            return [as_numpy(getattr(xp, fn_name)(x, axis=axes, keepdims=keep, initial=_lowest_or_highest(
                jnp.result_type(x), fn_name == "max")))]
        out = getattr(xp, fn_name)(x, axis=axes, keepdims=keep)
        return [as_numpy(out.astype(x.dtype) if fn_name in ("sum", "mean", "prod") else out)]
    return op


for _name, _fn_name in (("Sum", "sum"), ("Mean", "mean"), ("Prod", "prod"), ("Max", "max"), ("Min", "min"),
                        ("All", "all"), ("Any", "any")):
    OPS[_name] = _reduction(_fn_name)


@_reg("EuclideanNorm")
def _euclidean_norm(node: Node, args: list[Any]) -> list[Any]:
    """``tf.math.reduce_euclidean_norm``: the square root of the sum of ``|x|**2`` over the axes."""
    x, axes = args
    axes = _ops_checks.reduction_axes(node, static_value(node, axes, "the axes"), np.ndim(x))
    xp = xp_of(x)
    squares = xp.abs(x) ** 2 if xp.iscomplexobj(x) else x * x
    out = xp.sqrt(xp.sum(squares, axis=axes, keepdims=bool(node.attr("keep_dims", False))))
    return [as_numpy(out.astype(xp.asarray(x).dtype))]


@_reg("Select")
def _select(node: Node, args: list[Any]) -> list[Any]:
    c, t, e = args
    if np.ndim(c) == 1 and np.ndim(t) > 1:
        c = c.reshape((-1,) + (1,) * (np.ndim(t) - 1))
    return [as_numpy(xp_of(c, t, e).where(c, t, e))]


@_reg("SelectV2")
def _select_v2(node: Node, args: list[Any]) -> list[Any]:
    return [as_numpy(xp_of(*args).where(*args))]


@_reg("GatherV2", "Gather")
def _gather(node: Node, args: list[Any]) -> list[Any]:
    """``params`` indexed along ``axis`` by ``indices``. With ``batch_dims=b`` (negative: counted from
    ``indices``' rank) the first ``b`` dimensions of both are batch dimensions, matched one to one:
    the output's shape is ``params.shape[:axis] + indices.shape[b:] + params.shape[axis + 1:]``
    (TensorFlow's rule; ``axis >= b``)."""
    params, indices = args[:2]
    rank = np.ndim(params)
    axis = int(static_value(node, args[2], "the axis")) if len(args) > 2 else 0
    if not -rank <= axis < rank:  # (TensorFlow's shape function, run by the kernel for a run-time axis)
        _ops_checks.invalid(node, (
            f"Shape must be at least rank {axis + 1 if axis >= 0 else -axis} but is rank {rank}"))
    axis = axis + rank if axis < 0 else axis
    batch = _ops_checks.gather_batch(node, int(node.attr("batch_dims", 0) or 0), axis, np.shape(params), np.shape(indices))
    _ops_checks.gather(node, indices, np.shape(params)[axis])
    xp = xp_of(params, indices)
    if not batch:
        return [as_numpy(xp.take(params, indices, axis=axis))]
    # The gathered axis moved next to the batch dimensions, indexed there by aranges over the batch
    # dimensions (broadcast against the indices) and the indices: batch + indices' rest + params' rest.
    moved = xp.moveaxis(params, axis, batch)
    ranges = tuple(xp.arange(n).reshape((n,) + (1,) * (np.ndim(indices) - k - 1))
                   for k, n in enumerate(np.shape(indices)[:batch]))
    out = moved[ranges + (indices,)]
    # (batch, indices' rest, params[batch:axis], params[axis+1:]) -> (batch, params[batch:axis], indices' rest, ...)
    rest, middle = np.ndim(indices) - batch, axis - batch
    perm = (list(range(batch)) + list(range(batch + rest, batch + rest + middle)) +
            list(range(batch, batch + rest)) + list(range(batch + rest + middle, np.ndim(out))))
    return [as_numpy(xp.transpose(out, perm))]


@_reg("ListDiff")
def _list_diff(node: Node, args: list[Any]) -> list[Any]:
    """``tf.compat.v1.setdiff1d``: the entries of ``x`` that are not in ``y``, in order, and their
    positions in ``x``. Its outputs' length depends on the values, so both inputs must be known while
    tracing (as they are in the gradient of ``tf.reduce_prod``: the axes not reduced) or be the
    concrete arguments of an eager call; under ``jit`` traced ones raise ``GraphError.NOT_STATIC``."""
    x, y = (static_value(node, a, "x and y (the number of entries of x not in y is the output's shape)")
            for a in args)
    keep = np.flatnonzero(~np.isin(x, y))
    return [x[keep], keep.astype(node.attr("out_idx", np.dtype("int32")))]


@_reg("ReverseSequence")
def _reverse_sequence(node: Node, args: list[Any]) -> list[Any]:
    x, lengths = args
    seq, batch = int(node.attr("seq_dim")), int(node.attr("batch_dim", 0))
    _ops_checks.sequence_lengths(node, lengths, seq, np.shape(x)[seq])
    xp = xp_of(x, lengths)
    t = xp.arange(np.shape(x)[seq])
    lengths = xp.asarray(lengths).astype(t.dtype)
    src = xp.where(t[None, :] < lengths[:, None], lengths[:, None] - 1 - t[None, :], t[None, :])  # [batch, time]
    moved = xp.moveaxis(x, (batch, seq), (0, 1))
    out = xp.take_along_axis(moved, src.reshape(src.shape + (1,) * (moved.ndim - 2)), axis=1)
    return [as_numpy(xp.moveaxis(out, (0, 1), (batch, seq)))]


# -- padding, broadcasting, reversal ----------------------------------------------------------
def _paddings(node: Node, paddings: Any, shape: tuple[int, ...]) -> list[tuple[int, int]]:
    paddings = static_value(node, paddings, "the paddings")
    _ops_checks.paddings(node, paddings, shape)
    return [(int(b), int(a)) for b, a in np.reshape(paddings, (-1, 2))]


@_reg("Pad", "PadV2")
def _pad(node: Node, args: list[Any]) -> list[Any]:
    x, paddings = args[:2]
    value = args[2] if len(args) > 2 else np.zeros((), np.asarray(x).dtype if is_static(x) else x.dtype)
    return [as_numpy(xp_of(x, value).pad(x, _paddings(node, paddings, np.shape(x)), mode="constant",
                                         constant_values=value))]


def _mirror_indices(n: int, before: int, after: int, mode: str) -> np.ndarray:
    """Which source position each position of a mirror-padded axis of length ``n`` copies."""
    return np.pad(np.arange(n), (before, after), mode="symmetric" if mode.upper() == "SYMMETRIC" else "reflect")


@_reg("MirrorPad")
def _mirror_pad(node: Node, args: list[Any]) -> list[Any]:
    x, paddings = args
    xp = xp_of(x)
    for axis, (before, after) in enumerate(_paddings(node, paddings, np.shape(x))):
        _ops_checks.mirror_padding(node, before, after, np.shape(x)[axis], "the dimension")
        x = xp.take(x, _mirror_indices(np.shape(x)[axis], before, after, node.attr("mode")), axis=axis)
    return [as_numpy(x)]


@_reg("MirrorPadGrad")
def _mirror_pad_grad(node: Node, args: list[Any]) -> list[Any]:
    """The adjoint of MirrorPad: each padded position's gradient is added to the position it copies."""
    dy, paddings = args
    for axis, (before, after) in enumerate(_paddings(node, paddings, np.shape(dy))):
        n = np.shape(dy)[axis] - before - after
        _ops_checks.mirror_padding(node, before, after, n, "the output dimension")
        index = _mirror_indices(n, before, after, node.attr("mode"))
        moved = xp_of(dy).moveaxis(dy, axis, 0)
        if is_static(dy):
            out = np.zeros((n,) + moved.shape[1:], moved.dtype)
            np.add.at(out, index, moved)
        else:
            out = jnp.zeros((n,) + moved.shape[1:], moved.dtype).at[index].add(moved)
        dy = xp_of(dy).moveaxis(out, 0, axis)
    return [as_numpy(dy)]


@_reg("BroadcastTo")
def _broadcast_to(node: Node, args: list[Any]) -> list[Any]:
    x, shape = args
    shape = _ops_checks.dimensions(node, learned_value(node, shape, "the shape"))
    _ops_checks.broadcast_rank(node, np.ndim(x), len(shape))
    return [as_numpy(xp_of(x).broadcast_to(x, shape))]


@_reg("ReverseV2")
def _reverse_v2(node: Node, args: list[Any]) -> list[Any]:
    x, axes = args
    axes = _ops_checks.reverse_axes(node, static_value(node, axes, "the axes"), np.ndim(x))
    return [as_numpy(xp_of(x).flip(x, axis=axes)) if axes else x]


@_reg("ArgMax", "ArgMin")
def _arg_max(node: Node, args: list[Any]) -> list[Any]:
    """The first index of the largest (smallest) value along the axis, in ``output_type`` (int64 by
    default; a traced result takes JAX's width for it, int32 unless ``jax_enable_x64`` is on)."""
    x, axis = args
    xp = xp_of(x)
    axis, rank = int(static_value(node, axis, "the axis")), np.ndim(x)
    axis = _ops_checks.axis_in(node, axis, rank, f"Expected dimension in the range [{-rank}, {rank}), but got {axis}")
    out = (xp.argmax if node.op == "ArgMax" else xp.argmin)(x, axis=axis)
    dtype = np.dtype(node.attr("output_type", np.dtype("int64")))
    return [out.astype(dtype) if xp is np else out.astype(jax.dtypes.canonicalize_dtype(dtype))]


def result_dtype(*args: Any) -> np.dtype:
    """The promoted dtype of numpy and JAX arrays."""
    return np.result_type(*(np.asarray(a).dtype if is_static(a) else a.dtype for a in args))
