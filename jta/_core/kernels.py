"""TensorFlow's TensorArray kernels as functions on the pytree.

One function per kernel of ``tensorflow/core/kernels/tensor_array_ops.cc`` (the class named in
each docstring), checking its inputs in the kernel's order and raising the kernel's texts;
the per-element work of ``tensor_array.h`` (``WriteOrAggregate``, ``Read`` and their ``*Many``
loops) is in ``jta._core.storage``. Every function returns the new array first; ``mark`` says whether
a read marks slots as read (the raw ops do, TensorFlow's functional Python reads do not matter
because jta's high-level ``read`` returns no new array).
"""

from __future__ import annotations

from typing import Any, NoReturn, Union, cast

import jax
import jax.numpy as jnp
import numpy as np

from .._records import records
from .._records.catalogue import Error
from . import shapes, storage
from .array import ArrayData, from_cotangent, known_size, logical_size, raise_if_concrete, require_static_size
from .inputs import (
    as_indices,
    check_dtype,
    check_scalar_index,
    length_dtype,
    static_indices,
    static_int,
    static_ints,
    tf_lengths,
)

Index = Union[int, jax.Array]
_TRACED = "<traced>"


def usable(ta: ArrayData) -> Any:
    """``ta``, ready for a kernel. Refuses an array that ``jax.vmap`` returned (its leaves carry
    batch axes) outside ``vmap``. A cotangent array (from ``jax.vjp``/``jax.grad`` with respect
    to a TensorArray: its bookkeeping leaves are ``float0``) reads as the gradient of each
    element, without checks."""
    batch = batch_shape(ta)
    if batch:
        Error.BATCHED_OUTSIDE_VMAP.raise_(name=ta.name, batch=batch)
    return from_cotangent(ta)


def batch_shape(ta: ArrayData) -> tuple[int, ...]:
    """The leading batch axes of an array returned by ``jax.vmap`` (``()`` for one array)."""
    record = ta._record if ta._record is not None else ta._flags  # int32[4] / int32[capacity] per array
    if record is not None and hasattr(record, "shape"):
        return tuple(record.shape[:-1])
    if ta.is_dense and hasattr(ta._data, "ndim") and ta._meta.element_shape is not None:
        return tuple(ta._data.shape[: ta._data.ndim - 1 - len(ta._meta.element_shape)])
    return ()


def check_value_shape(ta: ArrayData, index: Any, shape: tuple[int, ...]) -> None:
    """``TensorArray::LockedWriteOrAggregate``'s check of a value against the element shape."""
    if not shapes.compatible(ta._meta.element_shape, tuple(shape)):
        Error.WRITE_SHAPE.raise_(name=ta.name, index=index, shape=shapes.debug_str(tuple(shape)),
                                 element_shape=shapes.debug_str(ta._meta.element_shape))


def _capacity_needs_shape(ta: ArrayData) -> NoReturn:
    Error.CAPACITY_NEEDS_SHAPE.raise_(name=ta.name, element_shape=shapes.debug_str(ta._meta.element_shape))


def _traced_needs_shape(ta: ArrayData, what: str) -> NoReturn:
    Error.TRACED_INDEX_NEEDS_SHAPE.raise_(name=ta.name, what=what, element_shape=shapes.debug_str(ta._meta.element_shape))


def _grown(ta: ArrayData, size: Any, index: int) -> Any:
    """The size of a ``dynamic_size`` array after a write at ``index`` (``LockedWriteOrAggregate``
    grows it before writing)."""
    return max(size, index + 1) if ta.dynamic_size and size is not None else size


def _write_out_of_range(ta: ArrayData, index: int, size: Any = ...) -> NoReturn:
    size = known_size(ta) if size is ... else size
    Error.WRITE_OUT_OF_RANGE.raise_(name=ta.name, index=index, size=_TRACED if size is None else size)


