"""The two storage forms (see ``jta._core.array``): element access after the kernels' checks.

Functions named ``dense_*`` work on the one-buffer form at static or traced indices and record
the checks that depend on traced values; ``slots_*`` work on the per-slot form at Python-int
indices and raise at once (everything there is static). ``grow``, ``pin_shape`` and
``to_dense`` move an array between sizes and forms. The kernels in ``jta._core.kernels`` validate
their inputs in TensorFlow's order first, then call exactly one of these per element access.
"""

from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._records import records, slots
from .._records.catalogue import LEARNS, Error
from . import buffer, shapes
from .array import ArrayData, ArrayMeta, ArrayT, logical_size, raise_if_concrete
from .inputs import widened
from .memory import check_buffer

Index = buffer.Index


# -- sizes and forms ------------------------------------------------------------------------
def _slots(m: ArrayMeta) -> tuple[tuple[int, shapes.Shape], ...]:
    """The per-slot table ``((flags, shape), ...)`` of an array in the per-slot form."""
    assert m.slots is not None, "an array in the one-buffer form has no slot table"
    return m.slots


def grow(ta: ArrayT, n: int) -> ArrayT:
    """Grow a statically sized array to ``n`` slots (eager code and Python indices)."""
    m = ta._meta
    if not ta.is_dense:
        check_buffer(ta.name, f"growing to size {n}", n, m.element_shape, m.dtype, m.checks)
        extra = n - len(_slots(m))
        changes: dict[str, Any] = dict(slots=_slots(m) + ((0, None),) * extra, data=tuple(ta._data) + (None,) * extra)
        if m.static_size is not None:
            changes["static_size"] = n
        return ta.replace(**changes)
    data, flags = ta._data, ta._flags
    if n > data.shape[0]:
        # Geometric growth: n writes in a Python loop reallocate (and recompile) log(n) times, not n.
        pad = max(n, 2 * data.shape[0]) - data.shape[0] if m.static_size is not None else n - data.shape[0]
        check_buffer(ta.name, f"growing to size {n}", data.shape[0] + pad, m.element_shape, m.dtype, m.checks)
        data = jnp.concatenate([data, jnp.zeros((pad, *data.shape[1:]), data.dtype)])
        if flags is not None:
            flags = jnp.concatenate([flags, jnp.zeros((pad,), jnp.int32)])
    if m.static_size is not None:
        return ta.replace(data=data, flags=flags, static_size=n)
    assert ta._traced_size is not None  # (no static size: a traced one)
    return ta.replace(data=data, flags=flags, traced_size=jnp.maximum(ta._traced_size, n))


def pin_shape(ta: ArrayT, shape: tuple[int, ...]) -> ArrayT:
    """``identical_element_shapes``: the first write fixes the element shape."""
    m = ta._meta
    if not m.infer_shape or shapes.fully_defined(m.element_shape):
        return ta
    ta = ta.replace(element_shape=tuple(shape))
    return to_dense(ta) if can_be_dense(ta) else ta


def python_shape(ta: ArrayT, shape: tuple[int, ...]) -> ArrayT:
    """An empty unstack/scatter: TF's Python layer fixes ``shape``, the kernel learns nothing."""
    m = ta._meta
    if not m.infer_shape or shapes.fully_defined(m.element_shape):
        return ta
    return ta.replace(python_shape=shapes.merge(ta.element_shape, shape))


def can_be_dense(ta: ArrayData) -> bool:
    m = ta._meta
    if not shapes.fully_defined(m.element_shape) or m.slots is None:
        return False
    return all(shape is None or tuple(shape) == m.element_shape for _, shape in m.slots)


