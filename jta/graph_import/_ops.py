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

from collections.abc import Callable
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from .._channel.catalogue import Error
from ._nodes import Node

Op = Callable[[Node, list[Any]], list[Any]]
OPS: dict[str, Op] = {}


def is_static(v: Any) -> bool:
    """A numpy value (known while tracing)."""
    return isinstance(v, (np.ndarray, np.generic))


def _xp(*args: Any) -> Any:
    return np if all(is_static(a) for a in args) else jnp


def _np(v: Any) -> Any:
    return np.asarray(v) if isinstance(v, (np.generic, bool, int, float)) else v


def _static(node: Node, v: Any, what: str) -> np.ndarray:
    if not is_static(v):
        Error.GRAPH_NOT_STATIC.raise_(node=node.name, op=node.op, what=what)
    return np.asarray(v)


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


def _simple(names: tuple[str, ...], fn: Callable[..., Any]) -> None:
    for n in names:
        OPS[n] = lambda node, args, fn=fn: [_np(_quietly(fn, _xp(*args), *args))]


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
    "RealDiv": lambda xp, a, b: xp.true_divide(a, b), "Maximum": lambda xp, a, b: xp.maximum(a, b),
    "Minimum": lambda xp, a, b: xp.minimum(a, b), "Pow": lambda xp, a, b: xp.power(a, b),
    "FloorMod": lambda xp, a, b: xp.mod(a, b), "FloorDiv": lambda xp, a, b: xp.floor_divide(a, b),
    "SquaredDifference": lambda xp, a, b: xp.square(xp.subtract(a, b)),
    "Equal": lambda xp, a, b: xp.equal(a, b), "NotEqual": lambda xp, a, b: xp.not_equal(a, b),
    "Less": lambda xp, a, b: xp.less(a, b), "LessEqual": lambda xp, a, b: xp.less_equal(a, b),
    "Greater": lambda xp, a, b: xp.greater(a, b), "GreaterEqual": lambda xp, a, b: xp.greater_equal(a, b),
    "LogicalAnd": lambda xp, a, b: xp.logical_and(a, b), "LogicalOr": lambda xp, a, b: xp.logical_or(a, b),
    "SigmoidGrad": lambda xp, y, dy: dy * y * (1 - y), "TanhGrad": lambda xp, y, dy: dy * (1 - y * y),
    "ReluGrad": lambda xp, dy, x: xp.where(x > 0, dy, xp.zeros_like(dy)),
    "SqrtGrad": lambda xp, y, dy: dy * 0.5 / y, "RsqrtGrad": lambda xp, y, dy: dy * -0.5 * y * y * y,
    "ReciprocalGrad": lambda xp, y, dy: -dy * y * y,
}
_UNARY: dict[str, Callable[..., Any]] = {
    "Neg": lambda xp, x: xp.negative(x), "Reciprocal": lambda xp, x: xp.reciprocal(x) if xp is jnp else 1 / x,
    "Inv": lambda xp, x: 1 / x, "Square": lambda xp, x: xp.square(x), "Sqrt": lambda xp, x: xp.sqrt(x),
    "Rsqrt": lambda xp, x: 1 / xp.sqrt(x), "Exp": lambda xp, x: xp.exp(x), "Log": lambda xp, x: xp.log(x),
    "Abs": lambda xp, x: xp.abs(x), "Sign": lambda xp, x: xp.sign(x), "LogicalNot": lambda xp, x: xp.logical_not(x),
    "Tanh": lambda xp, x: xp.tanh(x), "Relu": lambda xp, x: xp.maximum(x, xp.zeros_like(x)),
    "Sigmoid": lambda xp, x: jax.nn.sigmoid(x) if xp is jnp else (1 / (1 + np.exp(-x))).astype(x.dtype),
    "Softplus": lambda xp, x: jax.nn.softplus(x) if xp is jnp else np.logaddexp(0, x).astype(x.dtype),
    "Floor": lambda xp, x: xp.floor(x), "Ceil": lambda xp, x: xp.ceil(x),
    "Sin": lambda xp, x: xp.sin(x), "Cos": lambda xp, x: xp.cos(x),
    "ZerosLike": lambda xp, x: xp.zeros_like(x), "OnesLike": lambda xp, x: xp.ones_like(x),
}
for _name, _fn in _BINARY.items():
    _simple((_name,), _fn)
