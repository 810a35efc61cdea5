"""TensorFlow's raw TensorArray ops, functional: ``state, *tf_outputs = op(state, ...)``.

The explicit ``state`` replaces TensorFlow's per-step resource container: it maps each
array's name (the *handle*, a static string) to its :class:`~jta.TensorArray`, and holds
the gradient registry ``{(forward name, source): accumulator}``. It is a pytree, so it can
be carried through ``lax.scan``, ``jit`` and ``vmap``. Semantics are TensorFlow's C++
kernels (mode K): write-once forward arrays, ``clear_after_read``, zero reads of unwritten
slots of known shape, aggregating gradient arrays, and the kernels' error texts.

```python
from jta import raw_ops as ops
state = ops.new_state()
state, h, flow = ops.TensorArrayV3(state, 2, "float32", element_shape=())
state, flow = ops.TensorArrayWriteV3(state, h, 0, 3.0, flow)
state, v = ops.TensorArrayReadV3(state, h, 0, flow, "float32")  # 3.0
```
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from . import _shapes as S
from .errors import InvalidArgumentError, NotFoundError, UnimplementedError
from .tensor_array import TensorArray, _canonical_dtype, _check_index_scalar, _convert, _empty, _Meta, _static_int
from .throwing import throw

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
        return (self.arrays, self.grads), self.counter

    @classmethod
    def tree_unflatten(cls, counter: int, children: Any) -> State:
        return cls(children[0], children[1], counter)

    def __getitem__(self, handle: Handle) -> TensorArray:
        return _lookup(self, handle)

    def __repr__(self) -> str:
        from ._repr import state_repr  # arrays, then accumulators by source (see jta._repr)

        return state_repr(self)

    def _repr_html_(self) -> str:
        from ._repr import state_html

        return state_html(self)


def new_state() -> State:
    """An empty state: no arrays, no gradient accumulators."""
    return State()


def _lookup(state: State, handle: Handle) -> TensorArray:
    if handle in state.arrays:
        return state.arrays[handle]
    for (name, source), ta in state.grads.items():
        if f"{name}@{source}" == handle:
            return ta
    raise NotFoundError(f"Container per_step does not exist. (Could not find resource: "
                        f"per_step/_tensor_arrays{handle})")


def _store(state: State, handle: Handle, ta: TensorArray) -> State:
    if handle in state.arrays:
        return dataclasses.replace(state, arrays={**state.arrays, handle: ta})
    for key in state.grads:
        if f"{key[0]}@{key[1]}" == handle:
            return dataclasses.replace(state, grads={**state.grads, key: ta})
    raise NotFoundError(f"Container per_step does not exist. (Could not find resource: "
                        f"per_step/_tensor_arrays{handle})")


def _flow(flow_in: Any) -> jax.Array:
    return jnp.asarray(flow_in, jnp.float32)


def _check_dtype(ta: TensorArray, dtype: Any) -> None:
    dtype = _canonical_dtype(dtype)
    if dtype != ta.dtype:
        raise InvalidArgumentError(f"TensorArray dtype is {S.kernel_dtype_name(ta.dtype)} but Op requested "
                                   f"dtype {S.kernel_dtype_name(dtype)}.")


def TensorArrayV3(state: State, size: Any, dtype: Any, element_shape: Any = None,
                  dynamic_size: bool = False, clear_after_read: bool = True,
                  identical_element_shapes: bool = False, tensor_array_name: str = "",
                  *, capacity: Optional[int] = None, checks: bool = True
                  ) -> tuple[State, Handle, jax.Array]:
    """Create an array; returns ``(state, handle, flow)``. ``capacity``/``checks`` are jta's."""
    if np.ndim(size) != 0:
        raise InvalidArgumentError(f"TensorArray size must be scalar, but had shape: "
                                   f"{S.debug_str(np.shape(size))}")
    n = _static_int(size)
    if n is None:
        raise ValueError("jta.raw_ops.TensorArrayV3 needs a static `size` (the buffer shape must be "
                         "known when tracing).")
    if n < 0:
        raise InvalidArgumentError("Size should be >= 0.")
    # TF names an unnamed array after its node, whose default name is the op type.
    name = f"{tensor_array_name or 'TensorArrayV3'}_{state.counter}"
    meta = _Meta(dtype=_canonical_dtype(dtype), element_shape=S.as_shape(element_shape),
                 dynamic_size=bool(dynamic_size), clear_after_read=bool(clear_after_read),
                 infer_shape=bool(identical_element_shapes), name=name,
                 size=None if (dynamic_size and capacity is not None) else n,
                 capacity=None if capacity is None else max(int(capacity), n), checks=checks)
    ta = _empty(meta, n, None)
    state = State({**state.arrays, name: ta}, state.grads, state.counter + 1)
    return state, name, ta.flow


def TensorArrayWriteV3(state: State, handle: Handle, index: Any, value: Any, flow_in: Any
                       ) -> tuple[State, jax.Array]:
    ta = _lookup(state, handle)
    _check_index_scalar(index)  # the kernel: index shape, dtype, then WriteOrAggregate (closed, ...)
    ta = ta._write(index, _convert(value, ta.dtype, preferred=False))
    return _store(state, handle, ta), _flow(flow_in)


