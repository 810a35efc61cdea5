"""TensorFlow's checks of op inputs' values: indices, slices, labels, numerics, assertions.

JAX clamps, wraps, fills or drops an index out of range and computes on NaN; TensorFlow's CPU kernels
reject them, and its ``Assert``, ``CheckNumerics`` and ``EnsureShape`` raise. Each op that TensorFlow checks calls one of
these before it computes: a bad value fails with TensorFlow's class and text (an index's place written
as TensorFlow writes it), eagerly and, for traced values, from compiled code
(``jta._delivery.value_ops.report``; a check known to pass stages nothing).
"""

from __future__ import annotations

from typing import Any, NoReturn, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .._delivery import value_ops
from .._records.catalogue import unravelled
from ._messages import GraphError
from ._nodes import Node
from ._tensor_text import summarize_value


def known_now(v: Any) -> Optional[np.ndarray]:
    """``v`` as numpy when it is known when the op runs (a constant, a concrete argument of an eager
    call), else ``None`` (traced under ``jit``/``grad``)."""
    try:
        return np.asarray(v)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None


def known_or_traced(x: Any) -> tuple[Any, Any]:
    """``x`` as numpy when it is known now, else as a JAX array, and the array module to compute with."""
    known = known_now(x)
    return (known, np) if known is not None else (jnp.asarray(x), jnp)


def dims(shape: Any, sep: str = ",") -> str:
    """A shape as an error's ``index_shape`` or ``shape`` (``"2,3"``; some kernels write ``"2 3"``): a traced
    flat index is written as TensorFlow names the element (``jta._records.catalogue.unravelled``)."""
    return sep.join(str(int(d)) for d in shape)


def _first_outside(values: Any, limit: int) -> Optional[tuple[Any, Any, Any]]:
    """``values`` flat, whether each is outside ``[0, limit)``, and the first that is (or 0); ``None``
    for no values."""
    known, xp = known_or_traced(values)
    flat = xp.reshape(known, -1)
    if not flat.size:
        return None
    bad = (flat < 0) | (flat >= limit)
    return flat, bad, xp.argmax(bad)


def gather(node: Node, indices: Any, limit: int) -> None:
    """Every index in ``[0, limit)`` (``GatherV2``, ``ResourceGather``: ``indices[i,j] = v is not in
    [0, limit)``, code 456; of a scalar index ``indices = v ...``, code 461)."""
    found = _first_outside(indices, limit)
    if found is None:
        return
    flat, bad, first = found
    extra = {"op": node.op, "index_shape": dims(np.shape(indices))}
    if np.ndim(indices):
        value_ops.report(node.name, bad[first], GraphError.GATHER_RANGE, first, flat[first], limit, extra=extra)
    else:  # (a scalar index has no place: ``indices = v``)
        value_ops.report(node.name, bad[first], GraphError.GATHER_SCALAR_RANGE, flat[first], limit, extra=extra)


def nd(node: Node, indices: Any, shape: tuple[int, ...], message: GraphError) -> None:
    """Every index vector (``indices``' last axis) inside ``shape`` (``GatherNd``: code 457; ``ScatterNd``,
    ``TensorScatter*``: code 458): ``indices[i] = [a, b] does not index into ...``. (From compiled code
    the vector is written whole up to two entries, its first two and ``...`` beyond.)"""
    known, xp = known_or_traced(indices)
    depth = np.shape(indices)[-1]
    rows = xp.reshape(known, (-1, depth))
    if not rows.shape[0] or not depth:
        return
    bad = xp.any((rows < 0) | (rows >= np.asarray(shape[:depth])), axis=1)
    first = xp.argmax(bad)
    if xp is np:  # (known now: the whole vector, whatever its length)
        if bad[first]:
            message.raise_(name=node.name, op=node.op, index=unravelled(int(first), dims(np.shape(indices)[:-1])),
                           vector=", ".join(str(int(v)) for v in rows[first]), shape=dims(shape))
        return
    vector = [rows[first, k] if k < depth else 0 for k in range(2)]
    value_ops.report(node.name, bad[first], message, first, *vector,
                     extra={"op": node.op, "index_shape": dims(np.shape(indices)[:-1]), "depth": str(depth),
                            "shape": dims(shape)})