def write(ta: ArrayData, index: Index, value: jax.Array) -> Any:
    """``TensorArrayWriteOp``: index shape, dtype, then ``WriteOrAggregate`` (closed, range, shape)."""
    ta = usable(ta)
    index = as_indices(index, "TensorArrayWriteV3", "index")
    check_scalar_index(index)
    check_dtype(ta.dtype, value.dtype)
    ta.check_open()
    i = static_int(index)
    if i is not None:
        size = known_size(ta)
        if i < 0 or (not ta.dynamic_size and size is not None and i >= size):
            _write_out_of_range(ta, i)
        if ta.dynamic_size and size is not None and i >= size:
            ta = _grow(ta, i + 1)
    check_value_shape(ta, i if i is not None else _TRACED, value.shape)
    ta = storage.pin_shape(ta, value.shape)
    if ta.is_dense:
        return storage.dense_write(ta, index if i is None else i, value)
    if ta._meta.capacity is not None:
        _capacity_needs_shape(ta)
    if i is None:
        _traced_needs_shape(ta, "writing at a traced index")
    return storage.slots_write(ta, i, value)


def read(ta: ArrayData, index: Index, mark: bool = True) -> tuple[Any, jax.Array]:
    """``TensorArrayReadOp``: index shape, then ``Read`` (closed, range, cleared, unknown shape)."""
    ta = usable(ta)
    index = as_indices(index, "TensorArrayReadV3", "index")
    check_scalar_index(index)
    ta.check_open()
    m = ta._meta
    i = static_int(index)
    if i is not None:
        size = known_size(ta)
        if i < 0 or (not m.is_accumulator and size is not None and i >= size):
            Error.READ_OUT_OF_RANGE.raise_(index=i, size=size if size is not None else _TRACED)
        if m.is_accumulator and size is not None and i >= size:  # gradient arrays grow on reads
            if not shapes.fully_defined(m.element_shape):
                raise storage.unknown_shape_read(ta, i)
            ta = storage.grow(ta, i + 1)
    if ta.is_dense:
        return storage.dense_read(ta, index if i is None else i, mark)
    if i is None:
        _traced_needs_shape(ta, "reading at a traced index")
    return storage.slots_read(ta, i, mark)


def pack_or_gather(ta: ArrayData, indices: Any, mark: bool = True, element_shape: Any = None) -> tuple[Any, jax.Array]:
    """``TensorArrayPackOrGatherOp``: merge the ``element_shape`` attribute, then ``ReadMany``."""
    ta = usable(ta)
    indices = as_indices(indices, "TensorArrayGatherV3", "indices")
    m = ta._meta
    attr = shapes.as_shape(element_shape)
    merge_error = shapes.merge_error(m.element_shape, attr)
    if merge_error:
        raise merge_error
    if attr is not None:
        merged = shapes.merge(m.element_shape, attr)
        if merged != m.element_shape:
            ta = ta.replace(element_shape=merged)
            if storage.can_be_dense(ta):
                ta = storage.to_dense(ta)
    if np.ndim(indices) != 1:
        Error.INDICES_NOT_VECTOR.raise_(shape=shapes.debug_str(np.shape(indices)))
    if np.shape(indices)[0] == 0:  # reads nothing, so even a closed array gives [0, ...]
        es = shapes.merge(attr, ta._meta.element_shape)
        if not shapes.fully_defined(attr) and not (ta.is_dense and shapes.fully_defined(es)):
            Error.PACK_ZERO_UNKNOWN_SHAPE.raise_(shape=shapes.debug_str(attr))
        return ta, jnp.zeros((0, *shapes.dims(es)), m.dtype)
    ta.check_open()  # ReadMany
    static = static_indices(indices)
    if not ta.is_dense:
        if static is None:
            _traced_needs_shape(ta, "gather at traced indices")
        values = []
        for i in static:
            ta, v = read(ta, int(i), mark=mark)
            values.append(v)
        _check_gathered_shapes([tuple(v.shape) for v in values], attr)
        return ta, jnp.stack(values)
    size = known_size(ta)
    if static is None or (size is None and not m.is_accumulator):  # range checks against a traced size
        return storage.dense_gather(ta, storage.as_index(indices), False, mark)
    # ReadMany reads in order and stops at the first failure: an index out of range, or a cleared
    # slot (read earlier in this gather, or by an earlier op when the flags are concrete).
    clears = mark and m.checks and (m.clear_after_read or m.is_accumulator)
    bits = storage.static_flags(ta) if clears else None
    in_order = not clears or bits is not None  # else the flags are traced: failures are recorded in order
    seen: set[int] = set()
    grown = size  # a gradient array grows as ReadMany reads past its size, in order
    for i in static:
        if i < 0 or (not m.is_accumulator and size is not None and i >= size):
            Error.READ_OUT_OF_RANGE.raise_(index=int(i), size=grown)
        if m.is_accumulator and grown is not None and i >= grown:
            grown = int(i) + 1
        if in_order and clears and (int(i) in seen or (bits is not None and i < bits.shape[0] and bits[i] & records.READ)):
            Error.READ_CLEARED.raise_(name=ta.name, index=int(i))
        seen.add(int(i))
    if m.is_accumulator and size is not None and static.max() >= size:
        ta = storage.grow(ta, int(static.max()) + 1)
    # Kept NumPy: take_rows turns consecutive static indices into a slice.
    return storage.dense_gather(ta, static.astype(np.int32), in_order, mark)