for _name, _fn in _UNARY.items():
    _simple((_name,), _fn)
_simple(("AddN",), lambda xp, *xs: sum(xs[1:], xs[0]))


@_reg("Identity", "Snapshot", "PreventGradient", "EnsureShape", "CheckNumerics", "PlaceholderWithDefault")
def _identity(node: Node, args: list[Any]) -> list[Any]:
    return [args[0]]


@_reg("IdentityN")
def _identity_n(node: Node, args: list[Any]) -> list[Any]:
    return list(args)


@_reg("StopGradient")
def _stop_gradient(node: Node, args: list[Any]) -> list[Any]:
    return [args[0] if is_static(args[0]) else jax.lax.stop_gradient(args[0])]


@_reg("NoOp", "ControlTrigger", "Assert")
def _nothing(node: Node, args: list[Any]) -> list[Any]:
    return []


@_reg("Const")
def _const(node: Node, args: list[Any]) -> list[Any]:
    return [np.asarray(node.attr("value"))]


@_reg("Cast")
def _cast_op(node: Node, args: list[Any]) -> list[Any]:
    return [_cast(args[0], node.attr("DstT"))]


# -- linear algebra -------------------------------------------------------------------------
@_reg("MatMul")
def _matmul(node: Node, args: list[Any]) -> list[Any]:
    a, b = args
    xp = _xp(a, b)
    a = a.T if node.attr("transpose_a") else a
    b = b.T if node.attr("transpose_b") else b
    return [_np(xp.matmul(a, b))]


@_reg("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")
def _batch_matmul(node: Node, args: list[Any]) -> list[Any]:
    a, b = args
    xp = _xp(a, b)
    a = xp.swapaxes(xp.conj(a), -1, -2) if node.attr("adj_x") else a
    b = xp.swapaxes(xp.conj(b), -1, -2) if node.attr("adj_y") else b
    return [_np(xp.matmul(a, b))]


def _channel_axis(node: Node, ndim: int) -> int:
    return 1 if str(node.attr("data_format", "NHWC")).startswith("NC") and ndim > 2 else ndim - 1


@_reg("BiasAdd", "BiasAddV1")
def _bias_add(node: Node, args: list[Any]) -> list[Any]:
    x, b = args
    axis = _channel_axis(node, np.ndim(x))
    shape = [1] * np.ndim(x)
    shape[axis] = -1
    return [_np(_xp(x, b).add(x, b.reshape(shape)))]


@_reg("BiasAddGrad")
def _bias_add_grad(node: Node, args: list[Any]) -> list[Any]:
    (dy,) = args
    axis = _channel_axis(node, np.ndim(dy))
    return [_np(_xp(dy).sum(dy, axis=tuple(a for a in range(np.ndim(dy)) if a != axis)))]


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
    return [_np(_xp(x).reshape(x, tuple(int(d) for d in _static(node, shape, "the shape"))))]


@_reg("Fill")
def _fill(node: Node, args: list[Any]) -> list[Any]:
    dims, value = args
    dims = tuple(int(d) for d in _static(node, dims, "the dims"))
    return [_np(_xp(value).full(dims, value, dtype=np.asarray(value).dtype if is_static(value) else value.dtype))]


@_reg("Range")
def _range(node: Node, args: list[Any]) -> list[Any]:
    start, limit, delta = (_static(node, a, "start, limit and delta") for a in args)
    return [np.arange(start.item(), limit.item(), delta.item()).astype(node.attr("Tidx", start.dtype))]


@_reg("ExpandDims")
def _expand_dims(node: Node, args: list[Any]) -> list[Any]:
    x, axis = args
    return [_np(_xp(x).expand_dims(x, int(_static(node, axis, "the axis"))))]


@_reg("Squeeze")
def _squeeze(node: Node, args: list[Any]) -> list[Any]:
    (x,) = args
    dims = node.attr("squeeze_dims") or None
    return [_np(_xp(x).squeeze(x, axis=None if dims is None else tuple(dims)))]


@_reg("Transpose")
def _transpose(node: Node, args: list[Any]) -> list[Any]:
    x, perm = args
    return [_np(_xp(x).transpose(x, tuple(int(p) for p in _static(node, perm, "perm"))))]


@_reg("InvertPermutation")
def _invert_permutation(node: Node, args: list[Any]) -> list[Any]:
    perm = _static(node, args[0], "perm")
    return [np.argsort(perm).astype(perm.dtype)]


