"""The buffer: pure functions on a dense ``[capacity, *element_shape]`` array.

This is the only place where reverse-mode cost is decided. A forward slot is written once, into
zeros, so a write may *set* the row (one in-place dynamic-update-slice), but its tangent is
always a scatter-*add*: the transpose of a scatter-add passes the cotangent buffer through and
reads out one slot, so reverse mode through a loop stays linear in the number of steps, where
differentiating the set itself would zero the slot in the cotangent buffer (a dynamic-update-slice
that XLA turns into a whole-buffer copy per backward step).
"""

from __future__ import annotations

import functools
from typing import Any, Optional, Union

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax._src import ad_util, core
from jax.interpreters import ad, batching, mlir

Index = Union[int, jax.Array]


def static_range(idx: Any) -> Optional[tuple[int, int]]:
    """``(start, stop)`` when ``idx`` is a NumPy vector ``start, start + 1, ..., stop - 1``."""
    if not isinstance(idx, np.ndarray) or idx.ndim != 1 or idx.size == 0:
        return None
    start = int(idx[0])
    return (start, start + idx.size) if np.array_equal(idx, np.arange(start, start + idx.size)) else None


def take_rows(data: jax.Array, idx: Any) -> jax.Array:
    """``data.at[idx].get(mode="clip")``. Static in-range consecutive indices (``stack()``) are a
    slice, the whole buffer for ``range(capacity)``: no gather, so no copy of the buffer, and the
    gradient flows into the buffer's cotangent as is instead of through a scatter."""
    rows = static_range(idx)
    if rows is not None and 0 <= rows[0] and rows[1] <= data.shape[0]:
        return lax.slice_in_dim(data, rows[0], rows[1])
    if not isinstance(idx, np.ndarray):  # clamped, not wrapped, as read_row does
        idx = jnp.clip(idx, 0, data.shape[0] - 1)
    return data.at[idx].get(mode="clip")


def add_rows(data: jax.Array, idx: Any, value: jax.Array, aggregate: bool = True) -> jax.Array:
    """``data.at[idx].add(value, mode="drop")`` for an aggregating array (a gradient accumulator,
    or checks off, where duplicates add up as in TensorFlow's XLA lowering); otherwise the rows
    are set: each is written once, into zeros, and adding would turn -0.0 into +0.0 and flush
    subnormals. Static indices ``range(capacity)`` (``unstack()`` of a whole array) are the value
    itself (or an elementwise add), with no scatter."""
    whole = static_range(idx) == (0, data.shape[0])
    if not aggregate:
        return value if whole else data.at[idx].set(value, mode="drop")
    if whole:
        return jnp.logical_or(data, value) if data.dtype == np.bool_ else data + value
    return add_at(data, idx, value, mode="drop")


def _slice(data: jax.Array, i: Index) -> jax.Array:
    """Row ``i``, clamped into the buffer as XLA clamps (no wrap-around of negative indices, as
    ``data[i]`` would do): an out-of-range index is an error recorded elsewhere, or, with checks
    off, reads the nearest row, in the value and in its tangent alike."""
    return lax.dynamic_index_in_dim(data, i, 0, keepdims=False, allow_negative_indices=False)


@jax.custom_jvp
def read_row(data: jax.Array, i: jax.Array) -> jax.Array:
    """``data[i]`` at a traced index (a dynamic slice)."""
    return _slice(data, i)


@read_row.defjvp
def _read_row_jvp(primals: Any, tangents: Any) -> tuple[jax.Array, jax.Array]:
    # Under differentiation the value read is saved as a residual of the step that uses it.
    # XLA fuses a duplicate of the dynamic slice into that residual's store, a second reader of
    # the buffer that nothing orders before a later in-place write to the same (loop-carried)
    # buffer, so XLA:CPU copies the whole buffer in every step: a loop that reads what it wrote
    # (W3) became O(T^2). A conditional is opaque to fusion: the value is materialized once, by
    # a reader that the write depends on. Both branches compute the same (clamped) slice. It
    # costs ~1 us per differentiated read on CPU; elsewhere (unmeasured: a conditional in a GPU
    # loop may cost a host sync) the plain slice is kept.
    data, i = primals
    return read_row_opaque(data, i), _slice(tangents[0], i)


