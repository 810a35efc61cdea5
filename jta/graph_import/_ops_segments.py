"""Segment reductions, with TensorFlow's checks of the ids: ``Segment*`` (sorted ids; the output has
the last id plus one rows) and ``UnsortedSegment*`` (``num_segments`` rows).

The ids may be static (constants, shape arithmetic), concrete (an eager call) or traced. A sorted
reduction's row count is then learned by ``jta.checked``, as ``Where``'s count is
(:mod:`._ops_sizes`); a bare ``jit`` refuses it naming ``jta.checked``. Ids TensorFlow's CPU kernels
reject (``segment_reduction_ops_impl.h``) fail with their texts, from compiled code too: ids that
are not sorted or negative (codes 452-454), an unsorted id at or past ``num_segments`` (455; a
negative one drops its row, as in TensorFlow).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._delivery import value_ops
from ._messages import GraphError
from ._nodes import Node
from ._ops import OPS, Op, is_static, learned_size, learned_value, registrar
from ._ops_checks import dims, invalid, known_or_traced

_reg = registrar(OPS)


def _flat(ids: Any) -> tuple[Any, Any]:
    """The ids flat, as numpy when they are known when the op runs, and the array module to use."""
    known, xp = known_or_traced(ids)
    return xp.reshape(known, -1), xp


def sorted_rows(node: Node, ids: Any) -> tuple[Any, int]:
    """Sorted ids, flat, and the output's row count (the last id plus one), after TensorFlow's checks in
    its kernel's order: the last id is not negative (452); then, at the end of each segment, the next
    segment's id is larger (453) and this one's is in ``[0, count)`` (454)."""
    flat, xp = _flat(ids)
    if flat.size == 0:
        return flat, 0
    extra = {"op": node.op}
    rows = flat[-1] + 1
    value_ops.report(node.name, rows < 1, GraphError.SEGMENT_NEGATIVE, extra=extra)  # (the last id is negative)
    ends = xp.concatenate([flat[:-1] != flat[1:], xp.ones(1, bool)])
    disorder = xp.concatenate([flat[:-1] > flat[1:], xp.zeros(1, bool)])
    bad = ends & (disorder | (flat < 0) | (flat >= rows)) & (rows >= 1)
    first = xp.argmax(bad)
    value_ops.report(node.name, bad[first] & disorder[first], GraphError.SEGMENT_ORDER, extra=extra)
    value_ops.report(node.name, bad[first] & ~disorder[first], GraphError.SEGMENT_RANGE, flat[first], rows,
                     extra=extra)
    if xp is np:
        return flat, int(rows)
    return flat, learned_size(node, rows, "segment_ids (the last, plus one, is the output's row count; "
                               "jta.checked learns it at run time)", 0)


def _checked_unsorted(node: Node, ids: Any, n: int) -> Any:
    """Unsorted ids, flat, after TensorFlow's check that none is at or past ``n`` (455)."""
    flat, xp = _flat(ids)
    if flat.size:
        outside = flat >= n
        first = xp.argmax(outside)
        value_ops.report(node.name, outside[first], GraphError.UNSORTED_SEGMENT_RANGE, first, flat[first], n,
                         extra={"op": node.op, "index_shape": dims(np.shape(ids))})
    return flat


def _padded_prod(data: Any, ids: np.ndarray, n: int) -> Any:
    """The products of ``data``'s rows by static ``ids`` (an id outside ``[0, n)`` drops its row; an empty
    segment gives 1) as ``prod`` of a ``[n, largest segment, ...]`` gather padded with ones:
    differentiable, unlike ``jax.ops.segment_prod`` with repeated ids."""
    rest = np.shape(data)[1:]
    rows = np.flatnonzero((ids >= 0) & (ids < n))
    kept = ids[rows]
    order = np.argsort(kept, kind="stable")
    count = np.bincount(kept, minlength=n)
    starts = np.cumsum(count) - count
    table = np.full((n, int(count.max(initial=0))), np.shape(data)[0])  # that row: the padding row of ones
    table[kept[order], np.arange(kept.size) - starts[kept[order]]] = rows[order]
    padded = jnp.concatenate([jnp.asarray(data), jnp.ones((1,) + rest, jnp.asarray(data).dtype)])
    return jnp.prod(padded[table], axis=1)


def _scanned_prod(data: Any, ids: Any, n: int) -> Any:
    """The products of ``data``'s rows by sorted traced ``ids``: a segmented product (an associative
    scan that restarts where the id changes), each segment's last entry put in its row;
    differentiable, as :func:`_padded_prod` is."""
    starts = jnp.concatenate([jnp.ones(1, bool), ids[1:] != ids[:-1]])
    ends = jnp.concatenate([ids[:-1] != ids[1:], jnp.ones(1, bool)])
    lift = (1,) * (data.ndim - 1)

    def combine(a: Any, b: Any) -> Any:
        (va, sa), (vb, sb) = a, b
        return jnp.where(sb.reshape(sb.shape + lift), vb, va * vb), sa | sb

    prods, _ = jax.lax.associative_scan(combine, (data, starts))
    return jnp.ones((n,) + data.shape[1:], data.dtype).at[jnp.where(ends, ids, n)].set(prods, mode="drop")