@_reg("Tile")
def _tile(node: Node, args: list[Any]) -> list[Any]:
    x, reps = args
    return [_np(_xp(x).tile(x, tuple(int(r) for r in _static(node, reps, "multiples"))))]


@_reg("Pack")
def _pack(node: Node, args: list[Any]) -> list[Any]:
    return [_np(_xp(*args).stack(args, axis=node.attr("axis", 0)))]


@_reg("Unpack")
def _unpack(node: Node, args: list[Any]) -> list[Any]:
    (x,) = args
    axis = node.attr("axis", 0)
    xp = _xp(x)
    return [_np(xp.take(x, k, axis=axis)) for k in range(np.shape(x)[axis])]


@_reg("ConcatV2", "Concat")
def _concat(node: Node, args: list[Any]) -> list[Any]:
    axis, values = (args[-1], args[:-1]) if node.op == "ConcatV2" else (args[0], args[1:])
    return [_np(_xp(*values).concatenate(values, axis=int(_static(node, axis, "the axis"))))]


@_reg("ConcatOffset")
def _concat_offset(node: Node, args: list[Any]) -> list[Any]:
    axis = int(_static(node, args[0], "the axis"))
    shapes = [_static(node, s, "the shapes") for s in args[1:]]
    axis %= len(shapes[0])
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
    return [_np(v) for v in _xp(x).split(x, node.attr("num_split"), axis=int(_static(node, axis, "the axis")))]


@_reg("SplitV")
def _split_v(node: Node, args: list[Any]) -> list[Any]:
    x, sizes, axis = args
    axis = int(_static(node, axis, "the axis")) % np.ndim(x)
    sizes = [int(s) for s in _static(node, sizes, "size_splits")]
    if -1 in sizes:
        sizes[sizes.index(-1)] = np.shape(x)[axis] - (sum(sizes) + 1)
    return [_np(v) for v in _xp(x).split(x, np.cumsum(sizes)[:-1].tolist(), axis=axis)]


@_reg("Slice")
def _slice(node: Node, args: list[Any]) -> list[Any]:
    x, begin, size = args
    size = [int(s) for s in _static(node, size, "the size")]
    shape = np.shape(x)
    if is_static(begin):
        b = [int(v) for v in begin]
        return [_np(x[tuple(slice(v, shape[k] if s < 0 else v + s) for k, (v, s) in enumerate(zip(b, size, strict=False)))])]
    size = [shape[k] - 0 if s < 0 else s for k, s in enumerate(size)]  # a -1 size needs a static begin
    return [jax.lax.dynamic_slice(jnp.asarray(x), tuple(jnp.asarray(begin)[k] for k in range(len(size))), size)]


def _strided_index(node: Node, begin: Any, end: Any, strides: Any) -> tuple[Any, ...]:
    strides = _static(node, strides, "the strides")
    masks = {k: int(node.attr(k + "_mask", 0)) for k in ("begin", "end", "ellipsis", "new_axis", "shrink_axis")}
    index: list[Any] = []
    for k in range(len(strides)):
        bit = 1 << k
        if masks["ellipsis"] & bit:
            index.append(Ellipsis)
        elif masks["new_axis"] & bit:
            index.append(None)
        elif masks["shrink_axis"] & bit:
            b = begin[k]
            index.append(int(b) if is_static(b) else b)
        else:
            b = None if masks["begin"] & bit else int(_static(node, begin[k], "slice bounds"))
            e = None if masks["end"] & bit else int(_static(node, end[k], "slice bounds"))
            index.append(slice(b, e, int(strides[k])))
    return tuple(index)


@_reg("StridedSlice")
def _strided_slice(node: Node, args: list[Any]) -> list[Any]:
    x, begin, end, strides = args
    index = _strided_index(node, begin, end, strides)
    if all(is_static(a) for a in args):
        return [np.asarray(x[index])]
    return [jnp.asarray(x)[index]]


@_reg("StridedSliceGrad")
def _strided_slice_grad(node: Node, args: list[Any]) -> list[Any]:
    shape, begin, end, strides, dy = args
    shape = tuple(int(d) for d in _static(node, shape, "the shape"))
    index = _strided_index(node, begin, end, strides)
    if all(is_static(a) for a in args):
        out = np.zeros(shape, np.asarray(dy).dtype)
        out[index] = dy
        return [out]
    return [jnp.zeros(shape, dy.dtype).at[index].set(dy)]