def sequence_lengths(node: Node, lengths: Any, dim: int, size: int) -> None:
    """Every length in ``[0, size]`` (``ReverseSequence``, per batch entry in order: ``seq_lens(d) < 0``,
    code 459, or ``seq_lens(d) > input.dims(dim)``, code 460)."""
    known, xp = known_or_traced(lengths)
    lengths = xp.reshape(known, -1)
    if not lengths.size:
        return
    negative, long = lengths < 0, lengths > size
    first = xp.argmax(negative | long)
    extra = {"op": node.op, "dim": str(dim)}
    value_ops.report(node.name, negative[first], GraphError.SEQUENCE_NEGATIVE, first, extra=extra)
    value_ops.report(node.name, long[first] & ~negative[first], GraphError.SEQUENCE_LONG, first, extra=extra)


def slice_bounds(node: Node, begin: Any, size: list[int], shape: tuple[int, ...]) -> None:
    """``Slice`` of a run-time ``begin`` (a static ``size``, -1 for the rest): per dimension in order, the
    begin in ``[0, dim]`` (code 462), then a size other than -1 in ``[0, dim - begin]`` (463)."""
    known, xp = known_or_traced(begin)
    for k, (s, dim) in enumerate(zip(size, shape, strict=False)):
        b = known[k]
        extra = {"op": node.op}
        value_ops.report(node.name, (b < 0) | (b > dim), GraphError.SLICE_BEGIN, k, dim, b, extra=extra)
        if s != -1:  # (-1: to the end)
            value_ops.report(node.name, (b >= 0) & (b <= dim) & ((s < 0) | (b + s > dim)), GraphError.SLICE_SIZE,
                             k, dim - b, s, extra=extra)


def shrunk_index(node: Node, index: Any, dim: int, axis: int) -> None:
    """A ``StridedSlice`` index of a shrunk dimension in ``[-dim, dim)`` (``x[i]``: ``slice index i of
    dimension axis out of bounds.``, a negative one counted from the end as TensorFlow reports it; code 464)."""
    known, xp = known_or_traced(index)
    value_ops.report(node.name, (known < -dim) | (known >= dim), GraphError.SHRUNK_INDEX,
                     xp.where(known < 0, known + dim, known), axis, extra={"op": node.op})


def labels(node: Node, labels: Any, classes: int) -> None:
    """Every label in ``[0, classes)`` (``SparseSoftmaxCrossEntropyWithLogits``: ``Received a label value
    of v which is outside the valid range of [0, classes).  Label values: ...``, code 465; from compiled
    code the label values are written whole up to two, their first two and ``...`` beyond)."""
    found = _first_outside(labels, classes)
    if found is None:
        return
    flat, bad, first = found
    if isinstance(flat, np.ndarray):  # (known now: every label)
        if bad[first]:
            GraphError.LABEL_RANGE.raise_(name=node.name, op=node.op, value=int(flat[first]), count=classes,
                                          values=" ".join(str(int(v)) for v in flat))
        return
    shown = [flat[k] if k < flat.size else 0 for k in range(2)]
    value_ops.report(node.name, bad[first], GraphError.LABEL_RANGE, flat[first], *shown,
                     extra={"op": node.op, "count": str(classes), "labels": str(flat.size)})


def numerics(node: Node, x: Any, message: str) -> None:
    """``CheckNumerics``: no NaN and no infinity in ``x`` (``{message} : Tensor had NaN values``, ``Inf``,
    ``Inf and NaN``; codes 467-469)."""
    known, xp = known_or_traced(x)
    nan, inf = xp.any(xp.isnan(known)), xp.any(xp.isinf(known))
    extra = {"op": node.op, "message": message}
    value_ops.report(node.name, nan & ~inf, GraphError.NUMERICS_NAN, extra=extra)
    value_ops.report(node.name, inf & ~nan, GraphError.NUMERICS_INF, extra=extra)
    value_ops.report(node.name, inf & nan, GraphError.NUMERICS_BOTH, extra=extra)


def _summary(value: Any, summarize: int) -> str:
    """A tensor as TensorFlow's ``Assert`` writes it (``SummarizeValue(summarize, print_v2=false)``)."""
    return summarize_value(np.asarray(value), summarize, print_v2=False).decode("utf-8", "backslashreplace")


def _integers(x: Any) -> bool:
    return bool(jnp.issubdtype(jnp.result_type(x), jnp.integer))


def divisor(node: Node, y: Any) -> None:
    """An integer ``Div``/``FloorDiv``/``FloorMod`` by zero (code 472: XLA gives a value)."""
    if _integers(y):
        known, xp = known_or_traced(y)
        value_ops.report(node.name, xp.any(known == 0), GraphError.DIVISION_BY_ZERO, extra={"op": node.op})