def _check_gathered_shapes(gathered: list[tuple[int, ...]], attr: shapes.Shape) -> None:
    if not shapes.compatible(attr, gathered[0]):
        Error.GATHER_ATTR.raise_(attr=shapes.debug_str(attr), shape=shapes.debug_str(gathered[0]))
    for k, shape in enumerate(gathered[1:], 1):
        if shape != gathered[0]:
            Error.GATHER_INCONSISTENT.raise_(first=shapes.debug_str(gathered[0]), index=k, shape=shapes.debug_str(shape))


def _grow_within_capacity(ta: ArrayData, n: int) -> Any:
    """Grow an array whose size is traced (``dynamic_size`` with a static ``capacity``) to at
    least ``n`` slots: the buffer cannot grow inside compiled code, so ``n`` must fit. The limit is the
    ``capacity`` asked for: before the first write fixes the element shape no slot is allocated."""
    limit = ta.capacity if ta.is_dense or ta._meta.capacity is None else ta._meta.capacity
    if n > limit:
        Error.WRITE_BEYOND_CAPACITY.raise_(name=ta.name, index=n - 1, capacity=limit)
    return storage.grow(ta, n)


def _grow(ta: ArrayData, n: int) -> Any:
    """A ``dynamic_size`` array grown to ``n`` slots by a write; an array created with a
    ``capacity`` keeps to it eagerly too, so that eager and compiled code agree."""
    if ta._meta.capacity is not None:
        return _grow_within_capacity(ta, n)
    if n >= 2**31:
        Error.SIZE_TOO_LARGE.raise_(name=ta.name, what="growing to size", size=n)
    return storage.grow(ta, n)


def unpack_or_scatter(ta: ArrayData, indices: Any, value: jax.Array) -> Any:
    """``TensorArrayUnpackOrScatterOp``: dtype, rank, closed, indices, then ``WriteOrAggregateMany``."""
    ta = usable(ta)
    indices = as_indices(indices, "TensorArrayScatterV3", "indices")
    m = ta._meta
    check_dtype(ta.dtype, value.dtype)
    if value.ndim == 0:
        Error.UNPACK_VALUE_SCALAR.raise_(shape=shapes.debug_str(()))
    ta.check_open()  # the kernel's Size(), after the dtype and rank checks
    if np.ndim(indices) != 1:
        Error.INDICES_NOT_VECTOR.raise_(shape=shapes.debug_str(np.shape(indices)))
    n = np.shape(indices)[0]
    if n != value.shape[0]:
        Error.SCATTER_LENGTHS.raise_(n=n, rows=value.shape[0])
    static = static_indices(indices)
    size_before = known_size(ta)  # a dynamic array grows as WriteOrAggregateMany writes, in order
    if static is not None:
        max_index = int(static.max()) if n else -1
        size = known_size(ta)
        if size is None and n:  # grown at traced indices before: grow to a static index within capacity
            ta = _grow_within_capacity(ta, max_index + 1)
        elif m.dynamic_size and size is not None and max_index + 1 > size:
            ta = _grow(ta, max_index + 1)
            size = max_index + 1
        if size is not None and max_index >= size:
            Error.SCATTER_OUT_OF_RANGE.raise_(index=max_index, size=size)
    if n == 0:
        return ta
    check_value_shape(ta, static[0] if static is not None else _TRACED, value.shape[1:])
    ta = storage.pin_shape(ta, value.shape[1:])
    if not ta.is_dense:
        if static is None:
            _traced_needs_shape(ta, "scatter at traced indices")
        grown = size_before
        for k, i in enumerate(static):
            if i < 0:
                _write_out_of_range(ta, int(i), grown)
            grown = _grown(ta, grown, int(i))
            ta = storage.slots_write(ta, int(i), value[k])
        return ta
    if static is None:
        return storage.dense_scatter(ta, storage.as_index(indices), False, value)
    # WriteOrAggregateMany writes in order and stops at the first failure: a negative index, a
    # slot already read, or a slot written before (earlier in this scatter, or by an earlier op).
    bits = storage.static_flags(ta)
    if bits is None and m.checks:  # compiled code: the flags are traced, so the failures are recorded in order
        return storage.dense_scatter(ta, static, True, value)
    seen: set[int] = set()
    grown = size_before
    for i in static:
        if i < 0:
            _write_out_of_range(ta, int(i), grown)
        grown = _grown(ta, grown, int(i))
        slot_bits = 0 if bits is None else int(bits[i])
        if slot_bits & records.READ:
            Error.WRITE_AFTER_READ.raise_(name=ta.name, index=int(i))
        if m.checks and not m.is_accumulator and (int(i) in seen or slot_bits & records.WRITTEN):
            Error.WRITTEN_TWICE.raise_(name=ta.name, index=int(i))
        seen.add(int(i))
    # Kept NumPy: add_rows turns a full range into an elementwise add.
    return storage.dense_scatter(ta, static.astype(np.int32), True, value)