@_reg("BroadcastGradientArgs")
def _broadcast_gradient_args(node: Node, args: list[Any]) -> list[Any]:
    s0, s1 = (_static(node, a, "the shapes") for a in args)
    n = max(len(s0), len(s1))
    a = np.concatenate([np.ones(n - len(s0), s0.dtype), s0])
    b = np.concatenate([np.ones(n - len(s1), s1.dtype), s1])
    out = np.broadcast_shapes(tuple(int(v) for v in a), tuple(int(v) for v in b))
    r0 = [k for k in range(n) if a[k] == 1 and out[k] != 1 or (a[k] == 1 and b[k] == 1)]
    r1 = [k for k in range(n) if b[k] == 1 and out[k] != 1 or (a[k] == 1 and b[k] == 1)]
    return [np.asarray(r0, s0.dtype), np.asarray(r1, s0.dtype)]


# -- reductions, selection, gathers -----------------------------------------------------------
def _reduction(fn_name: str) -> Op:
    def op(node: Node, args: list[Any]) -> list[Any]:
        x, axes = args
        axes = tuple(int(a) for a in np.reshape(_static(node, axes, "the axes"), -1))
        xp = _xp(x)
        out = getattr(xp, fn_name)(x, axis=axes, keepdims=bool(node.attr("keep_dims", False)))
        return [_np(out.astype(x.dtype) if fn_name in ("sum", "mean", "prod") else out)]
    return op


for _name, _fn_name in (("Sum", "sum"), ("Mean", "mean"), ("Prod", "prod"), ("Max", "max"), ("Min", "min"),
                        ("All", "all"), ("Any", "any")):
    OPS[_name] = _reduction(_fn_name)


@_reg("Select")
def _select(node: Node, args: list[Any]) -> list[Any]:
    c, t, e = args
    if np.ndim(c) == 1 and np.ndim(t) > 1:
        c = c.reshape((-1,) + (1,) * (np.ndim(t) - 1))
    return [_np(_xp(c, t, e).where(c, t, e))]


@_reg("SelectV2")
def _select_v2(node: Node, args: list[Any]) -> list[Any]:
    return [_np(_xp(*args).where(*args))]


@_reg("GatherV2", "Gather")
def _gather(node: Node, args: list[Any]) -> list[Any]:
    params, indices = args[:2]
    axis = int(_static(node, args[2], "the axis")) if len(args) > 2 else 0
    if node.attr("batch_dims", 0):
        Error.GRAPH_NOT_STATIC.raise_(node=node.name, op=node.op, what="batch_dims=0")
    return [_np(_xp(params, indices).take(params, indices, axis=axis))]


@_reg("UnsortedSegmentSum")
def _unsorted_segment_sum(node: Node, args: list[Any]) -> list[Any]:
    data, ids, n = args
    n = int(_static(node, n, "num_segments"))
    return [jax.ops.segment_sum(jnp.asarray(data).reshape((-1,) + np.shape(data)[np.ndim(ids):]),
                                jnp.asarray(ids).reshape(-1), n)]


@_reg("DynamicStitch", "ParallelDynamicStitch")
def _dynamic_stitch(node: Node, args: list[Any]) -> list[Any]:
    n = len(args) // 2
    indices, data = args[:n], args[n:]
    if all(is_static(i) for i in indices):
        flat = np.concatenate([np.reshape(i, -1) for i in indices])
        rest = np.shape(data[0])[np.ndim(indices[0]):]
        values = [_xp(d).reshape(d, (-1,) + rest) for d in data]
        xp = _xp(*data)
        out = xp.zeros((int(flat.max()) + 1 if flat.size else 0,) + rest, _dtype(*data))
        stacked = xp.concatenate(values)
        if xp is np:
            out[flat] = stacked
            return [out]
        return [out.at[flat].set(stacked)]
    Error.GRAPH_NOT_STATIC.raise_(node=node.name, op=node.op, what="the indices")


