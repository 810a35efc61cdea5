"""TensorFlow's raw TensorArray ops, functional: ``state, *tf_outputs = op(state, ...)``.

The explicit ``state`` replaces TensorFlow's per-step resource container: it maps each
array's name (the *handle*, a static string) to its :class:`~jta.TensorArray`, and holds
the gradient registry ``{(forward name, source): accumulator}``. It is a pytree, so it can
be carried through ``lax.scan``, ``jit`` and ``vmap``. Semantics are TensorFlow's C++
kernels: write-once forward arrays, ``clear_after_read``, zero reads of unwritten
slots of known shape, aggregating gradient arrays, and the kernels' error texts.

```python
>>> from jta import raw_ops as ops
>>> state = ops.new_state()
>>> state, h, flow = ops.TensorArrayV3(state, 2, "float32", element_shape=())
>>> h
'TensorArrayV3_0'
>>> state, flow = ops.TensorArrayWriteV3(state, h, 0, 3.0, flow)
>>> state, v = ops.TensorArrayReadV3(state, h, 0, flow, "float32")
>>> v
Array(3., dtype=float32)

```
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from . import _display
from ._core import accumulators, kernels, shapes
from ._core.inputs import as_indices, canonical_dtype, check_scalar_index, convert
from ._delivery import value_ops
from ._delivery.api import throw
from ._records.catalogue import Error
from ._records.primitives import noted
from .tensor_array import TensorArray, created

__all__ = [
    "State", "new_state", "throw",
    "TensorArrayV3", "TensorArrayWriteV3", "TensorArrayReadV3", "TensorArrayGatherV3",
    "TensorArrayScatterV3", "TensorArrayConcatV3", "TensorArraySplitV3", "TensorArraySizeV3",
    "TensorArrayCloseV3", "TensorArrayGradV3", "TensorArrayGradWithShape",
]

Handle = str


@jax.tree_util.register_pytree_node_class
@dataclasses.dataclass(frozen=True)
class State:
    """Explicit resource state: forward arrays by name, accumulators by ``(name, source)``."""

    arrays: dict[str, TensorArray] = dataclasses.field(default_factory=dict)
    grads: dict[tuple[str, str], TensorArray] = dataclasses.field(default_factory=dict)
    counter: int = 0  # names are ``<name>_<counter>``, deterministic per state

    def tree_flatten(self):
        # The accumulators' (name, source) keys are static data, not dict keys of the tree:
        # jax.export serializes dicts with string keys only.
        keys = tuple(sorted(self.grads))
        return (self.arrays, [self.grads[key] for key in keys]), (self.counter, keys)

    @classmethod
    def tree_unflatten(cls, aux: tuple[int, tuple[tuple[str, str], ...]], children: Any) -> State:
        counter, keys = aux
        return cls(children[0], dict(zip(keys, children[1], strict=True)), counter)

    def __getitem__(self, handle: Handle) -> TensorArray:
        return _lookup(self, handle)

    def __repr__(self) -> str:
        return _display.state_repr(self)  # arrays, then accumulators by source

    def _repr_html_(self) -> str:
        return _display.state_html(self)


def new_state() -> State:
    """An empty state: no arrays, no gradient accumulators."""
    return State()


def _lookup(state: State, handle: Handle) -> TensorArray:
    if handle in state.arrays:
        return state.arrays[handle]
    key = accumulators.find_key(state.grads, handle)
    if key is None:
        Error.NOT_FOUND.raise_(handle=handle)
    return state.grads[key]


def _store(state: State, handle: Handle, ta: TensorArray) -> State:
    if handle in state.arrays:
        return dataclasses.replace(state, arrays={**state.arrays, handle: ta})
    key = accumulators.find_key(state.grads, handle)
    if key is None:
        Error.NOT_FOUND.raise_(handle=handle)
    return dataclasses.replace(state, grads={**state.grads, key: ta})


def _flow(flow_in: Any) -> jax.Array:
    return jnp.asarray(flow_in, jnp.float32)


def _check_dtype(ta: TensorArray, dtype: Any) -> None:
    dtype = canonical_dtype(dtype)
    if dtype != ta.dtype:
        Error.READ_DTYPE.raise_(dtype=shapes.kernel_dtype_name(ta.dtype), given=shapes.kernel_dtype_name(dtype))


def TensorArrayV3(state: State, size: Any, dtype: Any, element_shape: Any = None,
                  dynamic_size: bool = False, clear_after_read: bool = True,
                  identical_element_shapes: bool = False, tensor_array_name: str = "",
                  *, capacity: Optional[int] = None, checks: bool = True
                  ) -> tuple[State, Handle, jax.Array]:
    """Create an array (``TensorArrayV3``); returns ``(state, handle, flow)``.

    ``capacity`` and ``checks`` are jta's, as in :class:`jta.TensorArray`. An unnamed array is
    named ``TensorArrayV3_<n>``, unique within ``state``.
    """
    # TF names an unnamed array after its node, whose default name is the op type.
    name = f"{tensor_array_name or 'TensorArrayV3'}_{state.counter}"
    ta = created(dtype, size, "jta.raw_ops.TensorArrayV3", dynamic_size=bool(dynamic_size),
                 clear_after_read=bool(clear_after_read), infer_shape=bool(identical_element_shapes), name=name,
                 element_shape=element_shape, capacity=capacity, checks=checks)
    state = State({**state.arrays, name: ta}, state.grads, state.counter + 1)
    return state, name, jnp.zeros((), jnp.float32)


def TensorArrayWriteV3(state: State, handle: Handle, index: Any, value: Any, flow_in: Any
                       ) -> tuple[State, jax.Array]:
    """Write ``value`` at ``index`` of ``handle``; returns ``(state, flow_out)``."""
    ta = _lookup(state, handle)
    check_scalar_index(index)  # the kernel: index shape, then the value's dtype
    ta = kernels.write(ta, index, convert(value, ta.dtype, preferred=False))
    return _store(state, handle, ta), _flow(flow_in)


def TensorArrayReadV3(state: State, handle: Handle, index: Any, flow_in: Any, dtype: Any
                      ) -> tuple[State, jax.Array]:
    """Read (and, with ``clear_after_read``, clear) slot ``index``; returns ``(state, value)``."""
    del flow_in
    ta = _lookup(state, handle)
    check_scalar_index(index)  # the kernel: index shape, dtype, then Read (closed, ...)
    _check_dtype(ta, dtype)
    index = as_indices(index, "TensorArrayReadV3", "index")
    ta, value = value_ops.read(ta, index, mark=True)
    return _store(state, handle, ta), value


def TensorArrayGatherV3(state: State, handle: Handle, indices: Any, flow_in: Any, dtype: Any,
                        element_shape: Any = None) -> tuple[State, jax.Array]:
    """Read the slots ``indices`` stacked; returns ``(state, value)``."""
    del flow_in
    ta = _lookup(state, handle)
    _check_dtype(ta, dtype)  # closed: only when reading (none for zero indices)
    attr = shapes.as_shape(element_shape)
    if np.ndim(indices) == 1 and np.shape(indices)[0] == 0 and not shapes.fully_defined(attr) \
            and shapes.compatible(attr, ta.element_shape):  # the kernel looks at the attribute only
        Error.PACK_ZERO_UNKNOWN_SHAPE.raise_(shape=shapes.debug_str(attr))
    indices = as_indices(indices, "TensorArrayGatherV3", "indices")
    ta, value = value_ops.gather(ta, indices, mark=True, element_shape=element_shape)
    return _store(state, handle, ta), value


def TensorArrayScatterV3(state: State, handle: Handle, indices: Any, value: Any, flow_in: Any
                         ) -> tuple[State, jax.Array]:
    """Write ``value[k]`` at ``indices[k]``; returns ``(state, flow_out)``."""
    ta = _lookup(state, handle)
    ta = kernels.unpack_or_scatter(ta, indices, convert(value, ta.dtype, preferred=False))
    return _store(state, handle, ta), _flow(flow_in)


def TensorArrayConcatV3(state: State, handle: Handle, flow_in: Any, dtype: Any,
                        element_shape_except0: Any = None) -> tuple[State, jax.Array, np.ndarray]:
    """Concatenate every element along axis 0; returns ``(state, value, lengths)``."""
    del flow_in
    ta = _lookup(state, handle)
    _check_dtype(ta, dtype)
    ta.check_open()  # the kernel's PackOrConcatSize()
    attr = shapes.as_shape(element_shape_except0)
    n = kernels.concat_size(ta)
    if n == 0 and not shapes.fully_defined(attr):  # the kernel looks at the attribute only
        Error.CONCAT_ZERO_UNKNOWN_SHAPE.raise_(shape=shapes.debug_str(attr))
    ta, value, lengths = value_ops.concat(ta, mark=True, element_shape_except0=element_shape_except0)
    return _store(state, handle, ta), value, lengths


def TensorArraySplitV3(state: State, handle: Handle, value: Any, lengths: Any, flow_in: Any
                       ) -> tuple[State, jax.Array]:
    """Write consecutive row blocks of ``value`` (``lengths`` rows each); returns ``(state, flow_out)``."""
    ta = _lookup(state, handle)
    if isinstance(value, (jax.Array, np.ndarray, np.generic)):
        value = jnp.asarray(value)  # Split checks the dtype last (after lengths, shapes, closed, size)
    else:
        value = convert(value, ta.dtype, preferred=False)
    ta = kernels.split(ta, value, lengths)
    return _store(state, handle, ta), _flow(flow_in)


def TensorArraySizeV3(state: State, handle: Handle, flow_in: Any) -> tuple[State, jax.Array]:
    """The array's size; returns ``(state, size)``."""
    del flow_in
    return state, kernels.size(_lookup(state, handle))