def concat_size(ta: ArrayData) -> Any:
    """How many elements ``concat`` reads: a gradient array's ``marked_size`` (set by the forward
    ``split``; -1 if never split), else the size when it is static (``None`` otherwise)."""
    return ta._meta.marked_size if ta.is_accumulator else known_size(ta)


def concat(ta: ArrayData, mark: bool = True, element_shape_except0: Any = None) -> tuple[Any, jax.Array, np.ndarray]:
    """``TensorArrayConcatOp``: returns ``(array, value, lengths)``."""
    ta = usable(ta)
    ta.check_open()
    m = ta._meta
    attr = shapes.as_shape(element_shape_except0)
    n = concat_size(ta) if m.is_accumulator else require_static_size(ta, "concat()")
    if n < 0:  # a gradient array whose forward was never split: TensorFlow aborts the process here
        Error.CONCAT_UNSPLIT_GRAD.raise_(name=ta.name)
    if n == 0:
        es = m.element_shape
        known = attr if shapes.fully_defined(attr) else (
            es[1:] if es is not None and len(es) >= 1 and shapes.fully_defined(es) else None)
        if known is None:
            Error.CONCAT_ZERO_UNKNOWN_SHAPE.raise_(shape=shapes.debug_str(attr))
        return ta, jnp.zeros((0, *shapes.dims(known)), m.dtype), np.zeros((0,), length_dtype())
    if ta.is_dense:
        ta, values = pack_or_gather(ta, np.arange(n), mark=mark)
        if values.ndim < 2:
            Error.CONCAT_SCALAR.raise_(index=0)
        _check_concat_attr(attr, tuple(values.shape[2:]))
        # `lengths` is static (element shapes are): a NumPy array stays concrete inside jit, so
        # Concat's gradient can split a ragged cotangent with it (TF's concat_grad).
        lengths = np.full((n,), values.shape[1], length_dtype())
        # An explicit dim 0: ``-1`` is ambiguous (ZeroDivisionError) when a trailing dim is 0.
        return ta, values.reshape((values.shape[0] * values.shape[1], *values.shape[2:])), lengths
    parts = []
    for i in range(n):  # the kernel reads every element (ReadMany) before checking them
        ta, v = read(ta, i, mark=mark)
        parts.append(v)
    for i, v in enumerate(parts):  # per element, in order, as the kernel's loop
        if v.ndim == 0:
            Error.CONCAT_SCALAR.raise_(index=i)
        if i == 0:
            _check_concat_attr(attr, tuple(parts[0].shape[1:]))
        elif tuple(v.shape[1:]) != tuple(parts[0].shape[1:]):
            Error.CONCAT_INCONSISTENT.raise_(first=shapes.debug_str(tuple(parts[0].shape[1:])), index=i,
                                             shape=shapes.debug_str(tuple(v.shape[1:])))
    lengths = np.asarray([v.shape[0] for v in parts], length_dtype())
    return ta, jnp.concatenate(parts), lengths