@_reg("ReverseSequence")
def _reverse_sequence(node: Node, args: list[Any]) -> list[Any]:
    x, lengths = args
    seq, batch = int(node.attr("seq_dim")), int(node.attr("batch_dim", 0))
    xp = _xp(x, lengths)
    t = xp.arange(np.shape(x)[seq])
    lengths = xp.asarray(lengths).astype(t.dtype)
    src = xp.where(t[None, :] < lengths[:, None], lengths[:, None] - 1 - t[None, :], t[None, :])  # [batch, time]
    moved = xp.moveaxis(x, (batch, seq), (0, 1))
    out = xp.take_along_axis(moved, src.reshape(src.shape + (1,) * (moved.ndim - 2)), axis=1)
    return [_np(xp.moveaxis(out, (0, 1), (batch, seq)))]


# -- padding, broadcasting, reversal ----------------------------------------------------------
def _paddings(node: Node, paddings: Any) -> list[tuple[int, int]]:
    return [(int(b), int(a)) for b, a in np.reshape(_static(node, paddings, "the paddings"), (-1, 2))]


@_reg("Pad", "PadV2")
def _pad(node: Node, args: list[Any]) -> list[Any]:
    x, paddings = args[:2]
    value = args[2] if len(args) > 2 else np.zeros((), np.asarray(x).dtype if is_static(x) else x.dtype)
    xp = _xp(x, value)
    return [_np(xp.pad(x, _paddings(node, paddings), mode="constant", constant_values=value))]


def _mirror_indices(n: int, before: int, after: int, mode: str) -> np.ndarray:
    """Which source position each position of a mirror-padded axis of length ``n`` copies."""
    return np.pad(np.arange(n), (before, after), mode="symmetric" if mode.upper() == "SYMMETRIC" else "reflect")


@_reg("MirrorPad")
def _mirror_pad(node: Node, args: list[Any]) -> list[Any]:
    x, paddings = args
    xp = _xp(x)
    for axis, (before, after) in enumerate(_paddings(node, paddings)):
        x = xp.take(x, _mirror_indices(np.shape(x)[axis], before, after, node.attr("mode")), axis=axis)
    return [_np(x)]


@_reg("MirrorPadGrad")
def _mirror_pad_grad(node: Node, args: list[Any]) -> list[Any]:
    """The adjoint of MirrorPad: each padded position's gradient is added to the position it copies."""
    dy, paddings = args
    for axis, (before, after) in enumerate(_paddings(node, paddings)):
        n = np.shape(dy)[axis] - before - after
        index = _mirror_indices(n, before, after, node.attr("mode"))
        moved = _xp(dy).moveaxis(dy, axis, 0)
        if is_static(dy):
            out = np.zeros((n,) + moved.shape[1:], moved.dtype)
            np.add.at(out, index, moved)
        else:
            out = jnp.zeros((n,) + moved.shape[1:], moved.dtype).at[index].add(moved)
        dy = _xp(dy).moveaxis(out, 0, axis)
    return [_np(dy)]


@_reg("BroadcastTo")
def _broadcast_to(node: Node, args: list[Any]) -> list[Any]:
    x, shape = args
    return [_np(_xp(x).broadcast_to(x, tuple(int(d) for d in _static(node, shape, "the shape"))))]


@_reg("ReverseV2")
def _reverse_v2(node: Node, args: list[Any]) -> list[Any]:
    x, axes = args
    axes = tuple(int(a) for a in np.reshape(_static(node, axes, "the axes"), -1))
    return [_np(_xp(x).flip(x, axis=axes)) if axes else x]


@_reg("ArgMax", "ArgMin")
def _arg_max(node: Node, args: list[Any]) -> list[Any]:
    """The first index of the largest (smallest) value along the axis, in ``output_type`` (int64 by
    default; a traced result takes JAX's width for it, int32 unless ``jax_enable_x64`` is on)."""
    x, axis = args
    xp = _xp(x)
    out = (xp.argmax if node.op == "ArgMax" else xp.argmin)(x, axis=int(_static(node, axis, "the axis")))
    dtype = np.dtype(node.attr("output_type", np.dtype("int64")))
    return [out.astype(dtype) if xp is np else out.astype(jax.dtypes.canonicalize_dtype(dtype))]


# -- softmax and cross entropy ----------------------------------------------------------------
def _log_softmax(xp: Any, logits: Any) -> Any:
    shifted = logits - xp.max(logits, axis=-1, keepdims=True)
    return shifted - xp.log(xp.sum(xp.exp(shifted), axis=-1, keepdims=True))