def to_dense(ta: ArrayT) -> ArrayT:
    m = ta._meta
    shape = shapes.dims(m.element_shape)
    slots = _slots(m)
    check_buffer(ta.name, "fixing the element shape", len(slots), shape, m.dtype, m.checks)
    # Only the written slots are stacked: one operand per slot made the first write into a large
    # array (whose element shape it fixes) compile a stack of thousands of zeros.
    written = [k for k, v in enumerate(ta._data) if v is not None]
    # An array with a capacity gets its whole buffer now, as it would have had with its element shape.
    rows = len(slots) if m.capacity is None else max(m.capacity, len(slots))
    data = jnp.zeros((rows, *shape), m.dtype)
    if written:
        data = data.at[np.asarray(written, np.int32)].set(jnp.stack([ta._data[k] for k in written]))
    bits = [bits for bits, _ in slots] + [0] * (rows - len(slots))
    flags = jnp.asarray(np.asarray(bits, np.int32)) if m.checks else None
    return ta.replace(data=data, flags=flags, slots=None)


def as_index(i: Any) -> jax.Array:
    """A traced index in its own integer dtype (int64 under x64): range checks come before any
    narrowing, so ``2**33 + 1`` is out of range rather than slot 1."""
    i = jnp.asarray(i)
    return widened(i) if jnp.issubdtype(i.dtype, jnp.integer) else i.astype(jnp.int32)


def _needs_capacity(ta: ArrayData, what: str) -> None:
    if ta._meta.capacity is None:
        exc = Error.DYNAMIC_NEEDS_CAPACITY.exception(name=ta.name, what=what)
        exc.plan_number = ta._meta.plan  # type: ignore[attr-defined]  # jta.checked gives it a buffer and retraces
        raise exc


# -- error records ----------------------------------------------------------------------------
def high_word(error: Optional[jax.Array], value: Any) -> Any:
    """What a record narrower than ``value`` loses of it: an array made before x64 was enabled
    has a 32-bit record, which keeps the (signed) low word of an int64 index or length; this is
    ``(value - low) >> 32``, which the catalogue adds back (a ``<field>_high`` field), so that
    ``2**32`` is reported as itself, not as 0; so does a ``uint32`` value past ``2**31`` in a
    32-bit record. ``0`` when the record keeps ``value`` whole."""
    assert error is not None, "records are kept with checks on only"
    value = jnp.asarray(value)
    if value.dtype == jnp.uint32 and error.dtype == jnp.int32:  # kept as a negative low word past 2**31
        return (value >> 31).astype(jnp.int32)
    if value.dtype.itemsize <= error.dtype.itemsize:
        return 0
    return (value - value.astype(error.dtype).astype(value.dtype)) >> 32


def record_index(error: Optional[jax.Array], bad: Any, code: Error | int, index: Any, size: Any) -> jax.Array:
    """Record an error whose fields are ``(index, size, index_high)`` (an index out of range)."""
    assert error is not None, "records are kept with checks on only"
    return records.record(error, bad, code, index, size, high_word(error, index))


def beyond_code(ta: ArrayData, beyond: Error) -> Error | int:
    """The code word of an index past ``ta``'s buffer: one ``jta.checked`` learns from
    (:data:`~jta._records.catalogue.LEARNS`) when its plan sized the buffer."""
    learned = ta._meta.plan is not None and beyond is Error.WRITE_BEYOND_CAPACITY  # (what jta.checked grows)
    return beyond.code | LEARNS if learned else beyond


def record_first(error: Optional[jax.Array], codes: Any, *fields: Any) -> jax.Array:
    """Record the error of the first position whose entry of ``codes`` (one error code per
    position, 0: none) is set, with up to three ``fields`` (each one per position, or a scalar).

    TensorFlow's multi-index kernels (``ReadMany``, ``WriteOrAggregateMany``, Split's writes) go
    through the positions in order and stop at the first failure, so that is the one reported."""
    assert error is not None, "records are kept with checks on only"
    codes = jnp.asarray(codes)
    if codes.shape[0] == 0:
        return error
    k = jnp.argmax(codes != 0)
    values = [jnp.asarray(f)[k] if jnp.ndim(f) else f for f in fields]
    return records.record(error, codes[k] != 0, codes[k], *values)