def _check_concat_attr(attr: shapes.Shape, rest: tuple[int, ...]) -> None:
    if not shapes.compatible(attr, rest):
        Error.CONCAT_ATTR.raise_(attr=shapes.debug_str(attr), shape=shapes.debug_str(rest))


def split(ta: ArrayData, value: jax.Array, lengths: Any, python_layer: bool = False) -> Any:
    """``TensorArraySplitOp``: lengths and value shapes, closed, size, dtype, then the writes.
    ``python_layer``: first the check that ``TensorArray.split`` makes in TensorFlow's Python."""
    ta = usable(ta)
    static = static_ints(lengths)
    if static is None:
        lengths = tf_lengths(lengths)
    if static is None and np.shape(lengths) == (0,):
        static = np.zeros((0,), np.int64)  # no length to trace
    if python_layer:
        ta = _python_split_check(ta, value, lengths, static)
    if np.ndim(lengths) != 1:
        Error.LENGTHS_NOT_VECTOR.raise_(shape=shapes.debug_str(np.shape(lengths)))
    if value.ndim == 0:
        Error.SPLIT_VALUE_SCALAR.raise_(shape=shapes.debug_str(()))
    if static is None:
        return _split_traced(ta, value, storage.as_index(lengths))
    return _split_static(ta, value, static)


def _python_split_check(ta: ArrayData, value: jax.Array, lengths: Any, static: Any) -> Any:
    """``TensorArray.split`` in TensorFlow's Python checks the piece shape ``[lengths[0],
    *value.shape[1:]]`` of equal lengths against the element shape before the kernel runs. At
    traced lengths jta records the same check, so that compiled code raises what eager code
    raises (a piece's trailing dims are static: if they do not fit, the kernel says so while
    tracing)."""
    es, rest = ta.element_shape, tuple(np.shape(value)[1:])
    if static is not None:
        if static.ndim == 1 and static.size and np.all(static == static[0]):
            shape = (int(static[0]), *rest)
            if not shapes.compatible(es, shape):
                Error.INCONSISTENT_SHAPES.raise_(shape=shapes.python_str(shape), element_shape=shapes.python_str(es))
        return ta
    if np.ndim(lengths) != 1 or not _fits_but_dim0(es, rest) or es is None or es[0] is None or ta._record is None:
        return ta
    lengths = storage.as_index(lengths)
    error = ta._record
    bad = jnp.all(lengths == lengths[0]) & (lengths[0] != es[0])
    first = lengths[0]
    return ta.replace(record=records.record(error, bad, Error.SPLIT_PIECES_INCONSISTENT, first, es[0],
                                     storage.high_word(error, first)))


def _fits_but_dim0(es: shapes.Shape, rest: tuple[int, ...]) -> bool:
    """Whether a piece ``[?, *rest]`` can have the element shape ``es``."""
    return es is None or (len(es) == 1 + len(rest) and shapes.compatible(es[1:], rest))


def _split_static(ta: ArrayData, value: jax.Array, lengths: np.ndarray) -> Any:
    """Split at static ``lengths``: every check is made now, in the kernel's order."""
    m = ta._meta
    n, rows = lengths.shape[0], value.shape[0]
    bad = np.nonzero(lengths < 0)[0]
    if bad.size:  # TensorFlow aborts the process here
        k = int(bad[0])
        Error.NEGATIVE_SPLIT_LENGTH.raise_(name=ta.name, position=k, length=int(lengths[k]))
    if int(lengths.sum()) != rows:
        Error.SPLIT_SUM.raise_(total=int(lengths.sum()), rows=rows, rest="".join(f",{d}" for d in value.shape[1:]))
    ta.check_open()  # the kernel's PackOrConcatSize(), after validating lengths and value
    ta = _split_size(ta, n)
    check_dtype(ta.dtype, value.dtype)
    marked = n if not m.is_accumulator else m.marked_size
    if not (n and np.all(lengths == lengths[0])):
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        for i in range(n):
            piece = value[int(offsets[i]):int(offsets[i + 1])]
            check_value_shape(ta, i, piece.shape)
            ta = storage.pin_shape(ta, piece.shape)
            ta = storage.dense_write(ta, i, piece) if ta.is_dense else storage.slots_write(ta, i, piece)
        return ta.replace(marked_size=marked)
    # Equal pieces: one reshape, written as a scatter.
    piece_shape = (int(lengths[0]), *value.shape[1:])
    check_value_shape(ta, 0, piece_shape)
    ta = storage.pin_shape(ta, piece_shape)
    return _write_pieces(ta, value.reshape((n, *piece_shape)), None).replace(marked_size=marked)