_simple(("Softmax",), lambda xp, x: xp.exp(_log_softmax(xp, x)))
_simple(("LogSoftmax",), _log_softmax)


@_reg("SoftmaxCrossEntropyWithLogits")
def _softmax_cross_entropy(node: Node, args: list[Any]) -> list[Any]:
    """(loss, backprop): ``-sum(labels * log_softmax(logits))`` and ``softmax(logits) - labels``."""
    logits, labels = args
    xp = _xp(logits, labels)
    log_p = _log_softmax(xp, logits)
    labels = xp.broadcast_to(labels, np.broadcast_shapes(np.shape(logits), np.shape(labels)))
    return [_np(-xp.sum(labels * log_p, axis=-1)), _np(xp.exp(log_p) - labels)]


@_reg("SparseSoftmaxCrossEntropyWithLogits")
def _sparse_softmax_cross_entropy(node: Node, args: list[Any]) -> list[Any]:
    """(loss, backprop) for integer labels. A label outside ``[0, classes)`` gives NaN in its row
    (TensorFlow's GPU kernel does the same; its CPU kernel raises, which a traced function cannot)."""
    logits, labels = args
    xp = _xp(logits, labels)
    classes = np.shape(logits)[-1]
    log_p = _log_softmax(xp, logits)
    onehot = (xp.arange(classes) == labels[..., None]).astype(log_p.dtype)
    valid = (labels >= 0) & (labels < classes)
    nan = np.asarray(np.nan, log_p.dtype)
    loss = xp.where(valid, -xp.sum(onehot * log_p, axis=-1), nan)
    backprop = xp.where(valid[..., None], xp.exp(log_p) - onehot, nan)
    return [_np(loss), _np(backprop)]


# -- more elementwise math: the op types tf2jax also converts ----------------------------------
def _special(fn_name: str) -> Callable[..., Any]:
    """A special function: ``scipy.special`` on static values, ``jax.scipy.special`` on traced ones."""
    import jax.scipy.special as jax_special
    import scipy.special as scipy_special

    def fn(xp: Any, *args: Any) -> Any:
        if xp is np:
            return np.asarray(getattr(scipy_special, fn_name)(*args)).astype(np.result_type(*args))
        return getattr(jax_special, fn_name)(*args)
    return fn


def _dtype(*args: Any) -> np.dtype:
    """The promoted dtype of numpy and JAX arrays."""
    return np.result_type(*(np.asarray(a).dtype if is_static(a) else a.dtype for a in args))


def _truncate_div(xp: Any, a: Any, b: Any) -> Any:
    """TF's ``Div``: true division of floats, division rounded toward zero of integers."""
    if not np.issubdtype(_dtype(a, b), np.integer):
        return xp.true_divide(a, b)
    q = xp.floor_divide(a, b)
    return xp.where((q < 0) & (q * b != a), q + 1, q)


def _elu(xp: Any, x: Any) -> Any:
    return xp.where(x > 0, x, xp.expm1(xp.minimum(x, xp.zeros_like(x))))