def TensorArrayReadV3(state: State, handle: Handle, index: Any, flow_in: Any, dtype: Any
                      ) -> tuple[State, jax.Array]:
    del flow_in
    ta = _lookup(state, handle)
    _check_index_scalar(index)  # the kernel: index shape, dtype, then Read (closed, ...)
    _check_dtype(ta, dtype)
    ta, value = ta._read(index, mark=True)
    return _store(state, handle, ta), value


def TensorArrayGatherV3(state: State, handle: Handle, indices: Any, flow_in: Any, dtype: Any,
                        element_shape: Any = None) -> tuple[State, jax.Array]:
    del flow_in
    ta = _lookup(state, handle)
    _check_dtype(ta, dtype)  # closed: only when reading (none for zero indices), see _gather
    attr = S.as_shape(element_shape)
    if np.ndim(indices) == 1 and np.shape(indices)[0] == 0 and not S.fully_defined(attr) \
            and S.compatible(attr, ta.element_shape):  # the kernel looks at the attribute only
        raise UnimplementedError(
            f"TensorArray has size zero, but element shape {S.debug_str(attr)} is not fully defined. "
            "Currently only static shapes are supported when packing zero-size TensorArrays.")
    ta, value = ta._gather(indices, mark=True, element_shape=element_shape)
    return _store(state, handle, ta), value


def TensorArrayScatterV3(state: State, handle: Handle, indices: Any, value: Any, flow_in: Any
                         ) -> tuple[State, jax.Array]:
    ta = _lookup(state, handle)
    ta = ta._scatter(indices, _convert(value, ta.dtype, preferred=False))  # (closed: after dtype, rank)
    return _store(state, handle, ta), _flow(flow_in)


def TensorArrayConcatV3(state: State, handle: Handle, flow_in: Any, dtype: Any,
                        element_shape_except0: Any = None) -> tuple[State, jax.Array, np.ndarray]:
    del flow_in
    ta = _lookup(state, handle)
    _check_dtype(ta, dtype)
    ta._check_open()  # the kernel's PackOrConcatSize()
    attr = S.as_shape(element_shape_except0)
    n = ta._meta.marked_size if ta._meta.is_grad else _static_int(ta._size_value())
    if n == 0 and not S.fully_defined(attr):  # the kernel looks at the attribute only
        raise UnimplementedError(
            f"TensorArray has size zero, but element_shape_except0 {S.debug_str(attr)} is not fully "
            "defined. Currently only static shapes are supported when concatenating zero-size "
            "TensorArrays.")
    ta, value, lengths = ta._concat(mark=True, element_shape_except0=element_shape_except0)
    return _store(state, handle, ta), value, lengths


def TensorArraySplitV3(state: State, handle: Handle, value: Any, lengths: Any, flow_in: Any
                       ) -> tuple[State, jax.Array]:
    ta = _lookup(state, handle)
    if isinstance(value, (jax.Array, np.ndarray, np.generic)):
        value = jnp.asarray(value)  # Split checks the dtype last (after lengths, shapes, closed, size)
    else:
        value = _convert(value, ta.dtype, preferred=False)
    ta = ta._split(value, lengths)
    return _store(state, handle, ta), _flow(flow_in)


def TensorArraySizeV3(state: State, handle: Handle, flow_in: Any) -> tuple[State, jax.Array]:
    del flow_in
    return state, _lookup(state, handle).size()


def TensorArrayCloseV3(state: State, handle: Handle) -> State:
    return _store(state, handle, _lookup(state, handle).close())


def TensorArrayGradV3(state: State, handle: Handle, flow_in: Any, source: str
                      ) -> tuple[State, Handle, jax.Array]:
    """Look up or create the gradient accumulator of ``handle`` for ``source`` (§3.1)."""
    return TensorArrayGradWithShape(state, handle, flow_in, (), source)


def TensorArrayGradWithShape(state: State, handle: Handle, flow_in: Any, shape_to_prepend: Any,
                             source: str) -> tuple[State, Handle, jax.Array]:
    """GradV3 whose accumulator elements have ``shape_to_prepend`` prepended (§3.2)."""
    del flow_in
    if handle not in state.arrays:
        _lookup(state, handle)  # NotFound for unknown handles
        raise InvalidArgumentError(f"Wrong input container. _tensor_array_grads{handle}")
    forward = state.arrays[handle]
    forward._check_open()
    if forward.dynamic_size:  # creating a gradient freezes the forward size for good
        forward = forward._replace(dynamic_size=False)
        state = _store(state, handle, forward)
    key = (handle, str(source))
    if key not in state.grads:
        prepend = S.as_int_tuple(np.asarray(shape_to_prepend).reshape(-1))
        state = dataclasses.replace(state, grads={**state.grads, key: forward._make_grad(source, prepend)})
    return state, f"{handle}@{source}", jnp.zeros((), jnp.float32)


