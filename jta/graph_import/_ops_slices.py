"""Slices: ``Slice``, ``StridedSlice`` (``x[a:b:s, i, ...]``) and the latter's gradient ``StridedSliceGrad``.

Bounds known while tracing (constants, shape arithmetic) or in an eager call index as NumPy does, with
TensorFlow's checks. An index of one element (``x[i]``, a shrunk axis) may be traced anywhere, checked
from compiled code. A bound the data decides (``x[:n]``, ``ids[b, :lengths[b]]``) makes the slice's
length the data's: under ``jta.checked`` that length is learned at run time (code 506: one compilation
per length; the slice is then a gather of that many entries from the run-time start), and under a bare
``jit`` it is refused (code 405), naming ``jta.checked``, as every shape an input's value decides is.
The start and length are TensorFlow's (Python's): a negative bound counts from the end, and bounds are
clamped into the dimension.
"""

from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from . import _ops_checks
from ._nodes import Node
from ._ops import OPS, as_numpy, is_static, learned_size, registrar, static_value

_reg = registrar(OPS)

# An entry of a strided index whose bounds the data decides: its begin and end (None where masked), stride.
Dynamic = dict[int, tuple[Any, Any, int]]


@_reg("Slice")
def _slice(node: Node, args: list[Any]) -> list[Any]:
    x, begin, size = args
    _ops_checks.slice_lengths(node, begin, size, np.ndim(x))
    size = [int(s) for s in static_value(node, size, "the size")]
    shape = np.shape(x)
    if -1 in size:  # (to the end: the result's shape depends on the begin)
        begin = static_value(node, begin, "the begin (with a size of -1, the result's shape depends on it)")
    _ops_checks.slice_bounds(node, begin, size, shape)
    if is_static(begin):
        b = [int(v) for v in begin]
        return [as_numpy(x[tuple(slice(v, shape[k] if s < 0 else v + s) for k, (v, s) in enumerate(zip(b, size, strict=False)))])]
    return [jax.lax.dynamic_slice(jnp.asarray(x), tuple(jnp.asarray(begin)[k] for k in range(len(size))), size)]


def _strided_index(node: Node, begin: Any, end: Any, strides: Any, shape: Any = None) -> tuple[tuple[Any, ...], Dynamic]:
    """The NumPy index of a ``StridedSlice``'s attributes, and its entries whose bounds the data decides
    (in the index as ``slice(None)``: :func:`_gathered` or :func:`_scattered` does those)."""
    _ops_checks.strided_lengths(node, begin, end, strides)
    strides = static_value(node, strides, "the strides")
    masks = {k: int(node.attr(k + "_mask", 0)) for k in ("begin", "end", "ellipsis", "new_axis", "shrink_axis")}
    index: list[Any] = []
    dynamic: Dynamic = {}
    shrunk: list[int] = []  # (the entries that index one element)
    for k in range(len(strides)):
        bit = 1 << k
        if masks["ellipsis"] & bit:
            index.append(Ellipsis)
        elif masks["new_axis"] & bit:
            index.append(None)
        elif masks["shrink_axis"] & bit:
            b = begin[k]
            index.append(int(b) if is_static(b) else b)
            shrunk.append(len(index) - 1)
        else:
            b = None if masks["begin"] & bit else begin[k]
            e = None if masks["end"] & bit else end[k]
            known = [None if v is None else _ops_checks.known_now(v) for v in (b, e)]
            if any(v is not None and k_ is None for v, k_ in zip((b, e), known, strict=True)):
                dynamic[len(index)] = (b, e, int(strides[k]))
                index.append(slice(None))
            else:
                lo, hi = (None if v is None else int(v) for v in known)
                index.append(slice(lo, hi, int(strides[k])))
    if shape is not None:  # TensorFlow's check of each index of one element (JAX would clamp it)
        for k in shrunk:
            axis = _axis_of(index, k, len(shape))
            _ops_checks.shrunk_index(node, index[k], shape[axis], axis)
    return tuple(index), dynamic