_BINARY_MORE: dict[str, Callable[..., Any]] = {
    "Atan2": lambda xp, a, b: xp.arctan2(a, b), "Div": _truncate_div,
    "BitwiseAnd": lambda xp, a, b: xp.bitwise_and(a, b), "BitwiseOr": lambda xp, a, b: xp.bitwise_or(a, b),
    "BitwiseXor": lambda xp, a, b: xp.bitwise_xor(a, b),
    "LeftShift": lambda xp, a, b: xp.left_shift(a, b), "RightShift": lambda xp, a, b: xp.right_shift(a, b),
    "Igamma": _special("gammainc"), "Igammac": _special("gammaincc"), "Polygamma": lambda xp, n, x: _special("polygamma")(xp, n, x) if xp is np else jax.lax.polygamma(
        jnp.asarray(n, jnp.result_type(n, x)), jnp.asarray(x, jnp.result_type(n, x))),
    "Complex": lambda xp, re, im: xp.add(re, xp.multiply(im, 1j)).astype(np.result_type(_dtype(re), np.complex64)),
    "EluGrad": lambda xp, dy, y: xp.where(y > 0, dy, dy * (y + 1)),
    "Relu6Grad": lambda xp, dy, x: xp.where((x > 0) & (x < 6), dy, xp.zeros_like(dy)),
}
_UNARY_MORE: dict[str, Callable[..., Any]] = {
    "Tan": lambda xp, x: xp.tan(x), "Sinh": lambda xp, x: xp.sinh(x), "Cosh": lambda xp, x: xp.cosh(x),
    "Asinh": lambda xp, x: xp.arcsinh(x), "Acosh": lambda xp, x: xp.arccosh(x),
    "Atanh": lambda xp, x: xp.arctanh(x), "Expm1": lambda xp, x: xp.expm1(x), "Log1p": lambda xp, x: xp.log1p(x),
    "Erf": _special("erf"), "Erfc": _special("erfc"), "Erfinv": _special("erfinv"),
    "Lgamma": _special("gammaln"), "Digamma": _special("digamma"),
    "IsFinite": lambda xp, x: xp.isfinite(x), "Round": lambda xp, x: xp.round(x),
    "Relu6": lambda xp, x: xp.clip(x, xp.zeros_like(x), xp.full_like(x, 6)), "Elu": _elu,
    "Invert": lambda xp, x: xp.bitwise_not(x),
    "Real": lambda xp, x: xp.real(x), "Imag": lambda xp, x: xp.imag(x), "Conj": lambda xp, x: xp.conj(x),
    "ComplexAbs": lambda xp, x: xp.abs(x),
    "L2Loss": lambda xp, x: (xp.sum(xp.square(x)) / 2).astype(x.dtype),
}
for _name, _fn in _BINARY_MORE.items():
    _simple((_name,), _fn)
for _name, _fn in _UNARY_MORE.items():
    _simple((_name,), _fn)


# -- more shapes, scans, scatters and gathers -------------------------------------------------
@_reg("BroadcastArgs")
def _broadcast_args(node: Node, args: list[Any]) -> list[Any]:
    s0, s1 = (_static(node, a, "the shapes") for a in args)
    return [np.asarray(np.broadcast_shapes(tuple(int(d) for d in s0), tuple(int(d) for d in s1)), s0.dtype)]


@_reg("ConjugateTranspose")
def _conjugate_transpose(node: Node, args: list[Any]) -> list[Any]:
    x, perm = args
    xp = _xp(x)
    return [_np(xp.conj(xp.transpose(x, tuple(int(p) for p in _static(node, perm, "perm")))))]


@_reg("Cumsum", "Cumprod")
def _cumulative(node: Node, args: list[Any]) -> list[Any]:
    """The running sum (product) along an axis; ``exclusive`` shifts in the identity, ``reverse`` runs
    from the end."""
    x, axis = args
    axis = int(_static(node, axis, "the axis")) % np.ndim(x)
    xp = _xp(x)
    if node.attr("reverse", False):
        x = xp.flip(x, axis)
    out = (xp.cumsum if node.op == "Cumsum" else xp.cumprod)(x, axis=axis, dtype=x.dtype)
    if node.attr("exclusive", False):
        first = (xp.zeros_like if node.op == "Cumsum" else xp.ones_like)(xp.take(out, np.arange(1), axis=axis))
        out = xp.concatenate([first, xp.take(out, np.arange(np.shape(x)[axis] - 1), axis=axis)], axis=axis)
    if node.attr("reverse", False):
        out = xp.flip(out, axis)
    return [_np(out)]


@_reg("OneHot")
def _one_hot(node: Node, args: list[Any]) -> list[Any]:
    """``on_value`` where the index equals the position along the new axis, ``off_value`` elsewhere
    (a negative or too large index gives a row of ``off_value``)."""
    indices, depth, on, off = args
    depth = int(_static(node, depth, "the depth"))
    xp = _xp(indices, on, off)
    hot = xp.expand_dims(indices, -1) == xp.arange(depth).astype(_dtype(indices))
    axis = int(node.attr("axis", -1))
    if axis != -1:
        hot = xp.moveaxis(hot, -1, axis)
    return [_np(xp.where(hot, on, off))]


@_reg("MatrixBandPart")
def _matrix_band_part(node: Node, args: list[Any]) -> list[Any]:
    """Zeroes the entries more than ``num_lower`` below or ``num_upper`` above the diagonal (a
    negative count keeps that whole triangle)."""
    x, lower, upper = args
    lower = int(_static(node, lower, "num_lower"))
    upper = int(_static(node, upper, "num_upper"))
    rows, cols = np.shape(x)[-2:]
    offset = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    keep = ((lower < 0) | (-offset <= lower)) & ((upper < 0) | (offset <= upper))
    xp = _xp(x)
    return [_np(xp.where(keep, x, xp.zeros_like(x)))]