def exponent(node: Node, x: Any, y: Any) -> None:
    """An integer ``Pow`` to a negative power (code 473: XLA gives 0 or 1)."""
    if _integers(x) and _integers(y) and jnp.issubdtype(jnp.result_type(y), jnp.signedinteger):
        known, xp = known_or_traced(y)
        value_ops.report(node.name, xp.any(known < 0), GraphError.NEGATIVE_POWER, extra={"op": node.op})


def uniform_bounds(node: Node, low: Any, high: Any) -> None:
    """A uniform integer draw's ``minval < maxval`` (code 490: JAX draws from an empty range)."""
    (low, _), (high, _) = known_or_traced(low), known_or_traced(high)
    value_ops.report(node.name, low >= high, GraphError.UNIFORM_RANGE, low, high, extra={"op": node.op})


def scan_axis(node: Node, axis: int, rank: int) -> int:
    """A cumulative op's axis in ``[-rank, rank)`` (code 474), as a non-negative axis. (TensorFlow writes
    a negative axis out of range plus ``rank``.)"""
    if not -rank <= axis < rank:
        value_ops.report(node.name, True, GraphError.SCAN_AXIS, extra={
            "op": node.op, "low": str(-rank), "high": str(rank), "axis": str(axis + rank if axis < 0 else axis)})
    return axis % rank


# -- static arguments: an axis, a permutation, a shape, multiples (decided while tracing) ---------------
def invalid(node: Node, text: str) -> NoReturn:
    """TensorFlow's ``InvalidArgumentError`` of an input its kernel rejects, with its ``text``."""
    GraphError.INVALID_ARGUMENT.raise_(node=node.name, op=node.op, error=text)


def invalid_where(node: Node, bad: Any, text: str, message: GraphError = GraphError.INVALID_ARGUMENT) -> None:
    """TensorFlow's ``InvalidArgumentError`` (or ``message``'s class) with a ``text`` that names no run-time
    value, where ``bad`` holds: now where it is known, else from compiled code."""
    value_ops.report(node.name, bad, message, extra={"node": node.name, "op": node.op, "error": text})


def failed_precondition(node: Node, text: str) -> NoReturn:
    """TensorFlow's ``FailedPreconditionError`` of an input its kernel rejects, with its ``text``."""
    GraphError.FAILED_PRECONDITION.raise_(node=node.name, op=node.op, error=text)


def reduction_axes(node: Node, axes: Any, rank: int) -> tuple[int, ...]:
    """A reduction's axes as non-negative axes, after TensorFlow's checks (range, duplicates)."""
    out = []
    for a in (int(v) for v in np.reshape(axes, -1)):
        if not -rank <= a < rank:
            invalid(node, f"Invalid reduction dimension ({a} for input with {rank} dimension(s)")
        if a % rank in out:
            invalid(node, f"Invalid reduction arguments: Axes contains duplicate dimension: {a % rank}")
        out.append(a % rank)
    return tuple(out)


def roll_axes(node: Node, axes: Any, shift: Any, rank: int) -> tuple[int, ...]:
    """``Roll``'s axes as non-negative axes: as many as shifts, each in range."""
    if np.shape(shift) != np.shape(axes):
        invalid(node, "shift and axis must have the same size")
    axes = [int(v) for v in np.reshape(axes, -1)]
    for a in axes:
        if not -rank <= a < rank:
            invalid(node, f"axis {a + rank if a < 0 else a} is out of range")
    return tuple(a % rank for a in axes)


def permutation(node: Node, perm: Any, rank: int) -> tuple[int, ...]:
    """A ``Transpose``'s permutation, negative entries counted from the end, after TensorFlow's checks."""
    if np.size(perm) != rank:
        invalid(node, f"transpose expects a vector of size {rank}. But input(1) is a vector of size {np.size(perm)}")
    perm = [int(p) + rank if int(p) < 0 else int(p) for p in np.reshape(perm, -1)]
    for d in perm:
        if not 0 <= d < rank:
            invalid(node, f"{d} is out of range [0 .. {rank})")
    for i in range(rank):
        if i not in perm:
            invalid(node, f"{i} is missing from {{{','.join(str(p) for p in perm)}}}.")
    return tuple(perm)


