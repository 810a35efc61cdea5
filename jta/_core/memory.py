"""How much memory a buffer may take: jta refuses, before allocating, what cannot fit.

TensorFlow allocates a TensorArray's elements one by one, on their first write; jta allocates
every slot up front (one dense buffer, so that traced indices can address it). A size that
TensorFlow accepts lazily can therefore be impossible here; it is refused with
``ResourceExhaustedError`` (TensorFlow's class for allocations that fail) before any buffer
exists, instead of ending in an XLA ``RESOURCE_EXHAUSTED`` crash, a ``MemoryError`` or a hang.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import jax
import numpy as np

from .._records.catalogue import Error
from . import shapes

__all__ = ["check_buffer", "memory_limit"]

_SLOT_BYTES = 16  # a slots-form array (unknown element shape) keeps two Python references per slot


@functools.cache
def memory_limit() -> int:
    """Bytes the default device can hold: the accelerator's limit, or on a CPU the physical
    memory and the process's address-space limit, whichever is smaller."""
    limits = []
    try:
        stats = jax.devices()[0].memory_stats() or {}
        if stats.get("bytes_limit"):
            limits.append(int(stats["bytes_limit"]))
    except Exception:  # noqa: BLE001 (a backend without memory statistics)
        pass
    if not limits:
        try:
            limits.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        except (ValueError, OSError, AttributeError):  # not a POSIX system
            pass
        try:
            import resource

            soft = resource.getrlimit(resource.RLIMIT_AS)[0]
            if soft != resource.RLIM_INFINITY:
                limits.append(int(soft))
        except (ImportError, ValueError, OSError):
            pass
    return min(limits) if limits else 2**62


def check_buffer(name: str, what: str, slots: int, element_shape: Any, dtype: Any, checks: bool) -> None:
    """Refuse a buffer of ``slots`` elements that cannot fit in :func:`memory_limit`.

    ``element_shape`` ``None`` (or partial) is the slots form, which costs Python memory per slot.
    """
    if shapes.fully_defined(element_shape):
        dims = shapes.dims(element_shape)
        per_slot = int(np.prod(dims, dtype=object)) * np.dtype(dtype).itemsize + (4 if checks else 0)
        shape = shapes.python_str(dims)
    else:
        per_slot, shape = _SLOT_BYTES, shapes.python_str(element_shape) if element_shape is not None else "unknown"
    nbytes, limit = int(slots) * per_slot, memory_limit()
    if nbytes > limit:
        Error.BUFFER_TOO_LARGE.raise_(name=name, what=what, slots=slots, shape=shape,
                                      dtype=np.dtype(dtype).name, nbytes=nbytes, limit=limit)