def _split_size(ta: ArrayData, n: int) -> Any:
    """Split's size check: a ``dynamic_size`` array grows to ``n``, any other array's size must
    be ``n`` (recorded when the size is traced, else checked now: a static problem)."""
    size = known_size(ta)
    if ta.dynamic_size and size is not None and n > size:
        return _grow(ta, n)
    if size is None:  # grown at traced indices: the size is known at run time only
        traced = cast(jax.Array, ta._traced_size)  # an array grown at traced indices carries its size
        if ta._record is not None:
            ta = ta.replace(record=records.record(ta._record, traced > n, Error.SPLIT_SIZE, traced, n))
        return _grow_within_capacity(ta, n)
    if size != n:
        Error.SPLIT_SIZE.raise_(size=size, n=n)
    return ta


def _split_traced(ta: ArrayData, value: jax.Array, lengths: jax.Array) -> Any:
    """Split at traced ``lengths``. The pieces must share one static shape, ``[p, *value.shape[1:]]``
    with ``p`` the element shape's first dim, or ``rows / n`` where that is unknown: compiled code
    writes such equal pieces and records, in TensorFlow's order, the error that eager code raises
    for the lengths it runs with. Lengths that cut ragged pieces (which eager code writes into an
    ``infer_shape=False`` array) are jta's error. If ``n`` pieces of ``p`` rows cannot make up the
    value, every run fails (the records say how) and nothing is written; if ``p`` is unknown and
    ``rows`` is no multiple of ``n``, there are no equal pieces and it raises while tracing."""
    m = ta._meta
    n, rows, rest = lengths.shape[0], value.shape[0], tuple(value.shape[1:])
    es = m.element_shape
    if not _fits_but_dim0(es, rest):  # a static problem: the first piece's write fails (unless the lengths do)
        Error.WRITE_SHAPE.raise_(name=ta.name, index=0, shape=f"[{_TRACED}{''.join(f',{d}' for d in rest)}]",
                                 element_shape=shapes.debug_str(es))
    first = None if es is None else es[0]
    if first is None and rows % n:
        Error.TRACED_SPLIT_UNEQUAL.raise_(name=ta.name, rows=rows, n=n)
    piece = rows // n if first is None else first
    pieces_fit = piece * n == rows
    shape_errors = _piece_shape_errors(ta, lengths)
    ta = _record_lengths(ta, lengths, rows)
    ta.check_open()
    ta = _split_size(ta, n)
    check_dtype(ta.dtype, value.dtype)
    marked = n if not m.is_accumulator else m.marked_size
    ta = storage.pin_shape(ta, (piece, *rest))  # as eager code's first piece does (all pieces, when written)
    if pieces_fit:
        ta = _write_pieces(ta, value.reshape((n, piece, *rest)), shape_errors)
    else:  # nothing written: every run fails, and the records say how
        ta = _record_piece_errors(ta, shape_errors)
    if shape_errors is None and ta._record is not None:  # the element shape's first dim is free
        unequal = lengths != piece
        k = jnp.argmax(unequal)
        ta = ta.replace(record=records.record(ta._record, unequal.any(), Error.TRACED_RAGGED_SPLIT, k, piece, lengths[k]))
    return raise_if_concrete(ta.replace(marked_size=marked))