# -- one element ----------------------------------------------------------------------------
def _is_static(ta: ArrayData, i: Any) -> bool:
    return isinstance(i, int) and ta._meta.static_size is not None


def _check_index(ta: ArrayData, i: Any, grows: bool, grow_size: bool, out_of_range: Error, beyond: Error
                 ) -> tuple[Any, Any, Any, Any]:
    """The range check of one index: ``(index, ok, error, traced_size)``; ``ok`` is ``True`` for
    a static index (the kernel has checked it). An array that ``grows`` (a ``dynamic_size`` array
    written, a gradient array read) accepts any index within its capacity, and with ``grow_size``
    its traced size grows to it."""
    error, size = ta._record, ta._traced_size
    if _is_static(ta, i):
        return i, True, error, size
    i, cap = as_index(i), ta._data.shape[0]
    if grows:
        ok = (i >= 0) & (i < cap)
        if ta._meta.checks:
            error = record_index(error, i < 0, out_of_range, i, logical_size(ta))
            error = record_index(error, i >= cap, beyond_code(ta, beyond), i, cap)
        if grow_size and size is not None:
            size = jnp.where(ok, jnp.maximum(size, (i + 1).astype(jnp.int32)), size)
    else:
        limit = logical_size(ta)
        ok = (i >= 0) & (i < limit)
        if ta._meta.checks:
            error = record_index(error, ~ok, out_of_range, i, limit)
    return i, ok, error, size


def _mark(flags: jax.Array, error: Any, j: Index, op: str) -> tuple[jax.Array, Any]:
    """Slot ``j``'s flags after ``op`` (``slots.OPS``), and the error they show recorded."""
    if error is None:
        return slots.mark(flags, j, op), error
    return slots.update(flags, error, j, op)


def dense_write(ta: ArrayT, i: Index, value: jax.Array) -> ArrayT:
    """Write (or, for a gradient array, add) ``value`` at slot ``i`` of the buffer."""
    m = ta._meta
    data, flags = ta._data, ta._flags
    cap = data.shape[0]
    if m.dynamic_size and not _is_static(ta, i):
        _needs_capacity(ta, "written at a traced index (inside jit or lax.scan)")
    i, ok, error, size = _check_index(ta, i, m.dynamic_size, True, Error.WRITE_OUT_OF_RANGE,
                                      Error.WRITE_BEYOND_CAPACITY)
    if cap == 0:  # no rows, so any traced index is out of range (recorded above); JAX cannot index an empty axis
        return raise_if_concrete(ta.replace(record=error, traced_size=size))
    row = i
    if ok is not True:
        # The data write is one in-place dynamic-update-slice, which clamps a traced index into
        # the buffer (a dropped scatter adds a bounds check and a select per step). Out of range,
        # the error record above poisons the array (and the flags update is dropped); with
        # checks=False the write lands in the nearest slot, as TensorFlow's XLA lowering does.
        # The write gets the index as given: in a differentiated loop that writes at an index
        # the loop scans (``jnp.arange``), the backward loop reads that input again, where a
        # clamped copy would be saved per step.
        j = jnp.where(ok, jnp.clip(i, 0, cap - 1).astype(jnp.int32), cap)
    else:
        j = i
    if flags is not None:
        flags, error = _mark(flags, error, j, "add" if m.is_accumulator else "write")
    data = buffer.write_row(data, row, value, m.is_accumulator or not m.checks)  # checks off: TF's XLA lowering adds
    return raise_if_concrete(ta.replace(data=data, flags=flags, record=error, traced_size=size))


