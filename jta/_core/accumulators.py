"""Gradient accumulators (``TensorArrayGradOp``): the one path that creates or finds them.

A registry is a plain dict ``{(forward name, source): accumulator}``. Asking twice for the same
source returns the same accumulator; creating one freezes the forward array's size
(``dynamic_size`` becomes ``False``, as ``TensorArray::SetMarkedSize``/``DisableDynamicSize`` do
in ``tensor_array.h``). ``TensorArrayGradWithShape`` prepends ``shape_to_prepend`` to every
element by broadcasting the zero buffer, so one accumulator serves many gradients at once.
An accumulator's name (its raw-op handle) is ``<forward name>@<source>``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import jax.numpy as jnp
import numpy as np
from jax.core import Tracer

from .._records import records
from .._records.catalogue import Error
from . import shapes, storage
from .array import same_array
from .inputs import as_indices
from .memory import check_buffer

Key = tuple[str, str]


def handle(name: str, source: str) -> str:
    """An accumulator's handle: ``<forward name>@<source>``."""
    return f"{name}@{source}"


def find_key(registry: dict[Key, Any], handle_: str) -> Optional[Key]:
    """The registry key whose handle is ``handle_`` (sources may contain ``@``), or ``None``."""
    for key in registry:
        if handle(*key) == handle_:
            return key
    return None


def get_or_create(registry: dict[Key, Any], forward: Any, source: str, shape_to_prepend: Any = ()
                  ) -> tuple[Any, Any, dict[Key, Any]]:
    """``TensorArrayGradOp``: ``(forward with its size frozen, accumulator, registry)``, the order
    of ``TensorArray.grad``.

    ``shape_to_prepend`` is ignored when the accumulator already exists, as in TensorFlow.
    """
    shape_to_prepend = as_indices(shape_to_prepend, "TensorArrayGradWithShape", "shape_to_prepend")
    if forward.is_accumulator:
        Error.WRONG_CONTAINER.raise_(handle=forward.name)
    forward.check_open()
    if forward.dynamic_size:  # creating a gradient freezes the forward size for good
        forward = forward.replace(dynamic_size=False)
    key = (forward.name, str(source))
    if key in registry:
        if same_array(forward, registry[key]) is False:  # TF names every array uniquely
            Error.NAME_TAKEN_IN_REGISTRY.raise_(name=forward.name, source=source)
        return forward, registry[key], registry
    g = _new(forward, str(source), _static_prepend(shape_to_prepend))
    return forward, g, {**registry, key: g}


def _static_prepend(shape_to_prepend: Any) -> tuple[int, ...]:
    if isinstance(shape_to_prepend, Tracer):
        Error.STATIC_PREPEND_REQUIRED.raise_()
    if np.ndim(shape_to_prepend) > 1:
        Error.SHAPE_NOT_VECTOR.raise_(shape=shapes.debug_str(np.shape(shape_to_prepend)))
    dims = tuple(int(d) for d in np.asarray(shape_to_prepend).reshape(-1))
    for d in dims:
        if d < 0:
            Error.NEGATIVE_DIMENSION.raise_(dim=d)
    return dims


def _new(forward: Any, source: str, prepend: tuple[int, ...]) -> Any:
    """A zero accumulator shaped like ``forward`` with ``prepend`` before every element."""
    m = forward._meta
    es = None if m.element_shape is None else prepend + tuple(m.element_shape)
    meta = dataclasses.replace(m, element_shape=es, dynamic_size=False, clear_after_read=True,
                               name=handle(m.name, source), is_accumulator=True, closed=False)
    error = None if forward._record is None else records.no_error()
    flow = forward._flow  # TensorArrayGradV3 passes the forward flow through
    cls = type(forward)
    if forward.is_dense:
        check_buffer(meta.name, "creating the gradient array", forward._data.shape[0], es, m.dtype, m.checks)
        base = jnp.zeros_like(forward._data)  # the GradV3 leaves, broadcast for GradWithShape
        cap = base.shape[0]
        data = jnp.broadcast_to(base.reshape((cap,) + (1,) * len(prepend) + base.shape[1:]),
                                (cap, *prepend, *base.shape[1:]))
        flags = None if forward._flags is None else forward._flags & records.WRITTEN
        return cls.tree_unflatten(meta, (data, flags, forward._traced_size, error, flow))
    slots = tuple((bits & records.WRITTEN, None if s is None else prepend + tuple(s)) for bits, s in m.slots)
    g = cls.tree_unflatten(dataclasses.replace(meta, slots=slots),
                           ((None,) * len(slots), None, forward._traced_size, error, flow))
    return storage.to_dense(g) if storage.can_be_dense(g) and m.infer_shape else g
