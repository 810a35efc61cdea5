"""TensorFlow's checks of op inputs' values: indices, slices, labels, numerics, assertions.

JAX clamps, wraps, fills or drops an index out of range and computes on NaN; TensorFlow's CPU kernels
reject them, and its ``Assert``, ``CheckNumerics`` and ``EnsureShape`` raise. Each op that TensorFlow checks calls one of
these before it computes: a bad value fails with TensorFlow's class and text (an index's place written
as TensorFlow writes it), eagerly and, for traced values, from compiled code
(``jta._delivery.value_ops.report``; a check known to pass stages nothing).
"""

from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .._delivery import value_ops
from .._records.catalogue import unravelled
from ._messages import GraphError
from ._nodes import Node


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


def dims(shape: Any) -> str:
    """A shape as an error's ``index_shape`` or ``shape`` (``"2,3"``): a traced flat index is written as
    TensorFlow names the element (``jta._records.catalogue.unravelled``)."""
    return ",".join(str(int(d)) for d in shape)


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
    begin in ``[0, dim]`` (code 462), then the size in ``[0, dim - begin]`` (463)."""
    known, xp = known_or_traced(begin)
    for k, (s, dim) in enumerate(zip(size, shape, strict=False)):
        b = known[k]
        extra = {"op": node.op}
        value_ops.report(node.name, (b < 0) | (b > dim), GraphError.SLICE_BEGIN, k, dim, b, extra=extra)
        if s >= 0:
            value_ops.report(node.name, (b >= 0) & (b <= dim) & (b + s > dim), GraphError.SLICE_SIZE, k, dim - b, s,
                             extra=extra)


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
    """A tensor as TensorFlow's ``Assert`` writes it: its first ``summarize`` entries, space-separated
    (``...`` after them), bytes as text, numbers as C++ streams them (``%g``)."""
    flat = np.reshape(value, -1)
    shown = [v.decode() if isinstance(v, bytes) else f"{v:g}" if isinstance(v, (float, np.floating)) else str(v)
             for v in flat[:summarize].tolist()]
    return " ".join(shown) + ("..." if flat.size > summarize else "")


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


def scan_axis(node: Node, axis: int, rank: int) -> int:
    """A cumulative op's axis in ``[-rank, rank)`` (code 474), as a non-negative axis. (TensorFlow writes
    a negative axis out of range plus ``rank``.)"""
    if not -rank <= axis < rank:
        value_ops.report(node.name, True, GraphError.SCAN_AXIS, extra={
            "op": node.op, "low": str(-rank), "high": str(rank), "axis": str(axis + rank if axis < 0 else axis)})
    return axis % rank


# -- static arguments: an axis, a permutation, a shape, multiples (decided while tracing) ---------------
def _invalid(node: Node, text: str) -> None:
    GraphError.INVALID_ARGUMENT.raise_(node=node.name, op=node.op, error=text)


def reduction_axes(node: Node, axes: Any, rank: int) -> tuple[int, ...]:
    """A reduction's axes as non-negative axes, after TensorFlow's checks (range, duplicates)."""
    out = []
    for a in (int(v) for v in np.reshape(axes, -1)):
        if not -rank <= a < rank:
            _invalid(node, f"Invalid reduction dimension ({a} for input with {rank} dimension(s)")
        if a % rank in out:
            _invalid(node, f"Invalid reduction arguments: Axes contains duplicate dimension: {a % rank}")
        out.append(a % rank)
    return tuple(out)


def roll_axes(node: Node, axes: Any, shift: Any, rank: int) -> tuple[int, ...]:
    """``Roll``'s axes as non-negative axes: as many as shifts, each in range."""
    if np.shape(shift) != np.shape(axes):
        _invalid(node, "shift and axis must have the same size")
    axes = [int(v) for v in np.reshape(axes, -1)]
    for a in axes:
        if not -rank <= a < rank:
            _invalid(node, f"axis {a + rank if a < 0 else a} is out of range")
    return tuple(a % rank for a in axes)


def permutation(node: Node, perm: Any, rank: int) -> tuple[int, ...]:
    """A ``Transpose``'s permutation, negative entries counted from the end, after TensorFlow's checks."""
    perm = [int(p) + rank if int(p) < 0 else int(p) for p in np.reshape(perm, -1)]
    for d in perm:
        if not 0 <= d < rank:
            _invalid(node, f"{d} is out of range [0 .. {rank})")
    for i in range(rank):
        if i not in perm:
            _invalid(node, f"{i} is missing from {{{','.join(str(p) for p in perm)}}}.")
    return tuple(perm)


def invertible_permutation(node: Node, perm: Any) -> None:
    """``InvertPermutation``'s input, a permutation of ``0 .. n - 1``: TensorFlow's checks in its order."""
    seen: set[int] = set()
    for d in (int(v) for v in np.reshape(perm, -1)):
        if not 0 <= d < np.size(perm):
            _invalid(node, f"{d} is not between 0 and {np.size(perm)}")
        if d in seen:
            _invalid(node, f"{d} is duplicated in the input.")
        seen.add(d)


def mirror_padding(node: Node, before: int, after: int, size: int, what: str) -> None:
    """A mirror padding of an axis of ``size``: less than it (``REFLECT``), at most it (``SYMMETRIC``)."""
    if str(node.attr("mode")).upper() == "SYMMETRIC":
        if before > size or after > size:
            _invalid(node, f"paddings must be no greater than {what} size: {before}, {after} greater than {size}")
    elif before >= size or after >= size:
        _invalid(node, f"paddings must be less than {what} size: {before}, {after} not less than {size}")


def reshape(node: Node, shape: Any, size: int) -> tuple[int, ...]:
    """``Reshape``'s shape, after TensorFlow's checks in its kernel's order: at most one ``-1``, no
    other negative size, and the element count (or, with a ``-1``, a multiple of the rest)."""
    dims = tuple(int(d) for d in np.reshape(shape, -1))
    unknown, product = None, 1
    for k, d in enumerate(dims):
        if d == -1:
            if unknown is not None:
                _invalid(node, f"Only one input size may be -1, not both {unknown} and {k}")
            unknown = k
        elif d < 0:
            _invalid(node, f"Size {k} must be non-negative, not {d}")
        else:
            product *= d
    if unknown is None and product != size:
        _invalid(node, f"Input to reshape is a tensor with {size} values, but the requested shape has {product}")
    if unknown is not None and product == 0:
        _invalid(node, f"Input to reshape is a tensor with {size} values, but the requested shape has 0" if size else
                 "Reshape cannot infer the missing input size for an empty tensor unless all specified input "
                 "sizes are non-zero")
    if unknown is not None and product and size % product:
        _invalid(node, f"Input to reshape is a tensor with {size} values, but the requested shape requires a "
                       f"multiple of {product}")
    return dims


def multiples(node: Node, reps: Any) -> tuple[int, ...]:
    """``Tile``'s multiples, each non-negative."""
    reps = tuple(int(r) for r in np.reshape(reps, -1))
    for i, r in enumerate(reps):
        if r < 0:
            _invalid(node, f"Expected multiples[{i}] >= 0, but got {r}")
    return reps


def dimensions(node: Node, dims: Any) -> tuple[int, ...]:
    """An output's shape, each dimension non-negative (``Dimension -1 must be >= 0``)."""
    dims = tuple(int(d) for d in np.reshape(dims, -1))
    for d in dims:
        if d < 0:
            _invalid(node, f"Dimension {d} must be >= 0")
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