def slots_write(ta: ArrayT, i: int, value: jax.Array) -> ArrayT:
    m = ta._meta
    table = _slots(m)
    bits, shape = table[i]
    if bits & records.READ:
        Error.WRITE_AFTER_READ.raise_(name=ta.name, index=i)
    old = ta._data[i]
    if bits & records.WRITTEN:
        if not m.is_accumulator:
            Error.WRITTEN_TWICE.raise_(name=ta.name, index=i)
        assert shape is not None  # (a written slot has a shape)
        if tuple(shape) != tuple(value.shape):
            Error.AGGREGATE_SHAPE.raise_(name=ta.name, index=i, existing=shapes.debug_str(shape),
                                         shape=shapes.debug_str(tuple(value.shape)))
        if old is not None:
            value = old + value
    slots = table[:i] + ((bits | records.WRITTEN, tuple(value.shape)),) + table[i + 1:]
    return ta.replace(slots=slots, data=ta._data[:i] + (value,) + ta._data[i + 1:])


def dense_read(ta: ArrayT, i: Index, mark: bool) -> tuple[ArrayT, jax.Array]:
    """The value at slot ``i``; with ``mark`` the slot is marked read (and cleared)."""
    m = ta._meta
    data, flags = ta._data, ta._flags
    cap = data.shape[0]
    # Gradient arrays grow on reads past their size (a raw-op read, which marks the slot).
    i, ok, error, size = _check_index(ta, i, m.is_accumulator, mark, Error.READ_OUT_OF_RANGE, Error.READ_BEYOND_CAPACITY)
    if cap == 0:  # no rows: the traced index is out of range (recorded above)
        ta = ta.replace(record=error, traced_size=size)
        return raise_if_concrete(ta) if mark else ta, jnp.zeros(data.shape[1:], data.dtype)
    if not isinstance(i, int) and i.dtype != jnp.int32:  # narrowed after the range check above
        i = jnp.clip(i, 0, cap - 1).astype(jnp.int32)
    value = lax.index_in_dim(data, i, 0, keepdims=False) if isinstance(i, int) else buffer.read_row(data, i)
    if flags is not None and mark:
        j = i if ok is True else jnp.where(ok, i, cap)
        flags, error = _mark(flags, error, j, "read_clear" if m.clear_after_read or m.is_accumulator else "read")
    ta = ta.replace(flags=flags, record=error, traced_size=size)
    return raise_if_concrete(ta) if mark else ta, value


def unknown_shape_read(ta: ArrayData, i: int) -> Exception:
    return Error.UNKNOWN_SHAPE_READ.exception(name=ta.name, index=i, element_shape=shapes.debug_str(ta._meta.element_shape))


def slots_read(ta: ArrayT, i: int, mark: bool) -> tuple[ArrayT, jax.Array]:
    m = ta._meta
    table = _slots(m)
    bits, shape = table[i]
    if not bits & records.WRITTEN:
        if not shapes.fully_defined(m.element_shape):
            raise unknown_shape_read(ta, i)
        shape = m.element_shape
    if bits & records.READ and (m.clear_after_read or m.is_accumulator):
        Error.READ_CLEARED.raise_(name=ta.name, index=i)
    value = ta._data[i]
    if value is None:
        value = jnp.zeros(shapes.dims(shape), m.dtype)
    if not mark:
        return ta, value
    slots = table[:i] + ((bits | records.WRITTEN | records.READ, shape),) + table[i + 1:]
    return ta.replace(slots=slots), value