@_reg("SegmentSum", "SegmentMax", "SegmentMin", "SegmentMean", "SegmentProd")
def _sorted_segment_reduction(node: Node, args: list[Any]) -> list[Any]:
    """The reduction of ``data``'s rows by sorted ``segment_ids`` (a prefix of its shape) into the last
    id plus one rows (:func:`sorted_rows`); an empty segment gives 0 (1 for ``SegmentProd``), as in
    TensorFlow."""
    data, ids = args
    rest = np.shape(data)[np.ndim(ids):]
    ids, n = sorted_rows(node, ids)
    data = jnp.asarray(data).reshape((-1,) + rest)
    kind = node.op[len("Segment"):].lower()
    if kind == "prod":
        return [_padded_prod(data, ids, n) if is_static(ids) else _scanned_prod(data, ids, n)]
    reduce = getattr(jax.ops, "segment_" + ("sum" if kind == "mean" else kind))
    out = reduce(data, ids, n, indices_are_sorted=True)
    count = jax.ops.segment_sum(jnp.ones(ids.shape, np.int32), ids, n).reshape((n,) + (1,) * len(rest))
    if kind == "mean":  # (an integer mean rounds toward zero, as TensorFlow's)
        divisor = jnp.broadcast_to(jnp.maximum(count, 1).astype(out.dtype), out.shape)
        out = out / divisor if jnp.issubdtype(out.dtype, jnp.inexact) else jax.lax.div(out, divisor)
    elif kind in ("max", "min"):
        out = jnp.where(count > 0, out, jnp.zeros_like(out))
    return [out]


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _traced_prod(data: Any, ids: Any, n: int) -> Any:
    """``UnsortedSegmentProd`` of run-time ids, whose derivative JAX has only for unique ids: TensorFlow's
    gradient (``_UnsortedSegmentProdGrad``): the product of the others in the segment, through one zero,
    none through two."""
    return jax.ops.segment_prod(data, ids, n)


def _traced_prod_fwd(data: Any, ids: Any, n: int) -> tuple[Any, Any]:
    out = _traced_prod(data, ids, n)
    return out, (data, ids, out)


def _traced_prod_bwd(n: int, saved: Any, g: Any) -> tuple[Any, None]:
    data, ids, out = saved
    is_zero = data == 0
    zeros = jax.ops.segment_sum(is_zero.astype(jnp.int32), ids, n)
    g = jnp.where(zeros > 1, jnp.zeros_like(g), g)
    others = jax.ops.segment_prod(jnp.where(is_zero, jnp.ones_like(data), data), ids, n)
    at = jnp.maximum(ids, 0)
    partial = jnp.where(is_zero, others[at], out[at] / data)
    kept = ((ids >= 0) & (ids < n)).reshape(ids.shape + (1,) * (data.ndim - 1))
    return jnp.where(kept, g[at], jnp.zeros_like(data)) * partial, None


_traced_prod.defvjp(_traced_prod_fwd, _traced_prod_bwd)


def _unsorted(name: str) -> Op:
    def op(node: Node, args: list[Any]) -> list[Any]:
        """The reduction of ``data``'s rows by ``segment_ids`` into ``num_segments`` rows; an empty
        segment gives 0 for a sum, 1 for a product, the dtype's lowest (highest) value for a maximum
        (minimum), as in TensorFlow."""
        data, ids, n = args
        n = int(learned_value(node, n, "num_segments"))  # (a run-time count, max(ids) + 1: learned by jta.checked)
        if n < 0:
            invalid(node, (
                f"Input num_segments == {n} must not be negative."))
        data = jnp.asarray(data).reshape((-1,) + np.shape(data)[np.ndim(ids):])
        ids = _checked_unsorted(node, ids, n)
        if name == "segment_prod" and is_static(ids):  # (differentiable for repeated ids too)
            return [_padded_prod(data, ids, n)]
        if name == "segment_prod":
            return [_traced_prod(data, jnp.asarray(ids), n)]
        out = getattr(jax.ops, name)(data, jnp.asarray(ids), n)
        if name in ("segment_max", "segment_min"):
            info = jnp.finfo(data.dtype) if jnp.issubdtype(data.dtype, jnp.floating) else jnp.iinfo(data.dtype)
            count = jax.ops.segment_sum(jnp.ones(ids.shape, np.int32), ids, n).reshape((n,) + (1,) * (data.ndim - 1))
            out = jnp.where(count > 0, out, info.min if name == "segment_max" else info.max)
        return [out]
    return op


for _name, _fn_name in (("UnsortedSegmentSum", "segment_sum"), ("UnsortedSegmentMax", "segment_max"),
                        ("UnsortedSegmentMin", "segment_min"), ("UnsortedSegmentProd", "segment_prod")):
    OPS[_name] = _unsorted(_fn_name)