def invertible_permutation(node: Node, perm: Any) -> None:
    """``InvertPermutation``'s input, a permutation of ``0 .. n - 1``: TensorFlow's checks in its order,
    entry by entry (in ``[0, n)``, not repeated), from compiled code where ``perm`` is traced."""
    if isinstance(perm, (np.ndarray, np.generic)):
        seen: set[int] = set()
        for d in (int(v) for v in np.reshape(perm, -1)):
            if not 0 <= d < np.size(perm):
                invalid(node, f"{d} is not between 0 and {np.size(perm)}")
            if d in seen:
                invalid(node, f"{d} is duplicated in the input.")
            seen.add(d)
        return
    flat = jnp.reshape(perm, -1)
    n = flat.shape[0]
    if not n:
        return
    outside = (flat < 0) | (flat >= n)
    # an entry is repeated where an earlier one has its value (the first such entry, in order)
    first_seen = jnp.full(n, n, jnp.int32).at[jnp.clip(flat, 0, n - 1)].min(jnp.arange(n, dtype=jnp.int32))
    repeated = ~outside & (first_seen[jnp.clip(flat, 0, n - 1)] < jnp.arange(n))
    first = jnp.argmax(outside | repeated)
    value_ops.report(node.name, outside[first], GraphError.PERMUTATION_RANGE, flat[first], n, extra={"op": node.op})
    value_ops.report(node.name, repeated[first], GraphError.PERMUTATION_REPEAT, flat[first], extra={"op": node.op})


def mirror_padding(node: Node, before: int, after: int, size: int, what: str) -> None:
    """A mirror padding of an axis of ``size``: non-negative, less than it (``REFLECT``), at most it
    (``SYMMETRIC``)."""
    if before < 0 or after < 0:  # (the gradient's text differs)
        invalid(node, f"Paddings must be non-negative: {before}, {after}" if node.op == "MirrorPadGrad" else
                 f"paddings must be non-negative: {before} {after}")
    if str(node.attr("mode")).upper() == "SYMMETRIC":
        if before > size or after > size:
            invalid(node, f"paddings must be no greater than {what} size: {before}, {after} greater than {size}")
    elif before >= size or after >= size:
        invalid(node, f"paddings must be less than {what} size: {before}, {after} not less than {size}")


def reshape(node: Node, shape: Any, size: int) -> tuple[int, ...]:
    """``Reshape``'s shape, after TensorFlow's checks in its kernel's order: at most one ``-1``, no
    other negative size, and the element count (or, with a ``-1``, a multiple of the rest)."""
    dims = tuple(int(d) for d in np.reshape(shape, -1))
    unknown, product = None, 1
    for k, d in enumerate(dims):
        if d == -1:
            if unknown is not None:
                invalid(node, f"Only one input size may be -1, not both {unknown} and {k}")
            unknown = k
        elif d < 0:
            invalid(node, f"Size {k} must be non-negative, not {d}")
        else:
            product *= d
    if unknown is None and product != size:
        invalid(node, f"Input to reshape is a tensor with {size} values, but the requested shape has {product}")
    if unknown is not None and product == 0:
        invalid(node, f"Input to reshape is a tensor with {size} values, but the requested shape has 0" if size else
                 "Reshape cannot infer the missing input size for an empty tensor unless all specified input "
                 "sizes are non-zero")
    if unknown is not None and product and size % product:
        invalid(node, f"Input to reshape is a tensor with {size} values, but the requested shape requires a "
                       f"multiple of {product}")
    return dims


def multiples(node: Node, reps: Any, rank: int) -> tuple[int, ...]:
    """``Tile``'s multiples: one per dimension, each non-negative."""
    if np.ndim(reps) != 1:
        invalid(node, f"Expected multiples to be 1-D, but got shape {shape_text(np.shape(reps))}")
    if np.size(reps) != rank:
        invalid(node, f"Expected multiples argument to be a vector of length {rank} but got length {np.size(reps)}")
    reps = tuple(int(r) for r in np.reshape(reps, -1))
    for i, r in enumerate(reps):
        if r < 0:
            invalid(node, f"Expected multiples[{i}] >= 0, but got {r}")
    return reps


def dimensions(node: Node, dims: Any) -> tuple[int, ...]:
    """An output's shape, each dimension non-negative (``Dimension -1 must be >= 0``)."""
    dims = tuple(int(d) for d in np.reshape(dims, -1))
    for d in dims:
        if d < 0:
            invalid(node, f"Dimension {d} must be >= 0")
    return dims


def _debug_shape(shape: Any) -> str:
    """A shape as TensorFlow's ``TensorShape::DebugString`` writes it, brackets aside (``?`` unknown)."""
    return ",".join("?" if d is None else str(d) for d in shape)