def _piece_shape_errors(ta: ArrayData, lengths: jax.Array) -> Any:
    """Per piece, whether its write fails the element shape check: ``(codes, lengths, expected
    first dims)``. The element shape's first dim, or with ``identical_element_shapes`` (jta's
    ``infer_shape``) the first piece's, which the first write fixes; ``None`` when the first dim
    is free (a ragged split of an ``infer_shape=False`` array)."""
    m = ta._meta
    first = None if m.element_shape is None else m.element_shape[0]
    if first is None and not m.infer_shape:
        return None
    expected = jnp.broadcast_to(lengths[0] if first is None else jnp.asarray(first, lengths.dtype), lengths.shape)
    return jnp.where(lengths != expected, Error.SPLIT_PIECE_SHAPE.code, 0), lengths, expected


def _record_lengths(ta: ArrayData, lengths: jax.Array, rows: int) -> Any:
    """Split's checks of traced ``lengths``, in their own width (TensorFlow's lengths are int64):
    none is negative (TensorFlow aborts the process; jta refuses it), and they sum to ``rows``."""
    error = ta._record
    if error is None:
        return ta
    negative = lengths < 0
    k = jnp.argmax(negative)
    error = records.record(error, negative.any(), Error.NEGATIVE_SPLIT_LENGTH, k, lengths[k], storage.high_word(error, lengths[k]))
    total, high = _sum_of_lengths(error, lengths)
    # (A length past ``rows`` also catches a sum that wrapped around in 32 bits.)
    bad_sum = (total != rows) | jnp.any(lengths > rows)
    error = records.record(error, bad_sum, Error.SPLIT_SUM, total, rows, high)
    return ta.replace(record=error)


def _sum_of_lengths(error: jax.Array, lengths: jax.Array) -> tuple[Any, Any]:
    """The sum of ``lengths`` (none negative: a negative one is recorded first) as TensorFlow sums
    them, in int64: ``(total, total_high)`` as the record keeps it. A 64-bit record holds it, and
    so do int64 lengths (an int32 record of an array made before x64 was enabled keeps the low word
    and ``total_high``, ``storage.high_word``); 32-bit lengths into an int32 record (without x64)
    cannot sum past 2**31 in their width, so they are summed in 16-bit halves (exact for fewer than
    2**15 lengths; uint32 lengths past 2**31 included)."""
    if error.dtype.itemsize >= 8 or lengths.dtype.itemsize >= 8 or lengths.shape[0] >= 2**15:
        total = jnp.sum(lengths.astype(jnp.promote_types(lengths.dtype, length_dtype())))
        return total, storage.high_word(error, total)
    bits = lengths.astype(jnp.uint32)
    upper = jnp.sum((bits >> 16).astype(jnp.int32))
    lower = jnp.sum((bits & 0xFFFF).astype(jnp.int32))
    upper = upper + (lower >> 16)  # total = upper * 2**16 + (lower & 0xFFFF)
    low = (upper << 16) | (lower & 0xFFFF)  # its low word, as int32 (wraps)
    return low, (upper >> 16) + (low < 0).astype(jnp.int32)  # low + (high << 32) = total


def _write_pieces(ta: ArrayData, pieces: jax.Array, shape_errors: Any) -> Any:
    """Write ``pieces[k]`` at slot ``k``; ``shape_errors`` (or ``None``) are recorded in order with
    the slots' own errors (``storage.dense_scatter``)."""
    n = pieces.shape[0]
    if ta.is_dense:
        return storage.dense_scatter(ta, np.arange(n, dtype=np.int32), True, pieces, shape_errors)
    for i in range(n):
        ta = storage.slots_write(ta, i, pieces[i])
    return _record_piece_errors(ta, shape_errors)


def _record_piece_errors(ta: ArrayData, shape_errors: Any) -> Any:
    """Record the first piece whose shape fails (fields: its index, length, the expected length)."""
    if shape_errors is None or ta._record is None:
        return ta
    codes, lengths, expected = shape_errors
    return ta.replace(record=storage.record_first(ta._record, codes, jnp.arange(codes.shape[0]), lengths, expected))


def size(ta: ArrayData) -> jax.Array:
    """``TensorArraySizeOp``."""
    ta = usable(ta)
    ta.check_open()
    return jnp.asarray(logical_size(ta), jnp.int32)


def close(ta: ArrayData) -> Any:
    """``TensorArrayCloseOp``: every later op on the array raises "has already been closed."."""
    return ta.replace(closed=True)

