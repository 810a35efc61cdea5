"""``jta.TensorArray``: the ``tf.TensorArray`` Python API on an immutable JAX pytree.

Each method does what ``tensorflow/python/ops/tensor_array_ops.py`` (``_GraphTensorArrayV2``'s
V3 path) does in Python, static shape checks and ``preferred_dtype`` conversion, then calls the
kernel of ``jta._core.kernels``. Mutators return a new array; value-returning methods return values.
"""

from __future__ import annotations

import functools
import types
from typing import Any, Optional, Union

import jax
import jax.numpy as jnp
import numpy as np

from . import _display
from ._core import accumulators, capacities, kernels, shapes, storage
from ._core.array import ArrayData, ArrayMeta, become, empty, known_size, require_static_size
from ._core.inputs import as_indices, convert, element_dtype, packed, static_int
from ._delivery import value_ops
from ._records.catalogue import Error
from ._records.primitives import noted

__all__ = ["TensorArray"]

ArrayLike = Any
Index = Union[int, jax.Array]


@jax.tree_util.register_pytree_with_keys_class
class TensorArray(ArrayData):
    """A functional ``tf.TensorArray``: every mutator returns a new array.

    **Arguments:**

    - `dtype`: element dtype.
    - `size`: initial number of slots (a Python int).
    - `dynamic_size`: whether writes past the end grow the array.
    - `clear_after_read`: TensorFlow's flag; enforced by ``jta.raw_ops`` reads (the functional
      ``read`` here does not return a new array, so it cannot clear slots).
    - `tensor_array_name`: name used in error messages (default ``"TensorArray"``).
    - `infer_shape`: whether the first write fixes the element shape.
    - `element_shape`: a (partial) element shape; fully known shapes allow traced indices.
    - `capacity`: (jta) static slot budget of a ``dynamic_size`` array, so that it can grow
      at indices computed inside ``jit``/``lax.scan``.
    - `checks`: (jta) ``False`` drops all runtime bookkeeping for maximum speed: indices are not
      range-checked and writing a slot twice adds the values (TensorFlow's XLA lowering).

    ```python
    >>> import jax, jax.numpy as jnp, jta
    >>> def step(ta, t):
    ...     return ta.write(t, jnp.sin(t * 1.0)), None
    >>> ta = jta.TensorArray(jnp.float32, size=4, element_shape=())
    >>> ta, _ = jax.lax.scan(step, ta, jnp.arange(4))
    >>> ta.stack()
    Array([0.        , 0.84147096, 0.9092974 , 0.14112   ], dtype=float32)

    ```
    """

    def __init__(self, dtype: Any, size: Optional[Index] = None, dynamic_size: Optional[bool] = None,
                 clear_after_read: Optional[bool] = None, tensor_array_name: Optional[str] = None,
                 handle: Any = None, flow: Any = None, infer_shape: bool = True,
                 element_shape: Any = None, colocate_with_first_write_call: bool = True,
                 name: Optional[str] = None, *, capacity: Optional[int] = None, checks: bool = True):
        del colocate_with_first_write_call, name  # device placement is JAX's business
        if handle is not None:
            Error.NO_HANDLES.raise_()
        if size is None:
            Error.SIZE_REQUIRED.raise_()
        become(self, created(dtype, size, "jta.TensorArray", dynamic_size=bool(dynamic_size),
                             clear_after_read=clear_after_read in (None, True), infer_shape=bool(infer_shape),
                             element_shape=element_shape, name=tensor_array_name or "TensorArray",
                             capacity=capacity, checks=checks, flow=flow))

    # -- size and errors --------------------------------------------------------------------
    def size(self, name: Optional[str] = None) -> jax.Array:
        """The number of slots (``TensorArraySizeV3``)."""
        del name
        return kernels.size(self)

    def throw(self) -> TensorArray:
        """Raise the first recorded error (TensorFlow's class and text); else return ``self``.

        Eagerly this raises immediately; inside ``jit`` it raises at run time.
        """
        value_ops.throw_array(self)
        return self

    @property
    def error(self) -> Optional[Exception]:
        """The recorded error as an exception object (concrete arrays only), else ``None``."""
        return value_ops.array_exception(self)

    # -- writes -----------------------------------------------------------------------------
    def write(self, index: Index, value: ArrayLike, name: Optional[str] = None) -> TensorArray:
        """Write ``value`` at ``index`` (``TensorArrayWriteV3``); returns the new array."""
        del name
        value = packed(value)
        # TF's Python layer checks the static shape before the kernel checks the dtype.
        self._python_shape_check(np.shape(value))
        return kernels.write(self, index, convert(value, self.dtype, preferred=True))

    def unstack(self, value: ArrayLike, name: Optional[str] = None) -> TensorArray:
        """Write ``value[i]`` at each index ``i`` (``scatter(range(len(value)), value)``)."""
        del name
        value = packed(value)
        if np.ndim(value) >= 1:  # TF's Python layer checks the static shape before the kernel's dtype
            self._python_shape_check(np.shape(value)[1:])
        value = convert(value, self.dtype, preferred=True)
        if value.ndim == 0:
            Error.UNPACK_VALUE_SCALAR.raise_(shape=shapes.debug_str(()))
        return self._merged_shape(kernels.unpack_or_scatter(self, np.arange(value.shape[0]), value), value.shape)

    def scatter(self, indices: ArrayLike, value: ArrayLike, name: Optional[str] = None) -> TensorArray:
        """Write ``value[k]`` at ``indices[k]`` (``TensorArrayScatterV3``)."""
        del name
        value = packed(value)
        # TF's Python layer checks value.shape[1:] (``()`` for a scalar) before the kernel's dtype.
        self._python_shape_check(np.shape(value)[1:])
        value = convert(value, self.dtype, preferred=True)
        return self._merged_shape(kernels.unpack_or_scatter(self, indices, value), value.shape)

    def split(self, value: ArrayLike, lengths: ArrayLike, name: Optional[str] = None) -> TensorArray:
        """Write consecutive row blocks of ``value`` of the given ``lengths`` (``TensorArraySplitV3``)."""
        del name
        value = packed(value)
        value = convert(value, self.dtype, preferred=True)
        return kernels.split(self, value, lengths, python_layer=True)  # TF's Python checks equal lengths first

    # -- reads ------------------------------------------------------------------------------
    def read(self, index: Index, name: Optional[str] = None) -> jax.Array:
        """The element at ``index`` (``TensorArrayReadV3``); unwritten slots read as zeros."""
        del name
        index = as_indices(index, "TensorArrayReadV3", "index")
        ta, value = value_ops.read(self, index, mark=False)
        return value

    def stack(self, name: Optional[str] = None) -> jax.Array:
        """All elements stacked on a new leading axis (``gather(range(size))``)."""
        del name
        self.check_open()
        rows = capacities.stack_rows(self)  # a size known at run time only, under jta.checked
        return self._gather(np.arange(require_static_size(self, "stack()") if rows is None else rows))

    def stack_padded(self, name: Optional[str] = None) -> tuple[jax.Array, jax.Array]:
        """Every allocated slot stacked, and the size: ``(values, size)``.

        ``values`` has shape ``[capacity, *element_shape]``: ``values[:size]`` is ``stack()``
        and the rows from ``size`` on are zeros. ``size`` is ``self.size()``. Unlike ``stack()``,
        this works inside ``jit`` when the size of a ``dynamic_size`` array is only known at run
        time (the array was grown at traced indices, up to its ``capacity``), so a decoder can
        return its outputs and their count from compiled code, also under ``jax.vmap``.
        TensorFlow's XLA lowering of a growable list (``TensorListStack``) likewise returns its
        whole buffer.

        ```python
        >>> import jax, jax.numpy as jnp, jta
        >>> @jax.jit
        ... def count_to(n):
        ...     ta = jta.TensorArray(jnp.int32, size=0, dynamic_size=True, capacity=5, element_shape=())
        ...     body = lambda i, ta: ta.write(i, 10 * (i + 1))
        ...     return jax.lax.fori_loop(0, n, body, ta).stack_padded()
        >>> count_to(3)
        (Array([10, 20, 30,  0,  0], dtype=int32), Array(3, dtype=int32))

        ```
        """
        del name
        size = self.size()
        cap = self.capacity
        n = known_size(self)
        if n is not None:  # a static size: stack() as it is, then zeros up to the capacity
            values = self.stack()
            pad = jnp.zeros((cap - n, *values.shape[1:]), values.dtype)
            return jnp.concatenate([values, pad]), size
        # A size known at run time only: read every allocated slot (slots past the size are
        # unwritten, so they read as zeros and record no error), then mask the rows past it.
        values = self.replace(traced_size=jnp.asarray(cap, jnp.int32))._gather(np.arange(cap))
        keep = (jnp.arange(cap) < size).reshape((cap,) + (1,) * (values.ndim - 1))
        return jnp.where(keep, values, jnp.zeros((), values.dtype)), size

    def gather(self, indices: ArrayLike, name: Optional[str] = None) -> jax.Array:
        """The elements at ``indices`` stacked (``TensorArrayGatherV3``)."""
        del name
        return self._gather(indices)

    def concat(self, name: Optional[str] = None) -> jax.Array:
        """All elements concatenated along their first axis (``TensorArrayConcatV3``)."""
        del name
        es = self.element_shape  # TF's Python layer passes element_shape[1:] as the attribute
        ta, value, _ = value_ops.concat(self, mark=False, element_shape_except0=None if es is None else es[1:])
        return value

    # -- misc -------------------------------------------------------------------------------
    def close(self, name: Optional[str] = None) -> TensorArray:
        """A closed copy: every later op on it raises "has already been closed."."""
        del name
        return kernels.close(self)

    def grad(self, source: str, registry: dict, shape_to_prepend: Any = ()
             ) -> tuple[TensorArray, TensorArray, dict]:
        """This array's gradient accumulator for ``source`` (``TensorArrayGradV3``).

        ``registry`` is a dict ``{(name, source): accumulator}`` that you thread through your
        code. Returns ``(forward, accumulator, registry)``: the forward array with its size
        frozen (as TensorFlow does), the accumulator (the existing one if ``source`` was asked
        for before), and the registry holding it. Store an updated accumulator back with
        ``jta.gradients.put(registry, g)``. See ``jta.gradients`` for the backward rules.
        """
        return accumulators.get_or_create(registry, self, source, shape_to_prepend)

    def identity(self) -> TensorArray:
        """The same array (flow ordering is implicit in JAX's dataflow)."""
        return self

    def __repr__(self) -> str:
        return _display.array_repr(self)

    def _repr_html_(self) -> str:
        return _display.array_html(self)

    # -- TensorFlow's Python layer ----------------------------------------------------------
    def _python_shape_check(self, shape: tuple[int, ...]) -> None:
        """TF's Python-level check (``ValueError: Inconsistent shapes...``) before the kernel."""
        if not shapes.compatible(self.element_shape, tuple(shape)):
            Error.INCONSISTENT_SHAPES.raise_(shape=shapes.python_str(tuple(shape)),
                                             element_shape=shapes.python_str(self.element_shape))

    @staticmethod
    def _merged_shape(ta: TensorArray, value_shape: tuple[int, ...]) -> TensorArray:
        """TF's Python layer merges ``value_shape[1:]`` of every scatter/unstack into its element
        shape (with ``infer_shape``), even when zero elements are written; the kernel only
        learns shapes from written elements, so an empty one fixes the Python layer's alone."""
        if value_shape[0] != 0:
            return storage.pin_shape(ta, tuple(value_shape[1:]))
        return storage.python_shape(ta, tuple(value_shape[1:]))

    def _gather(self, indices: ArrayLike) -> jax.Array:
        # TF's Python gather/stack pass the inferred element shape as the op's attribute.
        indices = as_indices(indices, "TensorArrayGatherV3", "indices")
        ta, value = value_ops.gather(self, indices, mark=False, element_shape=self.element_shape)
        return value