def ensure_shape(node: Node, x: Any) -> None:
    """``EnsureShape``: ``x``'s shape is compatible with the node's ``shape`` (code 471). Shapes are
    static in JAX (a function is traced per shape), so this is decided while tracing."""
    expected, shape = node.attr("shape"), np.shape(x)
    if expected is None:  # (an unknown rank: any shape)
        return
    compatible = len(shape) == len(expected) and all(e is None or e == d for d, e in zip(shape, expected, strict=True))
    source, index = node.inputs[0]
    value_ops.report(node.name, not compatible, GraphError.SHAPE_MISMATCH, extra={
        "op": node.op, "tensor": source if index == 0 else f"{source}:{index}",
        "shape": _debug_shape(shape), "expected": _debug_shape(expected)})


def assertion(node: Node, condition: Any, data: list[Any], summarize: int) -> None:
    """``Assert``: ``condition`` holds, else ``assertion failed: [...] [...]`` with each of ``data``
    summarized (code 470). From compiled code only the data known while tracing (the messages) is
    written; a traced tensor stands as ``[...]`` (a record holds three integers)."""
    holds, xp = known_or_traced(condition)
    shown = (known_now(value) for value in data)
    parts = ["[...]" if v is None else f"[{_summary(v, summarize)}]" for v in shown]
    value_ops.report(node.name, ~xp.all(holds.astype(bool)), GraphError.ASSERTION,
                     extra={"op": node.op, "data": " ".join(parts)})


# -- argument lengths and ranges of the shape ops (decided while tracing) ----------------------
def shape_text(shape: Any) -> str:
    """A shape as TensorFlow's ``PartialTensorShape::DebugString`` writes it (``[2,3]``; an unknown dimension
    ``?``, an unknown rank ``<unknown>``)."""
    return "<unknown>" if shape is None else "[" + ",".join("?" if d is None else str(int(d)) for d in shape) + "]"


def _values_text(v: Any) -> str:
    """A small integer tensor as TensorFlow's ``SummarizeValue`` writes it (``[2 5]``)."""
    return f"[{' '.join(str(int(d)) for d in np.reshape(v, -1))}]"


def matrix_ranks(node: Node, a: tuple[int, ...], b: tuple[int, ...]) -> None:
    """The operands of a batched matrix op (``BatchMatMul``, ``MatrixTriangularSolve``): each of rank >= 2."""
    for k, shape in enumerate((a, b)):
        if len(shape) < 2:
            invalid(node, f"In[{k}] ndims must be >= 2: {len(shape)}")


def matrix_batches(node: Node, a: tuple[int, ...], b: tuple[int, ...]) -> None:
    """Their batch dimensions broadcast (TensorFlow's ``MatMulBCast``)."""
    try:
        np.broadcast_shapes(a[:-2], b[:-2])
    except ValueError:
        invalid(node, f"In[0] and In[1] must have compatible batch dimensions: {shape_text(a)} vs. {shape_text(b)}")


def slice_lengths(node: Node, begin: Any, size: Any, rank: int) -> None:
    """``Slice``'s begin and size: vectors of one entry per dimension."""
    if np.ndim(begin) != 1 or np.ndim(size) != 1 or np.size(begin) != rank or np.size(size) != rank:
        invalid(node, f"Expected begin and size arguments to be 1-D tensors of size {rank}, but got shapes "
                       f"{shape_text(np.shape(begin))} and {shape_text(np.shape(size))} instead.")


def strided_lengths(node: Node, begin: Any, end: Any, strides: Any) -> None:
    """``StridedSlice``'s begin, end and strides: vectors of one length, no stride 0."""
    shapes = [np.shape(v) for v in (begin, end, strides)]
    if any(len(s) != 1 for s in shapes) or len({s[0] for s in shapes}) != 1:
        invalid(node, f"Expected begin, end, and strides to be 1D equal size tensors, but got shapes "
                       f"{shape_text(shapes[0])}, {shape_text(shapes[1])}, and {shape_text(shapes[2])} instead.")
    known = known_now(strides)
    for k, stride in enumerate(np.reshape(known, -1).tolist() if known is not None else ()):
        if stride == 0:
            invalid(node, f"strides[{k}] must be non-zero")


def concat_offset(node: Node, axis: int, shapes: list[np.ndarray]) -> int:
    """``ConcatOffset``'s axis in ``[-rank, rank)`` and its shapes equal off it, as a non-negative axis."""
    rank = np.size(shapes[0])
    if not -rank <= axis < rank:
        invalid(node, f"Concat dim is out of range: {axis} vs. {rank}")
    axis %= rank
    for i, s in enumerate(shapes):
        if np.size(s) != rank:
            invalid(node, f"input {i} should contain {rank} elements, but got {np.size(s)}")
        if any(int(a) != int(b) for k, (a, b) in enumerate(zip(s, shapes[0], strict=True)) if k != axis):
            invalid(node, f"All dimensions except {axis} must match. Input {i} has shape {_values_text(s)} and "
                           f"doesn't match input 0 with shape {_values_text(shapes[0])}.")
    return axis