# -- many elements --------------------------------------------------------------------------
def dense_gather(ta: ArrayT, idx: Any, static: bool, mark: bool) -> tuple[ArrayT, jax.Array]:
    """The rows ``idx`` (NumPy when ``static``: then in range and checked in order already)."""
    m = ta._meta
    data, flags, error, size = ta._data, ta._flags, ta._record, ta._traced_size
    cap = data.shape[0]
    limit = cap if m.is_accumulator else logical_size(ta)
    ok = (idx >= 0) & (idx < limit)
    # Per position, the error its read fails with (0: none); record_first keeps the first.
    codes: Any = None
    if m.checks and not static:
        beyond = Error.READ_BEYOND_CAPACITY if m.is_accumulator else Error.READ_OUT_OF_RANGE
        codes = jnp.where(ok, 0, jnp.where(idx < 0, Error.READ_OUT_OF_RANGE.code, beyond.code))
    if m.is_accumulator and mark and size is not None and not static:
        size = jnp.maximum(size, jnp.max(jnp.where(ok, idx + 1, 0)).astype(jnp.int32))
    value = buffer.take_rows(data, idx) if cap else jnp.zeros(idx.shape + data.shape[1:], data.dtype)
    if flags is not None and mark and cap:  # (no rows: every traced index is out of range)
        j = jnp.where(ok, idx, cap)
        old = flags.at[j].get(mode="fill", fill_value=0)
        clears = m.clear_after_read or m.is_accumulator
        new = records.read_flags(old, clears)
        if clears:  # a second read of a slot: read before, or earlier in this gather
            again = (((old & records.READ) != 0) | records.repeated(j, cap)) & ok
            new = jnp.where(again, new | records.E_READ_CLEARED, new)
            if codes is not None:
                codes = jnp.where((codes == 0) & again, Error.READ_CLEARED.code, codes)
            elif not records.is_concrete(old):  # (else the kernel has checked them in order)
                codes = jnp.where(again, Error.READ_CLEARED.code, 0)
        flags = flags.at[j].set(new, mode="drop")
    if codes is not None:
        sizes: Any = logical_size(ta)
        if m.is_accumulator and idx.shape[0]:
            # A gradient array grows as ReadMany reads past its size (its static size too, and
            # in a read that returns no new array): position k sees the size that the reads
            # before it left (gather([4, -1]) of a size-2 array fails at -1 with size 5).
            before = jnp.concatenate([jnp.zeros((1,), idx.dtype), jnp.where(ok, idx + 1, 0)[:-1]])
            sizes = jnp.maximum(sizes, lax.cummax(before))
        sizes = jnp.where(codes == Error.READ_BEYOND_CAPACITY.code, cap, sizes)
        error = record_first(error, codes, idx, sizes, high_word(error, idx))
    ta = ta.replace(flags=flags, record=error, traced_size=size)
    return (raise_if_concrete(ta) if mark else ta), value


def _sizes_as_written(ta: ArrayData, idx: Any, size: Any) -> Any:
    """Per position of ``idx``, the array's size when that write happens: a ``dynamic_size`` array
    grows with each write (``LockedWriteOrAggregate``), so a failing position reports the size the
    writes before it left; any other array has one ``size``."""
    if not ta.dynamic_size or idx.shape[0] == 0:
        return size
    # Clipped before narrowing: a write past the capacity has failed already (recorded first).
    grown = jnp.clip(jnp.asarray(idx), -1, ta._data.shape[0])[:-1].astype(jnp.int32) + 1
    before = jnp.concatenate([jnp.zeros((1,), jnp.int32), grown])
    return jnp.maximum(logical_size(ta), lax.cummax(before))


def _record_writes(error: Optional[jax.Array], codes: Any, given: Any, sizes: Any, shape_errors: Any) -> jax.Array:
    """Record the first failing write of a scatter: ``codes`` are the slots' errors, fields
    ``(index, size, index_high)``; ``shape_errors`` (or ``None``) are ``(codes, length, expected)``
    of the value checks a split's write makes before the slot's (``LockedWriteOrAggregate``
    checks the shape, then the slot), which win at their position."""
    assert error is not None, "records are kept with checks on only"
    fields = (given, sizes, high_word(error, given))
    if shape_errors is not None:
        shape_codes, length, expected = shape_errors
        bad = shape_codes != 0
        codes = jnp.where(bad, shape_codes, codes)
        fields = (given, jnp.where(bad, length, sizes), jnp.where(bad, expected, fields[2]))
    return record_first(error, codes, *fields)