def checked_size(size: Any, what: str) -> int:
    """The static size of a new array: ``TensorArrayOp``'s checks, then jta's static-size rule."""
    size = as_indices(size, "TensorArrayV3", "size")
    if np.ndim(size) != 0:
        Error.SIZE_NOT_SCALAR.raise_(shape=shapes.debug_str(np.shape(size)))
    n = static_int(size)
    if n is None:
        Error.STATIC_SIZE_REQUIRED.raise_(what=what)
    if n < 0:
        Error.NEGATIVE_SIZE.raise_()
    if n >= 2**31:
        Error.SIZE_TOO_LARGE.raise_(name="TensorArray", what="size", size=n)
    return n


def created(dtype: Any, size: Any, what: str, *, dynamic_size: bool, clear_after_read: bool, infer_shape: bool,
            element_shape: Any, name: str, capacity: Any, checks: bool, flow: Any = None) -> TensorArray:
    """A new array, for ``jta.TensorArray`` and ``jta.raw_ops.TensorArrayV3`` alike (``what``: the
    caller, for errors). Under ``jta.checked`` a ``dynamic_size`` array without ``capacity=`` is
    numbered, and gets a buffer of the plan's rows once a trace needed one
    (:mod:`jta._core.capacities`)."""
    n = checked_size(size, what)
    plan = capacities.array_plan() if dynamic_size and capacity is None else None
    if plan is not None and plan[1] is not None:
        capacity = max(plan[1], n)
    meta = ArrayMeta(dtype=element_dtype(dtype), element_shape=shapes.as_shape(element_shape),
                     dynamic_size=dynamic_size, clear_after_read=clear_after_read, infer_shape=infer_shape,
                     name=name, static_size=None if (dynamic_size and capacity is not None) else n,
                     capacity=checked_capacity(capacity, n), checks=checks, plan=None if plan is None else plan[0])
    return empty(TensorArray, meta, n, flow)


def checked_capacity(capacity: Any, size: int) -> Optional[int]:
    """jta's ``capacity=``: a static slot count, at least ``size``, within int32 indices."""
    if capacity is None:
        return None
    cap = static_int(as_indices(capacity, "jta.TensorArray", "capacity"))
    if cap is None:
        Error.STATIC_CAPACITY_REQUIRED.raise_()
    if cap >= 2**31:
        Error.SIZE_TOO_LARGE.raise_(name="TensorArray", what="capacity", size=cap)
    return max(cap, size)


def _noting(method: Any) -> Any:
    """``method``, adding to a jta error raised while it runs (a static check, or an eager one)
    the note compiled sites carry: the array's name and the user's line."""
    @functools.wraps(method)
    def noting(self: TensorArray, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except Exception as exc:
            if getattr(exc, "jta_error", None) is not None:
                noted(exc, self.name)
            raise

    return noting


for _name, _method in list(vars(TensorArray).items()):
    if isinstance(_method, types.FunctionType) and not _name.startswith(("_", "tree_")):
        setattr(TensorArray, _name, _noting(_method))