def split_sizes(node: Node, sizes: Any, count: int, size: int) -> list[int]:
    """``SplitV``'s ``size_splits``, after its kernel's checks in order (one per output, at most one
    ``-1``, a total that fits the dimension of ``size``, none negative), the ``-1`` filled in; one output
    is the whole input."""
    if np.ndim(sizes) != 1 or np.size(sizes) != count:
        invalid(node, f"size of the split_tensor must be 1-D and have the same elements as outputs got "
                       f"{np.ndim(sizes)} -D and {np.size(sizes)} elements")
    sizes = [int(s) for s in np.reshape(sizes, -1)]
    if count == 1:  # (TensorFlow's kernel returns the input whatever the size)
        return [size]
    if sizes.count(-1) > 1:
        invalid(node, "There can only be one -1 in the input.")
    known = sum(s for s in sizes if s != -1)
    if known > size or (-1 not in sizes and known != size):
        invalid(node, "Determined shape must either match input shape along split_dim exactly if fully specified, "
                       f"or be less than the size of the input along split_dim if not fully specified.  Got: {known}")
    sizes = [size - known if s == -1 else s for s in sizes]
    for i, s in enumerate(sizes):
        if s < 0:
            invalid(node, f"Split size at index {i} must be >= 0. Got: {s}")
    return sizes


def paddings(node: Node, pads: Any, shape: tuple[int, ...]) -> None:
    """A pad's paddings: a ``[rank, 2]`` matrix; for ``Pad``, each entry non-negative (a mirror pad checks
    its own, :func:`mirror_padding`)."""
    if np.ndim(pads) != 2 or np.shape(pads)[1] != 2:
        invalid(node, f"paddings must be a matrix with 2 columns: {shape_text(np.shape(pads))}")
    if np.shape(pads)[0] != len(shape):
        invalid(node, f"The first dimension of paddings must be the rank of inputs{shape_text(np.shape(pads))}"
                       f"{',' if node.op == 'MirrorPad' else ''} {shape_text(shape)}")
    for before, after in np.asarray(pads).tolist() if not node.op.startswith("MirrorPad") else ():
        if before < 0 or after < 0:
            invalid(node, f"Paddings must be non-negative: {before} {after}")


def space_to_batch(node: Node, block: list[int], pairs: list[tuple[int, int]], spatial: tuple[int, ...]) -> None:
    """``SpaceToBatch``'s block (each positive) and paddings, per block dimension: non-negative, the
    padded dimension a multiple of the block."""
    for k, b in enumerate(block):
        if b < 1:
            invalid(node, f"All values in block_shape must be positive, got value, {b} at index {k}.")
    for k, ((lo, hi), b, n) in enumerate(zip(pairs, block, spatial, strict=False)):
        if lo < 0 or hi < 0:
            invalid(node, "Paddings must be non-negative")
        if (n + lo + hi) % b:
            invalid(node, f"padded_shape[{k}]={n + lo + hi} is not divisible by block_shape[{k}]={b}")


def batch_to_space(node: Node, block: list[int], pairs: list[tuple[int, int]], shape: tuple[int, ...]) -> None:
    """``BatchToSpace``'s block (a positive product that divides the batch) and crops, per block dimension
    that does something (a block of 1, no crop: none): non-negative, no more than the dimension."""
    product = int(np.prod(block))
    if product <= 0:
        invalid(node, f"Product of block sizes must be positive, got {product}")
    if shape[0] % product:
        invalid(node, f"Input batch dimension ({shape[0]}) is not divisible by product of block sizes ({product})")
    for k, ((lo, hi), b, n) in enumerate(zip(pairs, block, shape[1:], strict=False)):
        if (lo, hi, b) == (0, 0, 1):
            continue
        if lo < 0 or hi < 0:
            invalid(node, "Crops must be non-negative")
        if n * b - lo - hi < 0:
            invalid(node, f"cropped_shape[{k}]={n * b - lo - hi} must be non-negative")


# -- the diagonals of MatrixDiag, MatrixDiagPart, MatrixSetDiag --------------------------------
def diagonal_index(node: Node, k: Any) -> tuple[int, int]:
    """``k``: one diagonal or a band of two, as ``(lower, upper)``."""
    k = np.reshape(k, -1)
    if not k.size:
        invalid(node, "diag_index must have at least one element" if node.op.startswith("MatrixSetDiag") else
                 "Expected diag_index to have at least 1 element")
    if k.size > 2:
        invalid(node, f"diag_index must have only one or two elements, received {k.size} elements.")
    return int(k[0]), int(k[-1])