def read_row_opaque(data: jax.Array, i: jax.Array) -> jax.Array:
    def opaque(data: jax.Array, i: jax.Array) -> jax.Array:
        return lax.cond(i >= 0, lambda: _slice(data, i), lambda: _slice(data, 0))

    return lax.platform_dependent(data, i, cpu=opaque, default=read_row.fun)


def _row(data: jax.Array, i: Index) -> jax.Array:
    return _slice(data, i)


def _set_row(data: jax.Array, i: Index, row: jax.Array) -> jax.Array:
    return lax.dynamic_update_index_in_dim(data, row, i, 0, allow_negative_indices=False)


def _add_row(data: jax.Array, i: Index, value: jax.Array) -> jax.Array:
    """``data.at[i].add(value)`` for an in-range ``i``: one in-place dynamic-update-slice."""
    old = _row(data, i)
    return _set_row(data, i, jnp.logical_or(old, value) if data.dtype == np.bool_ else old + value)


def write_row(data: jax.Array, i: Index, value: jax.Array, aggregate: bool) -> jax.Array:
    """Write ``value`` into slot ``i`` (in range) of ``data``: added for an aggregating gradient
    array, set for a forward array. A forward slot is written once, into zeros, so setting equals
    adding and skips reading the old row. With ``checks=False`` writes add (``aggregate``), as
    TensorFlow's XLA lowering does, so that a second write agrees with the scatter-add tangent."""
    if not jnp.issubdtype(data.dtype, jnp.inexact):  # not differentiable: no tangent rule needed
        return _write_row_diff.fun(data, i, value, aggregate)
    return _write_row_diff(data, i, value, aggregate)


@functools.partial(jax.custom_jvp, nondiff_argnums=(3,))
def _write_row_diff(data: jax.Array, i: Index, value: jax.Array, aggregate: bool) -> jax.Array:
    return _add_row(data, i, value) if aggregate else _set_row(data, i, value)


@_write_row_diff.defjvp
def _write_row_diff_jvp(aggregate: bool, primals: Any, tangents: Any) -> tuple[jax.Array, jax.Array]:
    # The tangent map is a scatter-add, whatever the primal does. Differentiating a set (or a
    # read-modify-write) of one slot as is would make the transpose zero that slot in the
    # cotangent buffer: a dynamic-update-slice for which XLA copies the whole buffer in every
    # backward step, O(T^2). The transpose of a scatter-add passes the cotangent buffer through
    # and reads out slot ``i``: linear in T. (Both agree on valid programs: a forward slot is
    # written once, into zeros.)
    data, i, value = primals
    t_data, _, t_value = tangents
    return _write_row_diff.fun(data, i, value, aggregate), _add_row_linear(t_data, t_value, i)


def _add_row_linear(t_data: Any, t_value: Any, i: Any) -> Any:
    """``t_data.at[i].add(t_value)`` (the tangent of a write), as a linear primitive whose
    transpose reads the cotangent row through :func:`read_row_opaque`: JAX's own transpose (a
    gather) was fused into several consumers of the backward step, and XLA:CPU then copied the
    whole cotangent buffer in every backward step of a read-after-write loop (W3u, O(T^2))."""
    return add_row_p.bind(ad.instantiate_zeros(t_data), ad.instantiate_zeros(t_value), jnp.asarray(i))


def _add_row_impl(t_data: jax.Array, t_value: jax.Array, i: jax.Array) -> jax.Array:
    return _add_row(t_data, i, t_value.astype(t_data.dtype))  # (an index out of range: clamped, as the primal)


def _add_row_transpose(ct: Any, t_data: Any, t_value: Any, i: Any) -> list[Any]:
    if type(ct) is ad_util.Zero:
        return [ad_util.Zero(t_data.aval) if ad.is_undefined_primal(t_data) else None,
                ad_util.Zero(t_value.aval) if ad.is_undefined_primal(t_value) else None, None]
    return [ct if ad.is_undefined_primal(t_data) else None,
            read_row_opaque(ct, i) if ad.is_undefined_primal(t_value) else None, None]


