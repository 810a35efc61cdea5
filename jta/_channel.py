"""How recorded errors reach the user (see also ``_check_op`` and ``_functionalize``).

* Eagerly (and under ``jax.disable_jit()``) every op raises as soon as its record is concrete.
* Inside compiled code every op reports its record through the ``jta_check`` primitive: a
  mutator's report is *deferred* (the error stays in the array or raw-op state it returns), a
  value-returning op's (``read``, ``stack``, ``gather``, ``concat``) is not.
* ``jta.checkify``/``jta.checked`` thread all reports through the program as data. Without
  them, a value-returning op's report raises from a host callback at run time (JAX reports it
  as ``JaxRuntimeError``; ``jta.throw()`` gives jta's exception back, and the callback's own
  traceback is not logged).
"""

from __future__ import annotations

import logging
from typing import Any, Optional

import jax
import jax.numpy as jnp
from jax import lax

from . import _checks as C
from ._array import ArrayData
from ._check_op import emit
from ._storage import as_index
from .errors import TensorArrayError


def array_exception(ta: ArrayData) -> Optional[Exception]:
    if ta._error is None:
        return None
    return C.make_exception(ta.name, ta._error, ta._flags, ta.error_fields())


def slot_record(ta: ArrayData, indices: jax.Array) -> jax.Array:
    """``ta``'s record, or else the first error the sticky bits of the slots ``indices`` hold:
    O(len(indices)), not O(capacity), so reading inside a loop stays linear in its steps."""
    error = ta._error
    assert error is not None
    if not (ta.is_dense and ta._flags is not None and ta._flags.shape[0] and indices.shape[0]):
        return error
    if indices.shape[0] == 1:  # a read: one clamped slice, no search for the first failing position
        i, cap = indices[0], ta._flags.shape[0]
        bit = lax.dynamic_index_in_dim(ta._flags, jnp.clip(i, 0, cap - 1).astype(jnp.int32), keepdims=False)
        code = _slot_code(jnp.where((i >= 0) & (i < cap), bit, 0))
        return C.record(error, code != 0, code, i)
    return C.record_first(error, _slot_code(ta._flags.at[indices].get(mode="fill", fill_value=0)), indices, 0)


def _slot_code(bits: jax.Array) -> jax.Array:
    """Per slot, the error code its sticky ``bits`` hold (0: none)."""
    codes = jnp.zeros(bits.shape, jnp.int32)
    for bit, err in reversed(C.SLOT_ERRORS):  # the first bit in SLOT_ERRORS's order wins
        codes = jnp.where((bits & bit) != 0, jnp.int32(err.code), codes)
    return codes


def _check_slots(ta: ArrayData, indices: jax.Array | None, deferred: bool) -> None:
    """Raise now when concrete, else report (``_check_op``) ``ta``'s error as of the slots
    ``indices`` (``None``: every slot)."""
    if ta._error is None:
        return
    if C.is_concrete(ta._error, ta._flags, indices):
        flags = ta._flags if ta.is_dense else None
        if flags is not None and indices is not None:
            flags = (jnp.zeros(jnp.shape(indices), jnp.int32) if flags.shape[0] == 0  # no slots to index
                     else flags.at[indices].get(mode="fill", fill_value=0))
        C.raise_if_error(ta.name, ta._error, flags, ta.error_fields(), indices)
        return
    if not (ta._meta.raw or ta._meta.is_grad):  # (see ArrayMeta.raw) no read of the flags:
        emit(ta._error, ta.name, ta.error_fields(), deferred)  # it made XLA copy them per step (W3)
        return
    if indices is None:
        indices = jnp.arange(ta.capacity if ta.is_dense and ta._flags is not None else 0)
    emit(slot_record(ta, indices), ta.name, ta.error_fields(), deferred)


def throw_array(ta: ArrayData, deferred: bool = False) -> None:
    """Raise ``ta``'s first recorded error now when concrete, else report it (``_check_op``)."""
    _check_slots(ta, None, deferred)


def check_gather(ta: ArrayData, indices: Any, deferred: bool = False) -> None:
    _check_slots(ta, as_index(indices).reshape(-1), deferred)


def check_read(ta: ArrayData, index: Any, deferred: bool = False) -> None:
    _check_slots(ta, jnp.reshape(as_index(index), (1,)), deferred)


class _QuietCallbacks(logging.Filter):
    """JAX logs a traceback for every exception raised in a debug callback; jta's own errors
    reach the user as exceptions, so their log records are dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, TensorArrayError)


logging.getLogger("jax._src.debugging").addFilter(_QuietCallbacks())
