"""How recorded errors reach the user.

* Eagerly (and under ``jax.disable_jit()``) every op raises as soon as its record is concrete.
* Mutators inside compiled code record into the array (or raw-op state) they return;
  ``jta.throw(tree)`` raises what a returned tree recorded.
* Value-returning ops (``read``, ``stack``, ``gather``, ``concat``) inside compiled code check
  the record of the array they read and the bits of the slots they read, behind one fused
  predicate: a host callback raises at run time only when the predicate holds. JAX reports such
  an exception as ``JaxRuntimeError``; ``jta.checked`` turns it back into jta's exception and
  the callback's own traceback is not logged.
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import _checks as C
from ._array import ArrayData, logical_size
from ._kernels import read
from ._storage import as_index
from .errors import TensorArrayError


def throw_array(ta: ArrayData) -> None:
    """Raise ``ta``'s first recorded error: now when concrete, else at run time."""
    if ta._error is not None:
        error_if(ta.name, ta._error, ta._flags, ta.error_fields())


def array_exception(ta: ArrayData) -> Optional[Exception]:
    if ta._error is None:
        return None
    return C.make_exception(ta.name, ta._error, ta._flags, ta.error_fields())


def _check_slots(ta: ArrayData, indices: jax.Array) -> None:
    """Like :func:`throw_array`, but look only at the slots ``indices``: O(len), not O(capacity),
    so reading inside a loop stays linear in the number of steps."""
    if ta._error is None:
        return
    flags = None
    if ta.is_dense and ta._flags is not None:
        flags = (jnp.zeros(jnp.shape(indices), jnp.int32) if ta._flags.shape[0] == 0  # no slots to index
                 else ta._flags.at[indices].get(mode="fill", fill_value=0))
    error_if(ta.name, ta._error, flags, ta.error_fields(), indices)


def check_gather(ta: ArrayData, indices: Any) -> None:
    _check_slots(ta, as_index(indices).reshape(-1))


def check_read(ta: ArrayData, index: Any) -> None:
    indices = jnp.reshape(as_index(index), (1,))
    if ta._error is None or C.is_concrete(ta._error, ta._flags, index) or not ta.is_dense or ta.capacity == 0:
        _check_slots(ta, indices)
        return
    # Inside compiled code (often a loop body): one fused predicate guards the full check,
    # which rebuilds the error record and raises from a host callback. Computing the record
    # and the slot's flags outside the conditional cost ~4 extra kernels per read.
    limit = ta.capacity if ta._meta.is_grad else logical_size(ta)
    i = indices[0]
    flags = ta._flags
    assert flags is not None and ta._error is not None
    bits = flags[jnp.clip(i, 0, ta.capacity - 1)]
    suspect = (ta._error[0] != 0) | (i < 0) | (i >= limit) | ((bits & C.ERROR_BITS) != 0)
    lax.cond(suspect, lambda: _check_slots(read(ta, index, mark=False)[0], indices), lambda: None)


def error_if(name: str, error: jax.Array, flags: jax.Array | None,
             extra: dict[str, str] | None = None, indices: jax.Array | None = None) -> None:
    """Raise the recorded error now if concrete, else at run time from compiled code.

    Inside ``jit`` the exception is raised by a host callback that runs only when the record
    is non-empty (``lax.cond``), so the fast path costs one predicate. JAX reports an exception
    raised in a callback as ``JaxRuntimeError`` whose message contains jta's exception class
    and TensorFlow's text; ``jta.throw`` on a returned array raises the original class.
    """
    if C.is_concrete(error, flags, indices):
        C.raise_if_error(name, error, flags, extra, indices)
        return
    has_error = error[0] != 0
    if flags is not None:
        has_error = has_error | jnp.any((flags & C.ERROR_BITS) != 0)
    callback = functools.partial(_callback, name, extra, next(_SITES))
    lax.cond(has_error, lambda: jax.debug.callback(callback, has_error, error, flags, indices),
             lambda: None)


def _callback(name: str, extra: dict[str, str] | None, site: int, has_error: Any, error: Any, flags: Any,
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
    exc = C.make_exception(name, error, flags, extra, indices)
    if exc is not None:
        # XLA runs unordered callbacks in any order, and several may fail in one run: the one
        # traced first (its site number) is the first in program order, and is kept.
        if getattr(_RAISED, "exception", None) is None or site < _RAISED.site:
            _RAISED.exception, _RAISED.site = exc, site
        raise exc


_RAISED = threading.local()  # the first exception callbacks raised in compiled code (per thread)
_SITES = itertools.count()  # numbers the callback sites in the order they are traced


def take_raised() -> Optional[Exception]:
    """The exception a callback raised in compiled code since the last call, if any."""
    exc = getattr(_RAISED, "exception", None)
    _RAISED.exception, _RAISED.site = None, -1
    return exc


class _QuietCallbacks(logging.Filter):
    """JAX logs a traceback for every exception raised in a debug callback; jta's own errors
    reach the user as exceptions, so their log records are dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, TensorArrayError)


logging.getLogger("jax._src.debugging").addFilter(_QuietCallbacks())
