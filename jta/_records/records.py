"""Runtime checks that survive ``jit``: an error record carried in the pytree.

Problems that depend on traced values (an index computed inside ``jit`` or ``lax.scan``)
cannot raise while tracing. jta records them instead, cheaply, in two places of the
array's pytree:

* ``error``: an integer ``[4]`` vector ``(code, *values)`` (int64 under x64); the first error wins. ``code`` is an
  :class:`~jta._records.catalogue.Error` member's code, ``values`` its traced fields.
* ``flags``: one ``int32`` bitfield per slot (written, read, and sticky error flags for
  "written twice", "written after read", "read after clear"). Updating one slot's flags is a
  single scatter, about 1% of a 64-wide RNN step, where a precise first-error ``where`` chain
  costs ~30%.

The record is turned into the exception TensorFlow would raise (same class and text) by
:func:`raise_if_error` as soon as it is concrete; ``jta._delivery`` decides when that happens.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer

from .catalogue import Error, Message, learns
from .primitives import merge, noted, packed
from .primitives import no_error as no_error  # the core's empty record

WRITTEN = 1
READ = 2
E_WRITTEN_TWICE = 4
E_WRITE_AFTER_READ = 8
E_READ_CLEARED = 16
ERROR_FLAGS = E_WRITTEN_TWICE | E_WRITE_AFTER_READ | E_READ_CLEARED

# The sticky per-slot error flags, in the order a slot's flags are reported, and their errors.
SLOT_ERRORS: tuple[tuple[int, Error], ...] = (
    (E_WRITE_AFTER_READ, Error.WRITE_AFTER_READ),
    (E_WRITTEN_TWICE, Error.WRITTEN_TWICE),
    (E_READ_CLEARED, Error.READ_CLEARED),
)


def repeated(j: jax.Array, n: int) -> jax.Array:
    """Per position of the slot indices ``j`` (``n`` = no slot): whether an earlier position has
    the same slot. One scatter-min over the slots, so O(len(j) + n)."""
    pos = jnp.arange(j.shape[0], dtype=j.dtype)
    first = jnp.full((n + 1,), j.shape[0], j.dtype).at[j].min(pos)
    return (first[j] != pos) & (j != n)


def record(error: jax.Array, bad: Any, code: Error | jax.Array | int, *values: Any) -> jax.Array:
    """Record ``code`` with up to three integer ``values`` where ``bad`` holds and no earlier
    error is recorded (first error wins)."""
    if isinstance(bad, (bool, np.bool_)) and not bad:
        return error
    code = code.code if isinstance(code, Error) else code
    return merge(error, bad, packed(error.dtype, 4, code, *values), learns=isinstance(code, int) and bool(learns(code)))


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
        return Message.by_code(code).from_record(name, error[1:], extra or {})
    if flags is not None:
        flags = np.asarray(flags)
        bad = np.nonzero(flags & ERROR_FLAGS)[0]
        if bad.size:
            k = int(bad[0])
            i = k if indices is None else int(np.asarray(indices).reshape(-1)[k])
            for bit, err in SLOT_ERRORS:
                if flags[k] & bit:
                    return err.exception(name=name, index=i)
    return None


def raise_if_error(name: str, error: Any, flags: Any, extra: dict[str, str] | None = None,
                   indices: Any = None) -> None:
    exc = make_exception(name, error, flags, extra, indices)
    if exc is not None:
        raise noted(exc, name)


def written_flags(old: jax.Array, aggregate: bool, xp: Any = jnp) -> jax.Array:
    """A slot's flags after a write (``aggregate``: a gradient array, where writes add up).
    ``xp``: ``jax.numpy``, or ``numpy`` for flags known while tracing."""
    # int32 constants: under x64, `int32 | convert(int64)` crashes XLA:CPU's compiler (jaxlib 0.10).
    after_read = xp.where(old & READ, xp.int32(E_WRITE_AFTER_READ), xp.int32(0))
    if aggregate:
        return old | WRITTEN | after_read
    # (A slot both read and written has both flags: "written after read" comes first.)
    twice = xp.where(old & WRITTEN, xp.int32(E_WRITTEN_TWICE), xp.int32(0))
    return old | WRITTEN | after_read | twice


def read_flags(old: jax.Array, clears: bool, xp: Any = jnp) -> jax.Array:
    """A slot's flags after a read (``clears``: ``clear_after_read``, so a second read fails)."""
    new = old | READ | WRITTEN
    if clears:
        new = new | xp.where(old & READ, xp.int32(E_READ_CLEARED), xp.int32(0))
    return new


def record_slot_error(error: jax.Array, bits: jax.Array, index: Any) -> jax.Array:
    """Record the error that slot ``index``'s sticky ``flags`` say an op just made there. The flags
    are read back after the op updated them (a reader of the new flags, which XLA orders after
    the in-place update; reading the old flags twice costs a copy of all the flags per loop step).
    A bit that an earlier op set has its error recorded already, so first-error-wins is kept."""
    code = slot_code(bits)
    return record(error, code != 0, code, index)


def slot_code(bits: jax.Array, xp: Any = jnp) -> jax.Array:
    """The error code a slot's sticky ``flags`` stand for: the first bit in ``SLOT_ERRORS``'s
    order (0: none). ``xp``: ``jax.numpy``, or ``numpy`` for flags known while tracing."""
    code = xp.zeros(xp.shape(bits), xp.int32)
    for bit, err in reversed(SLOT_ERRORS):
        code = xp.where((bits & bit) != 0, xp.int32(err.code), code)
    return code