def diagonal_band(node: Node, k: tuple[int, int], rows: int, cols: int) -> None:
    """A band of a ``rows`` x ``cols`` matrix (``MatrixDiagPart``, ``MatrixSetDiag``): each end a
    diagonal of it (or 0), lower first."""
    lo, hi = k
    stop = "." if node.op.startswith("MatrixDiagPart") else ""  # (TensorFlow's texts differ in this)
    if not (-rows < lo < cols or lo == 0):
        invalid(node, f"lower_diag_index is out of bound: {lo}{stop} It must be between {-rows} and {cols}")
    if not (-rows < hi < cols or hi == 0):
        invalid(node, f"upper_diag_index is out of bound: {hi} It must be between {-rows} and {cols}")
    if lo > hi:
        invalid(node, f"lower_diag_index must not be larger than upper_diag_index: {lo} > {hi}")


def set_diagonals(node: Node, k: tuple[int, int], shape: tuple[int, ...], diagonal: tuple[int, ...]) -> None:
    """``MatrixSetDiag``'s diagonals: as many as the band holds, each as long as its longest diagonal."""
    (lo, hi), (rows, cols) = k, shape[-2:]
    diagonal_band(node, k, rows, cols)
    if lo != hi and (len(diagonal) < 2 or diagonal[-2] != hi - lo + 1):
        invalid(node, "The number of diagonals provided in `diag` is not consistent with `lower_diag_index` and "
                       "`upper_diag_index`")
    expected = (*shape[:-2], *((hi - lo + 1,) if lo != hi else ()), min(rows + min(hi, 0), cols - max(lo, 0)))
    if tuple(diagonal) != expected:
        invalid(node, "Either first dimensions of diagonal don't match input.shape[:-2], or diagonal.shape[:-1] is "
                       "not equal to the longests diagonal in range [lower_diag_index:upper_diag_index].\nInput "
                       f"shape: {shape_text(shape)}\nDiagonal shape: {shape_text(diagonal)}\nExpected diagonal "
                       f"shape: {shape_text(expected)}")


def diagonal_matrix(node: Node, k: tuple[int, int], diagonal: tuple[int, ...], rows: int, cols: int) -> None:
    """``MatrixDiag``'s band (lower first, as many diagonals as given) and its rows and columns (-1, or
    enough to hold the diagonals, and one of them the least that does)."""
    lo, hi = k
    if lo > hi:
        invalid(node, f"lower_diag_index must not be larger than upper_diag_index: {lo} > {hi}")
    if lo != hi and (len(diagonal) < 2 or diagonal[-2] != hi - lo + 1):
        invalid(node, "The number of diagonals provided in the input does not match the lower_diag_index and "
                       "upper_diag_index range.")
    least_rows, least_cols = diagonal[-1] - min(hi, 0), diagonal[-1] + max(lo, 0)
    if rows != -1 and rows < least_rows:
        invalid(node, "The number of rows is too small.")
    if cols != -1 and cols < least_cols:
        invalid(node, "The number of columns is too small.")
    if rows != -1 and cols != -1 and rows != least_rows and cols != least_cols:
        invalid(node, "The number of rows or columns is not consistent with the specified d_lower, d_upper, and "
                       "diagonal.")


def scatter_shapes(node: Node, indices: tuple[int, ...], updates: tuple[int, ...], shape: tuple[int, ...]) -> None:
    """``ScatterNd``'s updates: the indices' outer dimensions, then the slices of ``shape`` they index;
    none into an empty ``shape``."""
    outer = len(indices) - 1
    if tuple(updates[:outer]) != tuple(indices[:outer]):
        invalid(node, f"Dimensions [0,{outer}) of indices[shape={shape_text(indices)}] must match dimensions "
                       f"[0,{outer}) of updates[shape={shape_text(updates)}]")
    depth = indices[-1]
    if len(updates) - outer != len(shape) - depth or tuple(updates[outer:]) != tuple(shape[depth:]):
        invalid(node, f"Dimensions [{depth},{len(shape)}) of input[shape={shape_text(shape)}] must match "
                       f"dimensions [{outer},{len(updates)}) of updates[shape={shape_text(updates)}]")
    if not np.prod(shape) and (np.prod(indices) or np.prod(updates)):
        invalid(node, f"Indices and updates specified for empty output.  indices shape: {shape_text(indices)}")