def TensorArrayCloseV3(state: State, handle: Handle) -> State:
    """Close the array: every later op on it raises; returns the state."""
    return _store(state, handle, kernels.close(_lookup(state, handle)))


def TensorArrayGradV3(state: State, handle: Handle, flow_in: Any, source: str
                      ) -> tuple[State, Handle, jax.Array]:
    """Look up or create the gradient accumulator of ``handle`` for ``source``; returns
    ``(state, accumulator handle, flow)``. Creating it freezes the forward array's size."""
    return TensorArrayGradWithShape(state, handle, flow_in, (), source)


def TensorArrayGradWithShape(state: State, handle: Handle, flow_in: Any, shape_to_prepend: Any,
                             source: str) -> tuple[State, Handle, jax.Array]:
    """GradV3 whose accumulator elements have ``shape_to_prepend`` prepended."""
    del flow_in
    if handle not in state.arrays:
        _lookup(state, handle)  # NotFound for unknown handles
        Error.WRONG_CONTAINER.raise_(handle=handle)
    forward, _, grads = accumulators.get_or_create(state.grads, state.arrays[handle], str(source), shape_to_prepend)
    state = dataclasses.replace(state, arrays={**state.arrays, handle: forward}, grads=grads)
    return state, accumulators.handle(handle, str(source)), jnp.zeros((), jnp.float32)


def _noting(op: Any) -> Any:
    """``op``, adding to a jta error raised while it runs the note naming the array (its handle)
    and the user's line, as ``jta.TensorArray``'s methods do."""
    @functools.wraps(op)
    def noting(state: State, handle: Handle, *args: Any, **kwargs: Any) -> Any:
        try:
            return op(state, handle, *args, **kwargs)
        except Exception as exc:
            if getattr(exc, "jta_error", None) is not None and isinstance(handle, str):
                noted(exc, handle)
            raise

    return noting


for _name, _op in list(globals().items()):
    if _name.startswith("TensorArray") and _name != "TensorArrayV3" and callable(_op):
        globals()[_name] = _noting(_op)