def dense_scatter(ta: ArrayT, idx: Any, static: bool, value: jax.Array, shape_errors: Any = None) -> ArrayT:
    """Write ``value[k]`` at rows ``idx[k]`` (NumPy when ``static``: then in range and checked).
    ``shape_errors``: per position, a value check that comes first (see ``_record_writes``)."""
    m = ta._meta
    data, flags, error, size = ta._data, ta._flags, ta._record, ta._traced_size
    cap = data.shape[0]
    cur: Any = logical_size(ta)
    given = idx  # the indices as given, for the error record
    if static:
        ok: Any = idx >= 0  # NumPy (negative static indices: only when recording in compiled code)
        idx = np.where(ok, idx, cap).astype(np.int32)  # dropped, as out-of-range writes are
    else:
        if m.dynamic_size:
            _needs_capacity(ta, "scattered at traced indices")
        limit = cap if m.dynamic_size else logical_size(ta)
        max_index = jnp.max(idx)
        if m.dynamic_size:
            assert size is not None  # (a dynamic_size array has a traced size)
            size = jnp.maximum(size, jnp.minimum(max_index + 1, cap).astype(jnp.int32))
        ok = (idx >= 0) & (idx < limit)
        if m.checks:
            cur = size if m.dynamic_size else limit
            if m.dynamic_size:
                error = record_index(error, max_index >= cap, beyond_code(ta, Error.WRITE_BEYOND_CAPACITY), max_index, cap)
            else:
                error = record_index(error, max_index >= cur, Error.SCATTER_OUT_OF_RANGE, max_index, cur)
    if cap == 0:  # no rows: every traced index is out of range (too large: recorded above)
        if m.checks:
            error = _record_writes(error, jnp.where(jnp.asarray(given) < 0, Error.WRITE_OUT_OF_RANGE.code, 0),
                                   given, _sizes_as_written(ta, given, cur), None)
        return raise_if_concrete(ta.replace(record=error, traced_size=size))
    if flags is not None:
        j = jnp.where(ok, idx, cap)
        old = flags.at[j].get(mode="fill", fill_value=0)
        new = records.written_flags(old, m.is_accumulator)
        rep = records.repeated(j, cap) if not m.is_accumulator else None  # written earlier in this scatter
        if rep is not None:
            new = jnp.where(rep, new | records.E_WRITTEN_TWICE, new)
        if shape_errors is not None or not (static and records.is_concrete(old)):  # (else the kernel has checked them)
            # Per position, the error its write fails with (0: none); record_first keeps the first.
            after_read = ((old & records.READ) != 0) & ok
            codes = jnp.where(~ok if static else idx < 0, Error.WRITE_OUT_OF_RANGE.code,
                              jnp.where(after_read, Error.WRITE_AFTER_READ.code, 0))
            if rep is not None:
                twice = ((((old & records.WRITTEN) != 0) & ~after_read) | rep) & ok
                codes = jnp.where((codes == 0) & twice, Error.WRITTEN_TWICE.code, codes)
            error = _record_writes(error, codes, given, _sizes_as_written(ta, given, cur), shape_errors)
        flags = flags.at[j].set(new, mode="drop")
    if not static:  # out of range: dropped when recorded, clamped (as write does) when checks are off
        idx = jnp.where(ok, idx, cap) if m.checks else jnp.clip(idx, 0, cap - 1)
    data = buffer.add_rows(data, idx, value, aggregate=m.is_accumulator or not m.checks)
    return raise_if_concrete(ta.replace(data=data, flags=flags, record=error, traced_size=size))


def static_flags(ta: ArrayData) -> Any:
    """The slot flags as NumPy when they are concrete (eager code), else ``None``."""
    return np.asarray(ta._flags) if ta._flags is not None and records.is_concrete(ta._flags) else None