def _axis_of(index: Any, k: int, rank: int) -> int:
    """The dimension that entry ``k`` of a NumPy-style ``index`` indexes (``None`` adds one, an
    ``Ellipsis`` stands for those no entry names)."""
    before = [e for e in index[:k] if e is not None]
    if Ellipsis not in before:
        return len(before)
    after = [e for e in index[k:] if e is not None]
    return rank - len(after)


def _out_axis(index: Any, k: int, rank: int) -> int:
    """The dimension of the slice that entry ``k`` (a ``slice``) of ``index`` gives."""
    named = sum(1 for e in index if e is not None and e is not Ellipsis)
    out = 0
    for e in index[:k]:  # (an index of one element, static or traced, gives none)
        out += rank - named if e is Ellipsis else 1 if e is None or isinstance(e, slice) else 0
    return out


def _start_and_count(b: Any, e: Any, stride: int, dim: int) -> tuple[Any, Any]:
    """TensorFlow's first position and entry count of ``b:e:stride`` over ``dim`` (traced; ``None``: masked)."""
    def canonical(v: Any, low: int, high: int) -> Any:
        v = jnp.asarray(v)
        return jnp.clip(jnp.where(v < 0, v + dim, v), low, high)
    if stride > 0:
        start = 0 if b is None else canonical(b, 0, dim)
        stop = dim if e is None else canonical(e, 0, dim)
        return start, jnp.maximum((stop - start + stride - 1) // stride, 0)
    start = dim - 1 if b is None else canonical(b, -1, dim - 1)
    stop = -1 if e is None else canonical(e, -1, dim - 1)
    return start, jnp.maximum((start - stop - stride - 1) // -stride, 0)


def _positions(node: Node, k: int, entry: tuple[Any, Any, int], dim: int, count: Optional[int] = None) -> Any:
    """The positions entry ``k`` takes along its dimension of ``dim``: as many as it has at run time,
    learned under ``jta.checked`` (``count``: known already, a gradient's from its ``dy``)."""
    start, traced_count = _start_and_count(*entry, dim)
    if count is None:
        count = learned_size(node, traced_count, "slice bounds (the slice's length is its shape; jta.checked "
                             "learns it at run time)", 1, most=dim, part=k)
    return start + entry[2] * jnp.arange(count)


@_reg("StridedSlice")
def _strided_slice(node: Node, args: list[Any]) -> list[Any]:
    x, begin, end, strides = args
    shape = np.shape(x)
    index, dynamic = _strided_index(node, begin, end, strides, shape)
    if all(is_static(a) for a in args):
        return [np.asarray(x[index])]
    x = jnp.asarray(x)
    for k, entry in dynamic.items():  # (gathered first: the index then takes all they kept)
        axis = _axis_of(index, k, len(shape))
        x = jnp.take(x, _positions(node, k, entry, shape[axis]), axis=axis, mode="clip")
    return [x[index]]


@_reg("StridedSliceGrad")
def _strided_slice_grad(node: Node, args: list[Any]) -> list[Any]:
    shape, begin, end, strides, dy = args
    shape = _ops_checks.dimensions(node, static_value(node, shape, "the shape"))
    index, dynamic = _strided_index(node, begin, end, strides)
    # the slice's own shape: the dimensions of run-time bounds as long as dy has them
    counts = {k: np.shape(dy)[_out_axis(index, k, len(shape))] for k in dynamic}
    kept = list(shape)
    for k in dynamic:
        kept[_axis_of(index, k, len(shape))] = counts[k]
    _ops_checks.strided_grad(node, tuple(kept), index, np.shape(dy))
    if all(is_static(a) for a in args):
        out = np.zeros(shape, np.asarray(dy).dtype)
        out[index] = dy
        return [out]
    out = jnp.zeros(kept, dy.dtype).at[index].set(dy)
    for k, entry in dynamic.items():  # each dimension of run-time bounds scattered to its full length
        axis = _axis_of(index, k, len(shape))
        wide = list(out.shape)
        wide[axis] = shape[axis]
        at = (slice(None),) * axis + (_positions(node, k, entry, shape[axis], counts[k]),)
        out = jnp.zeros(wide, dy.dtype).at[at].set(out, mode="drop")
    return [out]
