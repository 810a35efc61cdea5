"""How recorded errors reach the user: the value ops, and the rules of each mode (see also
``primitives`` and ``functionalize``).

* Eagerly (and under ``jax.disable_jit()``) every op raises as soon as its record is concrete.
* Inside compiled code every op reports its record through the ``jta_check`` primitive: a
  mutator's report is *deferred* (the error stays in the array or raw-op state it returns), a
  value-returning op's (``read``, ``stack``, ``gather``, ``concat``) is not.
* ``jta.checkify``/``jta.checked`` thread all reports through the program as data. Without
  them, a value-returning op's report raises from a host callback at run time (JAX reports it
  as ``JaxRuntimeError``; ``jta.throw()`` gives jta's exception back, and the callback's own
  traceback is not logged: ``jax_rules`` section 3).
"""

from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .._core import kernels
from .._core.array import ArrayData, ArrayT
from .._core.storage import as_index
from .._records import records
from .._records.catalogue import LEARNS, Message
from .._records.primitives import emit, noted


def array_exception(ta: ArrayData) -> Optional[Exception]:
    if ta._record is None:
        return None
    return records.make_exception(ta.name, ta._record, ta._flags, ta.error_fields())


def _check_slots(ta: ArrayData, indices: jax.Array | None) -> None:
    """Raise now when concrete (looking at the slots ``indices``, ``None``: every slot), else
    report ``ta``'s record (``primitives.emit``). Every op records the error it makes, a slot's sticky
    flags included, so compiled code needs no read of the flags, which made XLA copy them in every
    step of a read-after-write loop."""
    if ta._record is None:
        return
    if records.is_concrete(ta._record, ta._flags, indices):
        flags = ta._flags if ta.is_dense else None
        if flags is not None and indices is not None:
            flags = (jnp.zeros(jnp.shape(indices), jnp.int32) if flags.shape[0] == 0  # no slots to index
                     else flags.at[indices].get(mode="fill", fill_value=0))
        records.raise_if_error(ta.name, ta._record, flags, ta.error_fields(), indices)
        return
    emit(ta._record, ta.name, ta.error_fields(), deferred=False)


def throw_array(ta: ArrayData) -> None:
    """Raise ``ta``'s first recorded error now when concrete, else report it (``primitives.emit``)."""
    _check_slots(ta, None)



def report(name: str, bad: Any, message: Message, *fields: Any, extra: Optional[dict[str, str]] = None,
           learns: bool = False) -> None:
    """Report ``message`` (fields: up to three integers, in the order of ``message.fields``) where
    ``bad`` holds, for a check that is not a TensorArray's (the importer's TensorLists): raised now
    when concrete, else reported as every value op's record is. A ``bad`` known while tracing (a
    Python or NumPy bool) is decided then: nothing is staged into the program. ``learns``: a
    write past a buffer ``jta.checked``'s plan sizes (:data:`~jta._records.catalogue.LEARNS`)."""
    if isinstance(bad, (bool, np.bool_)):
        if bad:
            raise noted(message.from_record(name, fields, extra or {}), name)
        return
    record = records.record(records.no_error(), bad, message.code | LEARNS if learns else message.code, *fields)
    if records.is_concrete(record):
        records.raise_if_error(name, record, None, extra)
    else:
        emit(record, name, extra, deferred=False)

# The value ops: the only way the public modules read, gather or concatenate, so none can
# return a value without reporting the record that made it (tests/test_architecture.py).
def read(ta: ArrayT, index: Any, mark: bool) -> tuple[ArrayT, jax.Array]:
    """``kernels.read``, then the record of the slot read is reported."""
    ta, value = kernels.read(ta, index, mark=mark)
    _check_slots(ta, jnp.reshape(as_index(index), (1,)))
    return ta, value


def gather(ta: ArrayT, indices: Any, mark: bool, element_shape: Any = None) -> tuple[ArrayT, jax.Array]:
    """``kernels.pack_or_gather``, then the records of the slots gathered are reported."""
    ta, value = kernels.pack_or_gather(ta, indices, mark=mark, element_shape=element_shape)
    _check_slots(ta, as_index(indices).reshape(-1))
    return ta, value


def concat(ta: ArrayT, mark: bool, element_shape_except0: Any = None) -> tuple[ArrayT, jax.Array, Any]:
    """``kernels.concat``, then the array's record is reported."""
    ta, value, lengths = kernels.concat(ta, mark=mark, element_shape_except0=element_shape_except0)
    _check_slots(ta, None)
    return ta, value, lengths