def axis_in(node: Node, axis: int, rank: int, text: str) -> int:
    """An axis in ``[-rank, rank)`` (else TensorFlow's ``text`` for the op), as a non-negative axis."""
    if not -rank <= axis < rank:
        invalid(node, text)
    return axis % rank


def concat_axis(node: Node, axis: int, shapes: list[tuple[int, ...]]) -> int:
    """``Concat``'s axis in range and its inputs' shapes equal off it (``ConcatOp``'s checks), as a
    non-negative axis."""
    rank = len(shapes[0])
    axis = axis_in(node, axis, rank, f"ConcatOp : Expected concatenating dimensions in the range [{-rank}, {rank}), "
                                     f"but got {axis}")
    for i, shape in enumerate(shapes):
        if len(shape) != rank:
            invalid(node, f"ConcatOp : Ranks of all input tensors should match: shape[0] = {shape_text(shapes[0])} "
                           f"vs. shape[{i}] = {shape_text(shape)}")
        for j in (j for j in range(rank) if j != axis and shape[j] != shapes[0][j]):
            invalid(node, f"ConcatOp : Dimension {j} in both shapes must be equal: shape[0] = "
                           f"{shape_text(shapes[0])} vs. shape[{i}] = {shape_text(shape)}")
    return axis


def split_axis(node: Node, axis: int, shape: tuple[int, ...], count: int) -> int:
    """``Split``'s axis in range, its dimension a multiple of ``count``, as a non-negative axis."""
    rank = len(shape)
    axis = axis_in(node, axis, rank, f"-input rank(-{rank}) <= split_dim < input rank ({rank}), but got {axis}")
    if shape[axis] % count:
        invalid(node, f"Number of ways to split should evenly divide the split dimension, but got split_dim {axis} "
                       f"(size = {shape[axis]}) and num_split {count}")
    return axis


def reverse_axes(node: Node, axes: Any, rank: int) -> tuple[int, ...]:
    """``ReverseV2``'s axes, each in range and named once, as non-negative axes."""
    out: list[int] = []
    for i, a in enumerate(np.reshape(axes, -1).tolist()):
        axis = axis_in(node, a, rank, f"'axis'[{i}] = {a} is out of valid range [0, {rank - 1}")
        if axis in out:
            invalid(node, f"axis {axis} specified more than once.")
        out.append(axis)
    return tuple(out)


def broadcast(node: Node, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """Two shapes broadcast as TensorFlow's ``BCast`` does (equal, or one of them 1)."""
    n = max(len(a), len(b))
    out = []
    for x, y in zip((1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b), strict=True):
        if x != y and 1 not in (x, y):
            invalid(node, f"Incompatible shapes: {shape_text(a)} vs. {shape_text(b)}")
        out.append(y if x == 1 else x)
    return tuple(out)


def gather_batch(node: Node, batch: int, axis: int, params: tuple[int, ...], indices: tuple[int, ...]) -> int:
    """``GatherV2``'s ``batch_dims`` (negative: counted from the indices' rank), after its checks: in
    range, below the params' rank, at most the axis, the params and indices equal on those dimensions."""
    if not batch:
        return 0
    if not -len(indices) <= batch <= len(indices):
        invalid(node, f"Expected batch_dims in the range [{-len(indices)}, {len(indices)}], but got {batch}")
    batch = batch + len(indices) if batch < 0 else batch
    if batch >= len(params):
        invalid(node, f"batch_dims ({batch}) must be less than rank(params) ({len(params)}).")
    if axis < batch:
        invalid(node, f"batch_dims ({batch}) must be less than or equal to axis ({axis}).")
    for i in (i for i in range(batch) if params[i] != indices[i]):
        invalid(node, f"params.shape[{i}]: {params[i]} should be equal to indices.shape[{i}]: {indices[i]}")
    return batch


def broadcast_rank(node: Node, rank: int, out_rank: int) -> None:
    """``BroadcastTo``'s shape: no fewer dimensions than the input's."""
    if rank > out_rank:
        invalid(node, f"Rank of input ({rank}) must be no greater than rank of output shape ({out_rank}).")


def strided_grad(node: Node, shape: tuple[int, ...], index: tuple[Any, ...], dy: tuple[int, ...]) -> None:
    """``StridedSliceGrad``'s ``dy``: the shape of the slice of ``shape`` (decided where the index is static)."""
    if all(isinstance(i, (int, slice, type(None), type(Ellipsis))) for i in index):
        expected = np.broadcast_to(np.zeros((), np.int8), shape)[index].shape
        if expected != tuple(dy):
            invalid(node, f"shape of dy was {shape_text(dy)} instead of {shape_text(expected)}")
