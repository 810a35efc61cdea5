"""Runtime checks that survive ``jit``: an error record carried in the pytree.

Problems that depend on traced values (an index computed inside ``jit`` or ``lax.scan``)
cannot raise while tracing. jta records them instead, cheaply, in two places of the
array's pytree:

* ``error``: an ``int32[4]`` vector ``(code, a, b, c)``; the first error wins. ``code`` is
  an entry of :data:`MESSAGES` (class + message template), ``a, b, c`` its integers.
* ``flags``: one ``int32`` bitfield per slot (written, read, and sticky error bits for
  "written twice", "written after read", "read after clear"). Updating one slot's bits is a
  single scatter, about 1% of a 64-wide RNN step, where a precise first-error ``where`` chain
  costs ~30%.

The record is turned into the exception TensorFlow would raise (same class and text) by
:func:`raise_if_error` as soon as it is concrete: after every eager op, by ``jta.throw``, or at
run time by value-returning ops inside compiled code (via a host callback, see ``error_if``).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.core import Tracer

from . import errors

WRITTEN = 1
READ = 2
E_WRITTEN_TWICE = 4
E_WRITE_AFTER_READ = 8
E_READ_CLEARED = 16
ERROR_BITS = E_WRITTEN_TWICE | E_WRITE_AFTER_READ | E_READ_CLEARED

# code -> (class, template). Templates see ``name`` and the integers ``a, b, c``.
MESSAGES: dict[int, tuple[type[Exception], str]] = {
    1: (errors.InvalidArgumentError,
        "TensorArray {name}: Tried to write to index {a} but array is not resizeable and size is: {b}"),
    2: (errors.InvalidArgumentError, "Tried to read from index {a} but array size is: {b}"),
    3: (errors.InvalidArgumentError, "Max scatter index must be < array size ({a} vs. {b})"),
    4: (errors.InvalidArgumentError,
        "TensorArray {name}: Tried to write to index {a} beyond the static capacity {b} of this "
        "dynamically sized array; pass a larger `capacity=` when creating it."),
    5: (errors.InvalidArgumentError,
        "TensorArray {name}: Tried to read from index {a} beyond the static capacity {b} of this "
        "gradient array; pass a larger `capacity=` to the forward array."),
    6: (errors.InvalidArgumentError,
        "TensorArray {name}: split lengths must all equal {b} when they are traced (the elements "
        "must share one shape), but lengths[{a}] is {c}. Pass concrete lengths for ragged splits."),
    7: (errors.InvalidArgumentError,
        "Expected sum of lengths to be equal to values.shape[0], but sum of lengths is {a} and "
        "value's shape is: [{b}{rest}]"),
    8: (errors.InvalidArgumentError,
        "TensorArray {name}: Split lengths must be non-negative, but lengths[{a}] is {b}. "
        "(TensorFlow aborts the process here; jta refuses the input.)"),
}
WRITE_OUT_OF_RANGE, READ_OUT_OF_RANGE, SCATTER_OUT_OF_RANGE = 1, 2, 3
WRITE_BEYOND_CAPACITY, READ_BEYOND_CAPACITY, TRACED_RAGGED_SPLIT = 4, 5, 6
SPLIT_SUM, NEGATIVE_SPLIT_LENGTH = 7, 8

SLOT_MESSAGES: dict[int, str] = {
    E_WRITE_AFTER_READ:
        "TensorArray {name}: Could not write to TensorArray index {i} because it has already been read.",
    E_WRITTEN_TWICE:
        "TensorArray {name}: Could not write to TensorArray index {i} because it has already been written to.",
    E_READ_CLEARED:
        "TensorArray {name}: Could not read index {i} twice because it was cleared after a previous read "
        "(perhaps try setting clear_after_read = false?).",
}

# A slot error at one position of a multi-index op (scatter, gather): TensorFlow's kernels go
# through the indices in order and stop at the first failure, which the sticky slot bits cannot
# tell (they only say which slots failed), so these ops also record the first failing position.
WRITE_AFTER_READ_AT, WRITTEN_TWICE_AT, READ_CLEARED_AT = 9, 10, 11
for _code, _bit in ((WRITE_AFTER_READ_AT, E_WRITE_AFTER_READ), (WRITTEN_TWICE_AT, E_WRITTEN_TWICE),
                    (READ_CLEARED_AT, E_READ_CLEARED)):
    MESSAGES[_code] = (errors.InvalidArgumentError, SLOT_MESSAGES[_bit].replace("{i}", "{a}"))


def repeated(j: jax.Array, n: int) -> jax.Array:
    """Per position of the slot indices ``j`` (``n`` = no slot): whether an earlier position has
    the same slot. One scatter-min over the slots, so O(len(j) + n)."""
    pos = jnp.arange(j.shape[0], dtype=jnp.int32)
    first = jnp.full((n + 1,), j.shape[0], jnp.int32).at[j].min(pos)
    return (first[j] != pos) & (j != n)


def record_first(error: jax.Array, codes: jax.Array, a: jax.Array, b: Any) -> jax.Array:
    """Record the error of the first position whose entry of ``codes`` (one error code per
    position, 0 = none) is set, with integers ``a[k]`` and ``b`` (a scalar, or one per position)."""
    codes, a = jnp.asarray(codes), jnp.asarray(a)
    if codes.shape[0] == 0:
        return error
    k = jnp.argmax(codes != 0)
    b_k = jnp.asarray(b)[k] if jnp.ndim(b) else b
    return record(error, codes[k] != 0, codes[k], a[k], b_k)


def no_error() -> jax.Array:
    return jnp.zeros((4,), jnp.int32)


def record(error: jax.Array, bad: Any, code: Any, a: Any = 0, b: Any = 0, c: Any = 0) -> jax.Array:
    """Record ``code`` in ``error`` where ``bad`` holds and no earlier error is recorded."""
    if isinstance(bad, (bool, np.bool_)) and not bad:
        return error
    new = jnp.stack([jnp.asarray(code, jnp.int32), jnp.asarray(a, jnp.int32), jnp.asarray(b, jnp.int32),
                     jnp.asarray(c, jnp.int32)])
    return jnp.where((error[0] == 0) & bad, new, error)


def is_concrete(*xs: Any) -> bool:
    return not any(isinstance(x, Tracer) for x in jax.tree_util.tree_leaves(xs))


def make_exception(name: str, error: Any, flags: Any, extra: dict[str, str] | None = None,
                   indices: Any = None) -> Exception | None:
    """The exception described by a concrete error record, or ``None``.

    ``flags`` are the bitfields of the slots ``indices`` (default: of every slot, in order).
    """
    error = np.asarray(error)
    if error.ndim > 1:  # batched by vmap: report the first batch member that failed
        errors_ = error.reshape(-1, error.shape[-1])
        flags_ = None if flags is None else np.asarray(flags).reshape(errors_.shape[0], -1)
        idx_ = None if indices is None else np.asarray(indices).reshape(errors_.shape[0], -1)
        for k in range(errors_.shape[0]):
            exc = make_exception(name, errors_[k], None if flags_ is None else flags_[k], extra,
                                 None if idx_ is None else idx_[k])
            if exc is not None:
                return exc
        return None
    code = int(error[0])
    if code:
        cls, template = MESSAGES[code]
        a, b, c = (int(v) for v in error[1:])
        return cls(template.format(name=name, a=a, b=b, c=c, **(extra or {})))
    if flags is not None:
        flags = np.asarray(flags)
        bad = np.nonzero(flags & ERROR_BITS)[0]
        if bad.size:
            k = int(bad[0])
            i = k if indices is None else int(np.asarray(indices).reshape(-1)[k])
            for bit in (E_WRITE_AFTER_READ, E_WRITTEN_TWICE, E_READ_CLEARED):
                if flags[k] & bit:
                    return errors.InvalidArgumentError(SLOT_MESSAGES[bit].format(name=name, i=i))
    return None


def raise_if_error(name: str, error: Any, flags: Any, extra: dict[str, str] | None = None,
                   indices: Any = None) -> None:
    exc = make_exception(name, error, flags, extra, indices)
    if exc is not None:
        raise exc


def error_if(name: str, error: jax.Array, flags: jax.Array | None,
             extra: dict[str, str] | None = None, indices: jax.Array | None = None) -> None:
    """Raise the recorded error now if concrete, else at run time from compiled code.

    Inside ``jit`` the exception is raised by a host callback that runs only when the record
    is non-empty (``lax.cond``), so the fast path costs one predicate. JAX reports an exception
    raised in a callback as ``JaxRuntimeError`` whose message contains jta's exception class
    and TensorFlow's text; ``jta.throw`` on a returned array raises the original class.
    """
    if is_concrete(error, flags, indices):
        raise_if_error(name, error, flags, extra, indices)
        return
    has_error = error[0] != 0
    if flags is not None:
        has_error = has_error | jnp.any((flags & ERROR_BITS) != 0)
    callback = functools.partial(_callback, name, extra)
    lax.cond(has_error, lambda: jax.debug.callback(callback, has_error, error, flags, indices),
             lambda: None)


def _callback(name: str, extra: dict[str, str] | None, has_error: Any, error: Any, flags: Any,
              indices: Any) -> None:
    # Under vmap the cond becomes a select and the callback runs for every batch member.
    has_error = np.asarray(has_error)
    if not has_error.any():
        return
    error, flags = np.asarray(error), None if flags is None else np.asarray(flags)
    if has_error.ndim:
        k = int(np.argmax(has_error.reshape(-1)))
        error = error.reshape(-1, error.shape[-1])[k]
        if flags is not None:
            flags = flags.reshape(-1, flags.shape[-1])[k]
        if indices is not None:
            indices = np.asarray(indices).reshape(-1, np.shape(indices)[-1])[k]
    raise_if_error(name, error, flags, extra, indices)
