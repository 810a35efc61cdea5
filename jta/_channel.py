"""How recorded errors reach the user: eagerly at once, and from compiled code.

Value-returning ops (``read``, ``stack``, ``gather``, ``concat``) look at the record of the
array they read and at the bits of the slots they read.
"""

from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
from jax import lax

from . import _checks as C
from ._array import ArrayData, logical_size
from ._kernels import read


def throw_array(ta: ArrayData) -> None:
    """Raise ``ta``'s first recorded error: now when concrete, else at run time."""
    if ta._error is not None:
        C.error_if(ta.name, ta._error, ta._flags, ta.error_fields())


def array_exception(ta: ArrayData) -> Optional[Exception]:
    if ta._error is None:
        return None
    return C.make_exception(ta.name, ta._error, ta._flags, ta.error_fields())


def check_all(ta: ArrayData) -> None:
    throw_array(ta)


def _check_slots(ta: ArrayData, indices: jax.Array) -> None:
    """Like :func:`throw_array`, but look only at the slots ``indices``: O(len), not O(capacity),
    so reading inside a loop stays linear in the number of steps."""
    if ta._error is None:
        return
    flags = None
    if ta.is_dense and ta._flags is not None:
        flags = (jnp.zeros(jnp.shape(indices), jnp.int32) if ta._flags.shape[0] == 0  # no slots to index
                 else ta._flags.at[indices].get(mode="fill", fill_value=0))
    C.error_if(ta.name, ta._error, flags, ta.error_fields(), indices)


def check_gather(ta: ArrayData, indices: Any) -> None:
    _check_slots(ta, jnp.asarray(indices, jnp.int32).reshape(-1))


def check_read(ta: ArrayData, index: Any) -> None:
    indices = jnp.reshape(jnp.asarray(index, jnp.int32), (1,))
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