def _add_row_batch(args: Any, dims: Any) -> tuple[jax.Array, int]:
    return jax.vmap(_add_row_impl, in_axes=dims)(*args), 0


add_row_p = core.Primitive("jta_add_row")
add_row_p.def_impl(_add_row_impl)
add_row_p.def_abstract_eval(lambda t_data, t_value, i: t_data)  # (its sharding too)
mlir.register_lowering(add_row_p, mlir.lower_fun(_add_row_impl, multiple_results=False))
ad.primitive_transposes[add_row_p] = _add_row_transpose


def _add_row_jvp(primals: Any, tangents: Any) -> tuple[jax.Array, Any]:
    (t_data, t_value, i), (d_data, d_value, _) = primals, tangents  # linear in the first two
    if type(d_data) is ad_util.Zero and type(d_value) is ad_util.Zero:
        return add_row_p.bind(t_data, t_value, i), ad_util.Zero(d_data.aval)
    return add_row_p.bind(t_data, t_value, i), _add_row_linear(d_data, d_value, i)


ad.primitive_jvps[add_row_p] = _add_row_jvp
batching.primitive_batchers[add_row_p] = _add_row_batch


def _add_block_impl(t_data: jax.Array, t_values: jax.Array, start: jax.Array) -> jax.Array:
    rows = lax.dynamic_slice_in_dim(t_data, start, t_values.shape[0], 0)
    return lax.dynamic_update_slice_in_dim(t_data, rows + t_values.astype(t_data.dtype), start, 0)


def _add_block_transpose(ct: Any, t_data: Any, t_values: Any, start: Any) -> list[Any]:
    if type(ct) is ad_util.Zero:
        return [ad_util.Zero(t_data.aval) if ad.is_undefined_primal(t_data) else None,
                ad_util.Zero(t_values.aval) if ad.is_undefined_primal(t_values) else None, None]
    n = t_values.aval.shape[0] if ad.is_undefined_primal(t_values) else t_values.shape[0]
    return [ct if ad.is_undefined_primal(t_data) else None,
            lax.dynamic_slice_in_dim(ct, start, n, 0) if ad.is_undefined_primal(t_values) else None, None]


def _add_block_jvp(primals: Any, tangents: Any) -> tuple[jax.Array, Any]:
    (t_data, t_values, start), (d_data, d_values, _) = primals, tangents  # linear in the first two
    if type(d_data) is ad_util.Zero and type(d_values) is ad_util.Zero:
        return add_block_p.bind(t_data, t_values, start), ad_util.Zero(d_data.aval)
    return add_block_p.bind(t_data, t_values, start), add_block_p.bind(
        ad.instantiate_zeros(d_data), ad.instantiate_zeros(d_values), start)


# ``t_data`` with ``t_values`` added to its rows ``start, start + 1, ...`` (in range): the tangent
# of a block of row writes (``jta._delivery.scan_rewrite``), whose transpose passes the cotangent
# buffer through and slices the block out, as ``add_row_p``'s does for one row.
add_block_p = core.Primitive("jta_add_block")
add_block_p.def_impl(_add_block_impl)
add_block_p.def_abstract_eval(lambda t_data, t_values, start: t_data)
mlir.register_lowering(add_block_p, mlir.lower_fun(_add_block_impl, multiple_results=False))
ad.primitive_transposes[add_block_p] = _add_block_transpose
ad.primitive_jvps[add_block_p] = _add_block_jvp
batching.primitive_batchers[add_block_p] = lambda args, dims: (jax.vmap(_add_block_impl, in_axes=dims)(*args), 0)


def add_at(data: jax.Array, index: Any, value: jax.Array, **kw: Any) -> jax.Array:
    """``data.at[index].add(value)``; for bool (which JAX cannot add) a logical or, as tf2xla does."""
    if data.dtype == np.bool_:
        return data.at[index].max(value, **kw)
    return data.at[index].add(value, **kw)