@_reg("Einsum")
def _einsum(node: Node, args: list[Any]) -> list[Any]:
    equation = node.attr("equation")
    equation = equation.decode() if isinstance(equation, bytes) else str(equation)
    return [_np(_xp(*args).einsum(equation, *args))]


def _nd_index(indices: Any) -> tuple[Any, ...]:
    return tuple(indices[..., k] for k in range(np.shape(indices)[-1]))


@_reg("GatherNd")
def _gather_nd(node: Node, args: list[Any]) -> list[Any]:
    params, indices = args
    if node.attr("batch_dims", 0):
        Error.GRAPH_NOT_STATIC.raise_(node=node.name, op=node.op, what="batch_dims=0")
    return [_np(params[_nd_index(indices)]) if is_static(params) and is_static(indices)
            else jnp.asarray(params)[_nd_index(jnp.asarray(indices))]]


@_reg("ScatterNd")
def _scatter_nd(node: Node, args: list[Any]) -> list[Any]:
    """The updates summed into zeros of the given shape at the indices."""
    indices, updates, shape = args
    shape = tuple(int(d) for d in _static(node, shape, "the shape"))
    if is_static(indices) and is_static(updates):
        out = np.zeros(shape, np.asarray(updates).dtype)
        np.add.at(out, _nd_index(indices), updates)
        return [out]
    return [jnp.zeros(shape, jnp.asarray(updates).dtype).at[_nd_index(jnp.asarray(indices))].add(updates)]


@_reg("TensorScatterUpdate", "TensorScatterAdd")
def _tensor_scatter(node: Node, args: list[Any]) -> list[Any]:
    tensor, indices, updates = args
    index = _nd_index(jnp.asarray(indices))
    at = jnp.asarray(tensor).at[index]
    return [at.set(updates) if node.op == "TensorScatterUpdate" else at.add(updates)]


@_reg("InplaceUpdate", "InplaceAdd")
def _inplace(node: Node, args: list[Any]) -> list[Any]:
    """Rows ``i`` of ``x`` replaced by (increased by) ``v``."""
    x, rows, v = args
    at = jnp.asarray(x).at[jnp.asarray(rows)]
    return [at.set(v) if node.op == "InplaceUpdate" else at.add(v)]


@_reg("Empty")
def _empty(node: Node, args: list[Any]) -> list[Any]:
    """A tensor of the shape; TensorFlow leaves it uninitialized unless ``init``, zeros are one such value."""
    shape = tuple(int(d) for d in _static(node, args[0], "the shape"))
    return [np.zeros(shape, node.attr("dtype"))]


@_reg("TopKV2")
def _top_k(node: Node, args: list[Any]) -> list[Any]:
    """The ``k`` largest values along the last axis, largest first, and their indices (int32); ties
    keep the lower index first."""
    x, k = args
    values, indices = jax.lax.top_k(jnp.asarray(x), int(_static(node, k, "k")))
    return [values, indices.astype(np.int32)]


def _segment_reduction(name: str) -> Op:
    def op(node: Node, args: list[Any]) -> list[Any]:
        data, ids, n = args
        n = int(_static(node, n, "num_segments"))
        data = jnp.asarray(data).reshape((-1,) + np.shape(data)[np.ndim(ids):])
        ids = jnp.asarray(ids).reshape(-1)
        out = getattr(jax.ops, name)(data, ids, n)
        if name != "segment_prod":  # an empty segment: the dtype's lowest (highest) value, as in TF
            info = jnp.finfo(data.dtype) if jnp.issubdtype(data.dtype, jnp.floating) else jnp.iinfo(data.dtype)
            count = jax.ops.segment_sum(jnp.ones_like(ids), ids, n).reshape((n,) + (1,) * (data.ndim - 1))
            out = jnp.where(count > 0, out, info.min if name == "segment_max" else info.max)
        return [out]
    return op


for _name, _fn_name in (("UnsortedSegmentMax", "segment_max"), ("UnsortedSegmentMin", "segment_min"),
                        ("UnsortedSegmentProd", "segment_prod")):
    OPS[_name] = _segment_reduction(_fn_name)
