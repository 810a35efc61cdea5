"""``jta.TensorArray``: TensorFlow's TensorArray as an immutable JAX pytree.

Storage has two forms, chosen from what is known statically:

* **dense** (the element shape is fully known): one buffer ``[capacity, *element_shape]``
  plus one ``int32`` bitfield per slot (see ``_checks``). Indices may be traced, so this is
  the form used inside ``jit``/``lax.scan``.
* **slots** (element shape not fully known, e.g. ragged ``infer_shape=False`` arrays): a tuple
  with one array (or ``None``) per slot and the per-slot state kept statically. Indices must
  be Python ints. With ``infer_shape=True`` the first write fixes the element shape and the
  array turns dense.

Writes are ``buffer.at[i].add(value)``: a forward slot is written once into zeros, so adding
equals setting, and the transpose of a scatter-add passes the cotangent buffer through
unchanged (reading out only slot ``i``). This keeps reverse mode through a loop linear in
the number of steps, where ``dynamic_update_slice`` would copy the whole cotangent buffer
in every backward step.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from typing import Any, Optional, Union

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.core import Tracer

from . import _checks as C
from . import _shapes as S
from .errors import InvalidArgumentError, UnimplementedError

__all__ = ["TensorArray"]

ArrayLike = Any
Index = Union[int, jax.Array]


@dataclasses.dataclass(frozen=True)
class _Meta:
    """Static (aux) data of a TensorArray: everything that is not a leaf."""

    dtype: np.dtype
    element_shape: S.Shape
    dynamic_size: bool
    clear_after_read: bool
    infer_shape: bool
    name: str
    size: Optional[int]  # static logical size; None when it lives in the ``size`` leaf
    capacity: Optional[int]  # jta: static capacity allowing traced growth
    is_grad: bool = False
    marked_size: int = -1
    closed: bool = False
    checks: bool = True
    slots: Optional[tuple[tuple[int, S.Shape], ...]] = None  # slots form: (flags, shape) per slot


def _canonical_dtype(dtype: Any) -> np.dtype:
    dtype = getattr(dtype, "as_numpy_dtype", dtype)  # accept tf.DType
    return np.dtype(jax.dtypes.canonicalize_dtype(dtype))


def _static_int(x: Any) -> Optional[int]:
    """The Python int of ``x`` if it is known at trace time, else ``None``."""
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return int(x)
    if isinstance(x, Tracer):
        return None
    if isinstance(x, (np.ndarray, jax.Array)) and np.ndim(x) == 0:
        return int(x)
    return None


def _check_index_scalar(index: Any) -> None:
    if np.ndim(index) != 0:
        raise InvalidArgumentError(
            f"TensorArray index must be scalar, but had shape: {S.debug_str(np.shape(index))}")


def _value_dtype_name(value: Any) -> str:
    return S.kernel_dtype_name(np.asarray(value).dtype if not hasattr(value, "dtype") else value.dtype)


def _convert(value: Any, dtype: np.dtype, preferred: bool) -> jax.Array:
    """Convert like ``tf.convert_to_tensor``; Python values take ``dtype`` as TF's graph mode converts.

    ``preferred`` is the Python API's ``preferred_dtype=dtype``; the raw ops infer the dtype
    from the value as TensorFlow's op wrappers do (``3`` is int32, ``3.0`` float32).
    """
    if isinstance(value, jax.Array):  # a tensor: its dtype is what it is
        arr = value
    else:
        python = not isinstance(value, (np.ndarray, np.generic))
        arr = np.asarray(value)
        if arr.dtype.kind in "USO":
            raise InvalidArgumentError(
                f"TensorArray dtype is {S.kernel_dtype_name(dtype)} but Op is trying to write dtype string.")
        # TF's conversion of Python values (convert_to_tensor with preferred_dtype): bool < int <
        # float < complex, unsigned ints count as ints and bfloat16 as a float; integers wrap
        # (300 -> uint8 44), as in TF. A NumPy value is cast to the array's dtype whatever it is
        # (TF's constant conversion is NumPy's astype); the raw ops keep a NumPy value's dtype.
        kind_order = "bifc"
        target = "f" if dtype == jnp.bfloat16 else "i" if dtype.kind == "u" else dtype.kind
        if preferred and not python:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", np.exceptions.ComplexWarning)  # complex -> real drops .imag
                arr = arr.astype(dtype)
        elif preferred and arr.dtype.kind in kind_order and target in kind_order and (
                kind_order.index(arr.dtype.kind) <= kind_order.index(target)):
            arr = arr.astype(dtype)
        elif not python:
            pass
        elif arr.dtype == np.float64:
            arr = arr.astype(np.float32)  # TF's default for Python floats
        elif arr.dtype == np.int64 and np.all(np.abs(arr) < 2**31):
            arr = arr.astype(np.int32)
    if np.dtype(jax.dtypes.canonicalize_dtype(arr.dtype)) != dtype:
        raise InvalidArgumentError(
            f"TensorArray dtype is {S.kernel_dtype_name(dtype)} but Op is trying to write dtype "
            f"{S.kernel_dtype_name(arr.dtype)}.")  # the value's own dtype, as TF names it (complex128)
    return jnp.asarray(arr, dtype)


@jax.tree_util.register_pytree_node_class
class TensorArray:
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
      range-checked and writing a slot twice is undefined.

    ```python
    import jax, jax.numpy as jnp
    import jta

    def step(ta, t):
        return ta.write(t, jnp.sin(t * 1.0)), None

    ta = jta.TensorArray(jnp.float32, size=4, element_shape=())
    ta, _ = jax.lax.scan(step, ta, jnp.arange(4))
    print(ta.stack())  # [0.         0.84147096 0.9092974  0.14112   ]
    ```
    """

    __slots__ = ("_data", "_flags", "_size", "_error", "_flow", "_meta")

    def __init__(self, dtype: Any, size: Optional[Index] = None, dynamic_size: Optional[bool] = None,
                 clear_after_read: Optional[bool] = None, tensor_array_name: Optional[str] = None,
                 handle: Any = None, flow: Any = None, infer_shape: bool = True,
                 element_shape: Any = None, colocate_with_first_write_call: bool = True,
                 name: Optional[str] = None, *, capacity: Optional[int] = None, checks: bool = True):
        del colocate_with_first_write_call, name  # device placement is JAX's business
        if handle is not None:
            raise ValueError("jta.TensorArray has no resource handles; arrays are values. "
                             "Pass the TensorArray itself instead of its handle.")
        if size is None:
            raise ValueError("Argument `size` must be provided if handle is not provided.")
        if np.ndim(size) != 0:
            raise InvalidArgumentError(
                f"TensorArray size must be scalar, but had shape: {S.debug_str(np.shape(size))}")
        n = _static_int(size)
        if n is None:
            raise ValueError("jta.TensorArray needs a static `size` (a Python int): the buffer "
                             "shape must be known when tracing.")
        if n < 0:
            raise InvalidArgumentError("Size should be >= 0.")
        meta = _Meta(dtype=_canonical_dtype(dtype), element_shape=S.as_shape(element_shape),
                     dynamic_size=bool(dynamic_size), clear_after_read=clear_after_read in (None, True),
                     infer_shape=bool(infer_shape), name=tensor_array_name or "TensorArray",
                     size=None if (dynamic_size and capacity is not None) else n,
                     capacity=None if capacity is None else max(int(capacity), n), checks=checks)
        _init_from(self, _empty(meta, n, flow))

    # -- pytree -----------------------------------------------------------------------------
    def tree_flatten(self):
        return (self._data, self._flags, self._size, self._error, self._flow), self._meta

    @classmethod
    def tree_unflatten(cls, meta: _Meta, children: Any) -> TensorArray:
        self = object.__new__(cls)
        self._data, self._flags, self._size, self._error, self._flow = children
        self._meta = meta
        return self

    def _replace(self, **changes: Any) -> TensorArray:
        leaves = dict(data=self._data, flags=self._flags, size=self._size, error=self._error,
                      flow=self._flow)
        meta_changes = {k: v for k, v in changes.items() if k not in leaves}
        if "static_size" in meta_changes:  # the meta ``size`` field (``size`` is the leaf)
            meta_changes["size"] = meta_changes.pop("static_size")
        leaves.update({k: v for k, v in changes.items() if k in leaves})
        meta = dataclasses.replace(self._meta, **meta_changes) if meta_changes else self._meta
        return TensorArray.tree_unflatten(
            meta, (leaves["data"], leaves["flags"], leaves["size"], leaves["error"], leaves["flow"]))

    # -- properties -------------------------------------------------------------------------
    @property
    def dtype(self) -> np.dtype:
        return self._meta.dtype

    @property
    def element_shape(self) -> S.Shape:
        """The (partial) element shape: a tuple with ``None`` for unknown dims, or ``None``."""
        return self._meta.element_shape

    @property
    def dynamic_size(self) -> bool:
        return self._meta.dynamic_size

    @property
    def flow(self) -> jax.Array:
        return self._flow

    @property
    def name(self) -> str:
        return self._meta.name

    @property
    def handle(self) -> None:
        return None

    @property
    def is_dense(self) -> bool:
        return self._meta.slots is None

    @property
    def capacity(self) -> int:
        """Number of allocated slots (static)."""
        return self._data.shape[0] if self.is_dense else len(self._meta.slots)  # type: ignore[arg-type]

    # -- size -------------------------------------------------------------------------------
    def _size_value(self) -> Union[int, jax.Array]:
        """Logical size: a Python int when static, else the traced ``size`` leaf."""
        if self._meta.size is not None:
            return self._meta.size
        return self._size

    def size(self, name: Optional[str] = None) -> jax.Array:
        """The number of slots (``TensorArraySizeV3``)."""
        del name
        self._check_open()
        return jnp.asarray(self._size_value(), jnp.int32)

    def _static_size(self, what: str) -> int:
        size = self._size_value()
        n = _static_int(size)
        if n is None:
            raise ValueError(
                f"TensorArray {self.name}: {what} needs the array's size, which is only known at run "
                "time here (a dynamically sized array grown at traced indices inside jit). Use "
                "gather() with static indices, or call it outside jit.")
        return n

    def _check_open(self) -> None:
        if self._meta.closed:
            raise InvalidArgumentError(f"TensorArray {self.name} has already been closed.")

    # -- error handling ---------------------------------------------------------------------
    def _error_extra(self) -> dict[str, str]:
        shape = self._meta.element_shape or ()
        return {"rest": "".join(f",{d}" for d in shape[1:])}

    def _settle(self) -> TensorArray:
        """Raise now when the error record is concrete (eager code); return ``self``."""
        if self._error is not None and C.is_concrete(self._error, self._flags):
            C.raise_if_error(self.name, self._error, self._flags, self._error_extra())
        return self

    def throw(self) -> TensorArray:
        """Raise the first recorded error (TensorFlow's class and text); else return ``self``.

        Eagerly this raises immediately; inside ``jit`` it raises at run time.
        """
        if self._error is not None:
            C.error_if(self.name, self._error, self._flags, self._error_extra())
        return self

    def _throw_slots(self, indices: jax.Array) -> None:
        """Like :meth:`throw`, but look only at the slots ``indices``: O(len), not O(capacity),
        so reading inside a loop stays linear in the number of steps."""
        if self._error is None:
            return
        flags = None
        if self.is_dense and self._flags is not None:
            flags = (jnp.zeros(jnp.shape(indices), jnp.int32) if self._flags.shape[0] == 0  # no slots to index
                     else self._flags.at[indices].get(mode="fill", fill_value=0))
        C.error_if(self.name, self._error, flags, self._error_extra(), indices)

    @property
    def error(self) -> Optional[Exception]:
        """The recorded error as an exception object (concrete arrays only), else ``None``."""
        if self._error is None:
            return None
        return C.make_exception(self.name, self._error, self._flags, self._error_extra())

    # -- writes -----------------------------------------------------------------------------
    def write(self, index: Index, value: ArrayLike, name: Optional[str] = None) -> TensorArray:
        """Write ``value`` at ``index`` (``TensorArrayWriteV3``); returns the new array."""
        del name
        # TF's Python layer checks the static shape before the kernel checks the dtype.
        self._python_shape_check(np.shape(value), np.shape(value))
        value = _convert(value, self.dtype, preferred=True)
        return self._write(index, value)

    def _python_shape_check(self, shape: tuple[int, ...], shown: tuple[int, ...]) -> None:
        """TF's Python-level check (``ValueError: Inconsistent shapes...``) before the kernel."""
        es = self._meta.element_shape
        if not S.compatible(es, tuple(shape)):
            raise ValueError(f"Inconsistent shapes: saw {S.python_str(tuple(shown))} but expected "
                             f"{S.python_str(es)} ")

    def _kernel_shape_check(self, i: Any, shape: tuple[int, ...]) -> None:
        es = self._meta.element_shape
        if not S.compatible(es, tuple(shape)):
            raise InvalidArgumentError(
                f"TensorArray {self.name}: Could not write to TensorArray index {i} because the value "
                f"shape is {S.debug_str(tuple(shape))} which is incompatible with the TensorArray's "
                f"inferred element shape: {S.debug_str(es)} (consider setting infer_shape=False).")

    def _write(self, index: Index, value: jax.Array) -> TensorArray:
        """The kernel's WriteOrAggregate (§1.3): checks in TensorFlow's order."""
        _check_index_scalar(index)  # the op kernel's checks come first: index shape, dtype
        if value.dtype != self.dtype:
            raise InvalidArgumentError(
                f"TensorArray dtype is {S.kernel_dtype_name(self.dtype)} but Op is trying to write dtype "
                f"{S.kernel_dtype_name(value.dtype)}.")
        self._check_open()
        i = _static_int(index)
        ta = self
        if i is not None:
            ta = ta._static_range_check_write(i)
        shown_i = i if i is not None else "<traced>"
        ta._kernel_shape_check(shown_i, value.shape)
        ta = ta._pin_shape(value.shape)
        if ta.is_dense:
            return ta._write_dense(index if i is None else i, value)
        if i is None:
            raise ValueError(
                f"TensorArray {self.name}: writing at a traced index needs a fully known element "
                f"shape, but it is {S.debug_str(self.element_shape)}. Pass element_shape= when "
                "creating the array (or keep infer_shape=True and write once at a Python index).")
        return ta._write_slots(i, value)

    def _static_range_check_write(self, i: int) -> TensorArray:
        m = self._meta
        size = _static_int(self._size_value())
        if i < 0 or (not m.dynamic_size and size is not None and i >= size):
            shown = size if size is not None else "<traced>"
            raise InvalidArgumentError(
                f"TensorArray {self.name}: Tried to write to index {i} but array is not resizeable "
                f"and size is: {shown}")
        if m.dynamic_size and size is not None and i >= size:
            return self._grow(i + 1)
        return self

    def _grow(self, n: int) -> TensorArray:
        """Grow a statically sized array to ``n`` slots (eager code and Python indices)."""
        m = self._meta
        if not self.is_dense:
            slots = m.slots + ((0, None),) * (n - len(m.slots))  # type: ignore[operator]
            data = tuple(self._data) + (None,) * (n - len(m.slots))  # type: ignore[operator]
            if m.size is not None:
                return self._replace(slots=slots, data=data, static_size=n)
            return self._replace(slots=slots, data=data)
        cap = self._data.shape[0]
        data, flags = self._data, self._flags
        if n > cap:
            pad = n - cap
            data = jnp.concatenate([data, jnp.zeros((pad,) + data.shape[1:], data.dtype)])
            if flags is not None:
                flags = jnp.concatenate([flags, jnp.zeros((pad,), jnp.int32)])
        if m.size is not None:
            return self._replace(data=data, flags=flags, static_size=n)
        return self._replace(data=data, flags=flags, size=jnp.maximum(self._size, n))

    def _pin_shape(self, shape: tuple[int, ...]) -> TensorArray:
        """``identical_element_shapes``: the first write fixes the element shape."""
        m = self._meta
        if not m.infer_shape or S.fully_defined(m.element_shape):
            return self
        ta = self._replace(element_shape=tuple(shape))
        return ta._to_dense() if ta._can_be_dense() else ta

    def _can_be_dense(self) -> bool:
        m = self._meta
        if not S.fully_defined(m.element_shape) or m.slots is None:
            return False
        return all(shape is None or tuple(shape) == m.element_shape for _, shape in m.slots)

    def _to_dense(self) -> TensorArray:
        m = self._meta
        shape = m.element_shape
        assert m.slots is not None and shape is not None
        zeros = jnp.zeros(shape, m.dtype)
        rows = [zeros if v is None else v for v in self._data]  # type: ignore[union-attr]
        data = jnp.stack(rows) if rows else jnp.zeros((0, *shape), m.dtype)
        flags = jnp.asarray([f for f, _ in m.slots], jnp.int32) if m.checks else None
        return self._replace(data=data, flags=flags, slots=None)

    def _write_dense(self, i: Index, value: jax.Array) -> TensorArray:
        m = self._meta
        data, flags, error, size = self._data, self._flags, self._error, self._size
        cap = data.shape[0]
        if isinstance(i, int) and m.size is not None:
            ok: Any = True
        else:
            i = jnp.asarray(i, jnp.int32)
            if m.dynamic_size:
                if m.capacity is None:
                    raise UnimplementedError(
                        f"TensorArray {self.name}: a dynamic_size array written at a traced index "
                        "(inside jit or lax.scan) needs a static capacity; create it with "
                        "TensorArray(..., dynamic_size=True, capacity=N).")
                ok = (i >= 0) & (i < cap)
                if m.checks:
                    error = C.record(error, i < 0, C.WRITE_OUT_OF_RANGE, i, self._size_value())
                    error = C.record(error, i >= cap, C.WRITE_BEYOND_CAPACITY, i, cap)
                size = jnp.where(ok, jnp.maximum(size, i + 1), size)
            else:
                limit = self._size_value()
                ok = (i >= 0) & (i < limit)
                if m.checks:
                    error = C.record(error, ~ok, C.WRITE_OUT_OF_RANGE, i, limit)
        if cap == 0:  # no rows, so any traced index is out of range (recorded above); JAX cannot
            # index an empty axis
            return self._replace(error=error, size=size)._settle()
        if ok is not True:
            # The data write clamps a traced index into the buffer, so that it is one in-place
            # dynamic-update-slice (a dropped scatter adds a bounds check and a select per step).
            # Out of range, the error record above poisons the array (and the flags update is
            # dropped); with checks=False the write lands in the nearest slot, as TensorFlow's XLA
            # lowering does.
            i = jnp.clip(i, 0, cap - 1)
            j = jnp.where(ok, i, cap)
        else:
            j = i
        if m.checks:
            old = flags.at[j].get(mode="fill", fill_value=0)  # type: ignore[union-attr]
            flags = flags.at[j].set(_write_bits(old, m.is_grad), mode="drop")  # type: ignore[union-attr]
        data = _write_row(data, i, value, m.is_grad)
        return self._replace(data=data, flags=flags, error=error, size=size)._settle()

    def _write_slots(self, i: int, value: jax.Array) -> TensorArray:
        m = self._meta
        assert m.slots is not None
        flags, shape = m.slots[i]
        if flags & C.READ:
            raise InvalidArgumentError(C.SLOT_MESSAGES[C.E_WRITE_AFTER_READ].format(name=self.name, i=i))
        old = self._data[i]  # type: ignore[index]
        if flags & C.WRITTEN:
            if not m.is_grad:
                raise InvalidArgumentError(C.SLOT_MESSAGES[C.E_WRITTEN_TWICE].format(name=self.name, i=i))
            if tuple(shape) != tuple(value.shape):  # type: ignore[arg-type]
                raise InvalidArgumentError(
                    f"TensorArray {self.name}: Could not aggregate to TensorArray index {i} because the "
                    f"existing shape is {S.debug_str(shape)} but the new input shape is "
                    f"{S.debug_str(tuple(value.shape))}.")
            if old is not None:
                value = old + value
        slots = m.slots[:i] + ((flags | C.WRITTEN, tuple(value.shape)),) + m.slots[i + 1:]
        data = self._data[:i] + (value,) + self._data[i + 1:]  # type: ignore[index]
        return self._replace(slots=slots, data=data)

    # -- reads ------------------------------------------------------------------------------
    def read(self, index: Index, name: Optional[str] = None) -> jax.Array:
        """The element at ``index`` (``TensorArrayReadV3``); unwritten slots read as zeros."""
        del name
        ta, value = self._read(index, mark=False)
        indices = jnp.reshape(jnp.asarray(index, jnp.int32), (1,))
        if ta._error is None or C.is_concrete(ta._error, ta._flags, index) or not ta.is_dense \
                or ta.capacity == 0:
            ta._throw_slots(indices)
            return value
        # Inside compiled code (often a loop body): one fused predicate guards the full check,
        # which rebuilds the error record and raises from a host callback. Computing the record
        # and the slot's flags outside the conditional cost ~4 extra kernels per read.
        limit = ta.capacity if ta._meta.is_grad else ta._size_value()
        i = indices[0]
        bits = ta._flags[jnp.clip(i, 0, ta.capacity - 1)]  # type: ignore[index]
        suspect = (ta._error[0] != 0) | (i < 0) | (i >= limit) | ((bits & C.ERROR_BITS) != 0)

        def full_check() -> None:
            self._read(index, mark=False)[0]._throw_slots(indices)

        lax.cond(suspect, full_check, lambda: None)
        return value

    def _read(self, index: Index, mark: bool = True) -> tuple[TensorArray, jax.Array]:
        """The kernel's Read (§1.4). With ``mark`` the slot is marked read (and cleared)."""
        _check_index_scalar(index)  # the op kernel's check, before Read's closed check
        self._check_open()
        m = self._meta
        i = _static_int(index)
        ta = self
        if i is not None:
            size = _static_int(self._size_value())
            if i < 0 or (not m.is_grad and size is not None and i >= size):
                raise InvalidArgumentError(f"Tried to read from index {i} but array size is: "
                                           f"{size if size is not None else '<traced>'}")
            if m.is_grad and size is not None and i >= size:
                if not S.fully_defined(m.element_shape):
                    raise InvalidArgumentError(self._unknown_read_message(i))
                ta = ta._grow(i + 1)
        if not ta.is_dense:
            if i is None:
                raise ValueError(
                    f"TensorArray {self.name}: reading at a traced index needs a fully known element "
                    f"shape, but it is {S.debug_str(self.element_shape)}.")
            return ta._read_slots(i, mark)
        return ta._read_dense(index if i is None else i, mark)

    def _unknown_read_message(self, i: int) -> str:
        return (f"TensorArray {self.name}: Could not read from TensorArray index {i}.  Furthermore, the "
                f"element shape is not fully defined: {S.debug_str(self.element_shape)}.  It is possible "
                "you are working with a resizeable TensorArray and stop_gradients is not allowing the "
                "gradients to be written.  If you set the full element_shape property on the forward "
                "TensorArray, the proper all-zeros tensor will be returned instead of incurring this error.")

    def _read_dense(self, i: Index, mark: bool) -> tuple[TensorArray, jax.Array]:
        m = self._meta
        data, flags, error, size = self._data, self._flags, self._error, self._size
        cap = data.shape[0]
        if isinstance(i, int) and m.size is not None:
            ok: Any = True
        else:
            i = jnp.asarray(i, jnp.int32)
            if m.is_grad:  # gradient arrays grow on reads past their size
                ok = (i >= 0) & (i < cap)
                if m.checks:
                    error = C.record(error, i < 0, C.READ_OUT_OF_RANGE, i, self._size_value())
                    error = C.record(error, i >= cap, C.READ_BEYOND_CAPACITY, i, cap)
                if mark and size is not None:
                    size = jnp.where(ok, jnp.maximum(size, i + 1), size)
            else:
                limit = self._size_value()
                ok = (i >= 0) & (i < limit)
                if m.checks:
                    error = C.record(error, ~ok, C.READ_OUT_OF_RANGE, i, limit)
        if cap == 0:  # no rows: the traced index is out of range (recorded above)
            ta = self._replace(error=error, size=size)
            return ta._settle() if mark else ta, jnp.zeros(data.shape[1:], data.dtype)
        value = lax.index_in_dim(data, i, 0, keepdims=False) if isinstance(i, int) else _read_row(data, i)
        if m.checks:
            j = i if ok is True else jnp.where(ok, i, cap)
            old = flags.at[j].get(mode="fill", fill_value=0)  # type: ignore[union-attr]
            if mark:
                flags = flags.at[j].set(_read_bits(old, m.clear_after_read or m.is_grad), mode="drop")  # type: ignore[union-attr]
        ta = self._replace(flags=flags, error=error, size=size)
        return ta._settle() if mark else ta, value

    def _read_slots(self, i: int, mark: bool) -> tuple[TensorArray, jax.Array]:
        m = self._meta
        assert m.slots is not None
        flags, shape = m.slots[i]
        if not flags & C.WRITTEN:
            if not S.fully_defined(m.element_shape):
                raise InvalidArgumentError(self._unknown_read_message(i))
            shape = m.element_shape
        if flags & C.READ and (m.clear_after_read or m.is_grad):
            raise InvalidArgumentError(C.SLOT_MESSAGES[C.E_READ_CLEARED].format(name=self.name, i=i))
        value = self._data[i]  # type: ignore[index]
        if value is None:
            value = jnp.zeros(shape, m.dtype)  # type: ignore[arg-type]
        if not mark:
            return self, value
        slots = m.slots[:i] + ((flags | C.WRITTEN | C.READ, shape),) + m.slots[i + 1:]
        return self._replace(slots=slots), value

    # -- multi-slot ops ---------------------------------------------------------------------
    def stack(self, name: Optional[str] = None) -> jax.Array:
        """All elements stacked on a new leading axis (``gather(range(size))``)."""
        del name
        self._check_open()
        n = self._static_size("stack()")
        return self._gather_python(np.arange(n))

    def gather(self, indices: ArrayLike, name: Optional[str] = None) -> jax.Array:
        """The elements at ``indices`` stacked (``TensorArrayGatherV3``)."""
        del name
        return self._gather_python(indices)  # _gather checks closed after validating the indices

    def _gather_python(self, indices: ArrayLike) -> jax.Array:
        # TF's Python gather/stack pass the inferred element shape as the op's attribute.
        ta, value = self._gather(indices, mark=False, element_shape=self._meta.element_shape)
        ta._throw_slots(jnp.asarray(indices, jnp.int32).reshape(-1))
        return value

    def _gather(self, indices: ArrayLike, mark: bool = True, element_shape: Any = None
                ) -> tuple[TensorArray, jax.Array]:
        """The kernel's Gather (§2.4)."""
        m = self._meta
        attr = S.as_shape(element_shape)
        merge_error = S.merge_error(m.element_shape, attr)
        if merge_error:
            raise InvalidArgumentError(merge_error)
        ta = self
        if attr is not None and m.infer_shape is not None:
            merged = S.merge(m.element_shape, attr)
            if merged != m.element_shape:
                ta = ta._replace(element_shape=merged)
                if ta._can_be_dense():
                    ta = ta._to_dense()
        if np.ndim(indices) != 1:
            raise InvalidArgumentError(f"Expected indices to be a vector, but received shape: "
                                       f"{S.debug_str(np.shape(indices))}")
        if np.shape(indices)[0] == 0:  # reads nothing, so even a closed array gives [0, ...]
            es = S.merge(attr, ta._meta.element_shape)
            if not S.fully_defined(attr) and not (ta.is_dense and S.fully_defined(es)):
                raise UnimplementedError(
                    f"TensorArray has size zero, but element shape {S.debug_str(attr)} is not fully "
                    "defined. Currently only static shapes are supported when packing zero-size "
                    "TensorArrays.")
            return ta, jnp.zeros((0, *es), m.dtype)  # type: ignore[misc]
        self._check_open()  # ReadMany
        static = None if isinstance(indices, Tracer) else np.asarray(indices).astype(np.int64)
        if not ta.is_dense:
            if static is None:
                raise ValueError(f"TensorArray {self.name}: gather at traced indices needs a fully known "
                                 f"element shape, but it is {S.debug_str(self.element_shape)}.")
            values = []
            for i in static:
                ta, v = ta._read(int(i), mark=mark)
                values.append(v)
            ta._check_gather_shapes([tuple(v.shape) for v in values], attr)
            return ta, jnp.stack(values)
        if static is not None:
            size = _static_int(ta._size_value())
            # ReadMany reads in order and stops at the first failure (§1.5): an index out of range,
            # or a cleared slot (read earlier in this gather, or by an earlier op when the flags
            # are concrete).
            clears = mark and m.checks and (m.clear_after_read or m.is_grad)
            bits = np.asarray(ta._flags) if clears and ta._flags is not None and C.is_concrete(ta._flags) else None
            seen: set[int] = set()
            for i in static:
                if i < 0 or (not m.is_grad and size is not None and i >= size):
                    raise InvalidArgumentError(f"Tried to read from index {int(i)} but array size is: {size}")
                if clears and (int(i) in seen or (bits is not None and i < bits.shape[0] and bits[i] & C.READ)):
                    raise InvalidArgumentError(C.SLOT_MESSAGES[C.E_READ_CLEARED].format(name=self.name, i=int(i)))
                seen.add(int(i))
            if m.is_grad and size is not None and static.max() >= size:
                ta = ta._grow(int(static.max()) + 1)
            idx: Any = static.astype(np.int32)  # kept NumPy: _take_rows turns ranges into slices
        else:
            idx = jnp.asarray(indices, jnp.int32)
        return ta._gather_dense(idx, static is not None, mark)

    def _check_gather_shapes(self, shapes: list[tuple[int, ...]], attr: S.Shape) -> None:
        if not S.compatible(attr, shapes[0]):
            raise InvalidArgumentError(f"TensorArray was passed element_shape {S.debug_str(attr)} which "
                                       f"does not match the Tensor at index 0: {S.debug_str(shapes[0])}")
        for k, shape in enumerate(shapes[1:], 1):
            if shape != shapes[0]:
                raise InvalidArgumentError(
                    f"TensorArray has inconsistent shapes.  Index 0 has shape: {S.debug_str(shapes[0])} "
                    f"but index {k} has shape: {S.debug_str(shape)}")

    def _gather_dense(self, idx: jax.Array, static: bool, mark: bool) -> tuple[TensorArray, jax.Array]:
        m = self._meta
        data, flags, error, size = self._data, self._flags, self._error, self._size
        cap = data.shape[0]
        limit = cap if m.is_grad else self._size_value()
        ok = (idx >= 0) & (idx < limit)
        # Per position, the error its read fails with (0: none). ReadMany reads in order and
        # stops at the first failure: that one is recorded (C.record_first).
        codes: Any = None
        if m.checks and not static:
            beyond = C.READ_BEYOND_CAPACITY if m.is_grad else C.READ_OUT_OF_RANGE
            codes = jnp.where(ok, 0, jnp.where(idx < 0, C.READ_OUT_OF_RANGE, beyond))
        if m.is_grad and mark and size is not None and not static:
            size = jnp.maximum(size, jnp.max(jnp.where(ok, idx + 1, 0)))
        value = _take_rows(data, idx) if cap else jnp.zeros(idx.shape + data.shape[1:], data.dtype)
        if m.checks and mark and cap:  # (no rows: every traced index is out of range)
            j = jnp.where(ok, idx, cap)
            old = flags.at[j].get(mode="fill", fill_value=0)  # type: ignore[union-attr]
            clears = m.clear_after_read or m.is_grad
            new = _read_bits(old, clears)
            if clears:  # a second read of a slot: read before, or earlier in this gather
                again = (((old & C.READ) != 0) | C.repeated(j, cap)) & ok
                new = jnp.where(again, new | C.E_READ_CLEARED, new)
                if codes is not None:
                    codes = jnp.where((codes == 0) & again, C.READ_CLEARED_AT, codes)
                elif not C.is_concrete(old):  # (else _gather has checked them in order)
                    codes = jnp.where(again, C.READ_CLEARED_AT, 0)
            flags = flags.at[j].set(new, mode="drop")  # type: ignore[union-attr]
        if codes is not None:
            error = C.record_first(error, codes, idx, jnp.where(codes == C.READ_BEYOND_CAPACITY, cap,
                                                                self._size_value()))
        ta = self._replace(flags=flags, error=error, size=size)
        return (ta._settle() if mark else ta), value

    def unstack(self, value: ArrayLike, name: Optional[str] = None) -> TensorArray:
        """Write ``value[i]`` at each index ``i`` (``scatter(range(len(value)), value)``)."""
        del name
        if np.ndim(value) >= 1:  # TF's Python layer checks the static shape before the kernel's dtype
            self._python_shape_check(np.shape(value)[1:], np.shape(value)[1:])
        value = _convert(value, self.dtype, preferred=True)
        if value.ndim == 0:
            raise InvalidArgumentError(
                f"Input value for unpack must be at least a vector but received shape: {S.debug_str(())}")
        return self._scatter(np.arange(value.shape[0]), value)._python_infer(value.shape[1:])

    def scatter(self, indices: ArrayLike, value: ArrayLike, name: Optional[str] = None) -> TensorArray:
        """Write ``value[k]`` at ``indices[k]`` (``TensorArrayScatterV3``)."""
        del name
        # TF's Python layer checks value.shape[1:] (``()`` for a scalar) before the kernel's dtype.
        self._python_shape_check(np.shape(value)[1:], np.shape(value)[1:])
        value = _convert(value, self.dtype, preferred=True)
        return self._scatter(indices, value)._python_infer(value.shape[1:])

    def _python_infer(self, shape: tuple[int, ...]) -> TensorArray:
        """TF's Python layer merges the shape of every write/scatter/unstack into the element
        shape (with ``infer_shape``), even when zero elements are written (case 53)."""
        return self._pin_shape(tuple(shape))

    def _scatter(self, indices: ArrayLike, value: jax.Array) -> TensorArray:
        """The kernel's Scatter (§2.5)."""
        m = self._meta
        if value.dtype != self.dtype:
            raise InvalidArgumentError(
                f"TensorArray dtype is {S.kernel_dtype_name(self.dtype)} but Op is trying to write dtype "
                f"{S.kernel_dtype_name(value.dtype)}.")
        if value.ndim == 0:
            raise InvalidArgumentError(
                f"Input value for unpack must be at least a vector but received shape: {S.debug_str(())}")
        self._check_open()  # the kernel's Size(), after the dtype and rank checks
        if np.ndim(indices) != 1:
            raise InvalidArgumentError(f"Expected indices to be a vector, but received shape: "
                                       f"{S.debug_str(np.shape(indices))}")
        n = np.shape(indices)[0]
        if n != value.shape[0]:
            raise InvalidArgumentError(
                f"Expected len(indices) == values.shape[0], but saw: {n} vs. {value.shape[0]}")
        static = None if isinstance(indices, Tracer) else np.asarray(indices).astype(np.int64)
        ta = self
        if static is not None:
            max_index = int(static.max()) if n else -1
            size = _static_int(ta._size_value())
            if m.dynamic_size and size is not None and max_index + 1 > size:
                ta = ta._grow(max_index + 1)
                size = max_index + 1
            if size is not None and max_index >= size:
                raise InvalidArgumentError(
                    f"Max scatter index must be < array size ({max_index} vs. {size})")
        ta._kernel_shape_check(static[0] if static is not None else "<traced>", value.shape[1:]) if n else None
        if n == 0:
            return ta
        ta = ta._pin_shape(value.shape[1:])
        if not ta.is_dense:
            if static is None:
                raise ValueError(f"TensorArray {self.name}: scatter at traced indices needs a fully known "
                                 f"element shape, but it is {S.debug_str(self.element_shape)}.")
            for k, i in enumerate(static):
                if i < 0:
                    raise InvalidArgumentError(
                        f"TensorArray {self.name}: Tried to write to index {int(i)} but array is not "
                        f"resizeable and size is: {ta._size_value()}")
                ta = ta._write_slots(int(i), value[k])
            return ta
        if static is not None:
            # WriteOrAggregateMany writes in order and stops at the first failure (§1.5): a negative
            # index, a slot already read, or a slot written before (earlier in this scatter, or by an
            # earlier op when the flags are concrete).
            bits = np.asarray(ta._flags) if ta._flags is not None and C.is_concrete(ta._flags) else None
            seen: set[int] = set()
            for i in static:
                if i < 0:
                    raise InvalidArgumentError(
                        f"TensorArray {self.name}: Tried to write to index {int(i)} but array is not "
                        f"resizeable and size is: {ta._size_value()}")
                flags = 0 if bits is None else int(bits[i])
                if flags & C.READ:
                    raise InvalidArgumentError(C.SLOT_MESSAGES[C.E_WRITE_AFTER_READ].format(name=self.name, i=int(i)))
                if m.checks and not m.is_grad and (int(i) in seen or flags & C.WRITTEN):
                    raise InvalidArgumentError(C.SLOT_MESSAGES[C.E_WRITTEN_TWICE].format(name=self.name, i=int(i)))
                seen.add(int(i))
            idx: Any = static.astype(np.int32)  # kept NumPy: _add_rows turns a full range into an add
        else:
            idx = jnp.asarray(indices, jnp.int32)
        return ta._scatter_dense(idx, static is not None, value)

    def _scatter_dense(self, idx: jax.Array, static: bool, value: jax.Array) -> TensorArray:
        m = self._meta
        data, flags, error, size = self._data, self._flags, self._error, self._size
        cap = data.shape[0]
        if static:
            ok: Any = jnp.ones(idx.shape, bool)
        else:
            if m.dynamic_size:
                if m.capacity is None:
                    raise UnimplementedError(
                        f"TensorArray {self.name}: a dynamic_size array scattered at traced indices needs "
                        "a static capacity; create it with TensorArray(..., dynamic_size=True, capacity=N).")
                limit: Any = cap
            else:
                limit = self._size_value()
            max_index = jnp.max(idx)
            if m.dynamic_size:
                size = jnp.maximum(size, jnp.minimum(max_index + 1, cap))
            ok = (idx >= 0) & (idx < limit)
            if m.checks:
                cur = size if m.dynamic_size else limit
                # The max-index check comes before any write, as in TF's kernel.
                if m.dynamic_size:
                    error = C.record(error, max_index >= cap, C.WRITE_BEYOND_CAPACITY, max_index, cap)
                else:
                    error = C.record(error, max_index >= cur, C.SCATTER_OUT_OF_RANGE, max_index, cur)
        if cap == 0:  # no rows: every traced index is out of range (too large: recorded above)
            if m.checks and not static:
                error = C.record_first(error, jnp.where(idx < 0, C.WRITE_OUT_OF_RANGE, 0), idx, cur)
            return self._replace(error=error, size=size)._settle()
        if m.checks:
            j = jnp.where(ok, idx, cap)
            old = flags.at[j].get(mode="fill", fill_value=0)  # type: ignore[union-attr]
            new = _write_bits(old, m.is_grad)
            rep = C.repeated(j, cap) if not m.is_grad else None  # written earlier in this scatter
            if rep is not None:
                new = jnp.where(rep, new | C.E_WRITTEN_TWICE, new)
            if not (static and C.is_concrete(old)):  # (else _scatter has checked them in order)
                # Per position, the error its write fails with (0: none). WriteOrAggregateMany
                # writes in order and stops at the first failure: that one is recorded.
                after_read = ((old & C.READ) != 0) & ok
                codes = jnp.where(idx < 0, C.WRITE_OUT_OF_RANGE,
                                  jnp.where(after_read, C.WRITE_AFTER_READ_AT, 0))
                if rep is not None:
                    twice = ((((old & C.WRITTEN) != 0) & ~after_read) | rep) & ok
                    codes = jnp.where((codes == 0) & twice, C.WRITTEN_TWICE_AT, codes)
                error = C.record_first(error, codes, idx, self._size_value() if static else cur)
            flags = flags.at[j].set(new, mode="drop")  # type: ignore[union-attr]
        data = _add_rows(data, idx if static else jnp.where(ok, idx, cap), value)
        return self._replace(data=data, flags=flags, error=error, size=size)._settle()

    def concat(self, name: Optional[str] = None) -> jax.Array:
        """All elements concatenated along their first axis (``TensorArrayConcatV3``)."""
        del name
        es = self._meta.element_shape  # TF's Python layer passes element_shape[1:] as the attribute
        _, value, _ = self._concat(mark=False, element_shape_except0=None if es is None else es[1:])
        return value

    def _concat(self, mark: bool = True, element_shape_except0: Any = None
                ) -> tuple[TensorArray, jax.Array, np.ndarray]:
        """The kernel's Concat (§2.6): returns (array, value, lengths)."""
        self._check_open()
        m = self._meta
        attr = S.as_shape(element_shape_except0)
        if m.is_grad:
            n = m.marked_size
            if n < 0:  # HAZARD H1: TensorFlow aborts the process here.
                raise InvalidArgumentError(
                    f"TensorArray {self.name}: cannot concat a gradient array whose forward array was "
                    "never split (its concat size is unknown; TensorFlow aborts the process here).")
        else:
            n = self._static_size("concat()")
        if n == 0:
            es = m.element_shape
            known = attr if S.fully_defined(attr) else (
                es[1:] if S.fully_defined(es) and len(es) >= 1 else None)  # type: ignore[arg-type]
            if known is None:
                raise UnimplementedError(
                    f"TensorArray has size zero, but element_shape_except0 {S.debug_str(attr)} is not fully "
                    "defined. Currently only static shapes are supported when concatenating zero-size "
                    "TensorArrays.")
            return self, jnp.zeros((0, *known), m.dtype), np.zeros((0,), _length_dtype())
        ta, values = self._gather(np.arange(n), mark=mark) if self.is_dense else (self, None)
        if values is not None:
            if values.ndim < 2:
                raise InvalidArgumentError("Concat saw a scalar shape at index 0 but requires at least "
                                           "vectors.  Did you mean to call pack?")
            ta._check_concat_attr(attr, tuple(values.shape[2:]))
            if not mark:
                ta.throw()
            # `lengths` is static (element shapes are): a NumPy array stays concrete inside jit, so
            # Concat's gradient can split a ragged cotangent with it (TF's concat_grad).
            lengths = np.full((n,), values.shape[1], _length_dtype())
            # An explicit dim 0: ``-1`` is ambiguous (ZeroDivisionError) when a trailing dim is 0.
            return ta, values.reshape((values.shape[0] * values.shape[1], *values.shape[2:])), lengths
        parts = []
        for i in range(n):  # the kernel reads every element (ReadMany) before checking them
            ta, v = ta._read(i, mark=mark)
            parts.append(v)
        for i, v in enumerate(parts):  # per element, in order, as the kernel's loop
            if v.ndim == 0:
                raise InvalidArgumentError(f"Concat saw a scalar shape at index {i} but requires at least "
                                           "vectors.  Did you mean to call pack?")
            if i == 0:
                ta._check_concat_attr(attr, tuple(parts[0].shape[1:]))
            elif tuple(v.shape[1:]) != tuple(parts[0].shape[1:]):
                raise InvalidArgumentError(
                    "TensorArray has inconsistent shapes.  Index 0 has (excepting dimension 0) shape: "
                    f"{S.debug_str(tuple(parts[0].shape[1:]))} but index {i} has (excepting dimension 0) "
                    f"shape: {S.debug_str(tuple(v.shape[1:]))}")
        lengths = np.asarray([v.shape[0] for v in parts], _length_dtype())
        return ta, jnp.concatenate(parts), lengths

    def _check_concat_attr(self, attr: S.Shape, rest: tuple[int, ...]) -> None:
        if not S.compatible(attr, rest):
            raise InvalidArgumentError(
                f"TensorArray was passed element_shape_except0 {S.debug_str(attr)} but index 0 has "
                f"(excepting dimension 0) shape: {S.debug_str(rest)} which does not match.")

    def split(self, value: ArrayLike, lengths: ArrayLike, name: Optional[str] = None) -> TensorArray:
        """Write consecutive row blocks of ``value`` of the given ``lengths`` (``TensorArraySplitV3``)."""
        del name
        value = _convert(value, self.dtype, preferred=True)
        static = None if isinstance(lengths, Tracer) else np.asarray(lengths)
        if static is not None and static.ndim == 1 and static.size and np.all(static == static[0]):
            shape = (int(static[0]), *value.shape[1:])
            self._python_shape_check(shape, shape)
        return self._split(value, lengths)

    def _split(self, value: jax.Array, lengths: ArrayLike) -> TensorArray:
        """The kernel's Split (§2.7)."""
        m = self._meta
        if np.ndim(lengths) != 1:
            raise InvalidArgumentError(f"Expected lengths to be a vector, received shape: "
                                       f"{S.debug_str(np.shape(lengths))}")
        if value.ndim == 0:
            raise InvalidArgumentError(f"Expected value to be at least a vector, but received shape: "
                                       f"{S.debug_str(())}")
        n = np.shape(lengths)[0]
        static = None if isinstance(lengths, Tracer) else np.asarray(lengths).astype(np.int64)
        rows = value.shape[0]
        if static is not None:
            bad = np.nonzero(static < 0)[0]
            if bad.size:  # HAZARD H2: TensorFlow aborts the process here.
                k = int(bad[0])
                raise InvalidArgumentError(C.MESSAGES[C.NEGATIVE_SPLIT_LENGTH][1].format(
                    name=self.name, a=k, b=int(static[k])))
            if int(static.sum()) != rows:
                raise InvalidArgumentError(
                    f"Expected sum of lengths to be equal to values.shape[0], but sum of lengths is "
                    f"{int(static.sum())} and value's shape is: {S.debug_str(tuple(value.shape))}")
        self._check_open()  # the kernel's PackOrConcatSize(), after validating lengths and value
        ta = self
        size = _static_int(ta._size_value())
        if m.dynamic_size and size is not None and n > size:
            ta = ta._grow(n)
            size = n
        if size is None:
            raise ValueError(f"TensorArray {self.name}: split() needs a static size.")
        if size != n:
            raise InvalidArgumentError(
                f"TensorArray's size is not equal to the size of lengths ({size} vs. {n}), and the "
                "TensorArray is not marked as dynamically resizeable")
        if value.dtype != self.dtype:
            raise InvalidArgumentError(
                f"TensorArray dtype is {S.kernel_dtype_name(self.dtype)} but Op is trying to write dtype "
                f"{S.kernel_dtype_name(value.dtype)}.")
        if static is not None and not (n and np.all(static == static[0])):
            offsets = np.concatenate([[0], np.cumsum(static)])
            for i in range(n):
                piece = value[int(offsets[i]):int(offsets[i + 1])]
                ta._kernel_shape_check(i, piece.shape)
                ta = ta._pin_shape(piece.shape)
                if ta.is_dense:
                    ta = ta._write_dense(i, piece)
                else:
                    ta = ta._write_slots(i, piece)
            return ta._replace(marked_size=size if not m.is_grad else m.marked_size)
        # Equal pieces (static) or traced lengths: one reshape, written as a scatter.
        if n == 0:
            return ta._replace(marked_size=0 if not m.is_grad else m.marked_size)
        if rows % n:
            raise ValueError(f"TensorArray {self.name}: traced split lengths need equal pieces, but "
                             f"{rows} rows do not divide into {n} pieces. Pass concrete lengths.")
        piece_shape = (rows // n, *value.shape[1:])
        ta._kernel_shape_check(0, piece_shape)
        ta = ta._pin_shape(piece_shape)
        if static is None and m.checks and ta.is_dense:
            lengths = jnp.asarray(lengths, jnp.int32)
            error = ta._error
            neg = lengths < 0
            error = C.record(error, neg.any(), C.NEGATIVE_SPLIT_LENGTH, jnp.argmax(neg), jnp.min(lengths))
            error = C.record(error, jnp.sum(lengths) != rows, C.SPLIT_SUM, jnp.sum(lengths), rows)
            unequal = lengths != rows // n
            error = C.record(error, unequal.any(), C.TRACED_RAGGED_SPLIT, jnp.argmax(unequal), rows // n,
                             lengths[jnp.argmax(unequal)])
            ta = ta._replace(error=error)
        pieces = value.reshape((n, *piece_shape))
        if not ta.is_dense:
            for i in range(n):
                ta = ta._write_slots(i, pieces[i])
        else:
            ta = ta._scatter_dense(np.arange(n, dtype=np.int32), True, pieces)
        return ta._replace(marked_size=size if not m.is_grad else m.marked_size)

    # -- misc -------------------------------------------------------------------------------
    def close(self, name: Optional[str] = None) -> TensorArray:
        """A closed copy: every later op on it raises "has already been closed."."""
        del name
        return self._replace(closed=True)

    def grad(self, source: str, registry: dict, shape_to_prepend: Any = ()
             ) -> tuple[TensorArray, TensorArray, dict]:
        """This array's gradient accumulator for ``source`` (``TensorArrayGradV3``).

        ``registry`` is a dict ``{(name, source): accumulator}`` that you thread through your
        code. Returns ``(forward, accumulator, registry)``: the forward array with its size
        frozen (as TensorFlow does), the accumulator (the existing one if ``source`` was asked
        for before), and the registry holding it. Store an updated accumulator back with
        ``jta.gradients.put(registry, g)``. See ``jta.gradients`` for the backward rules.
        """
        from .gradients import accumulator

        registry, g = accumulator(registry, self, source, shape_to_prepend)
        return (self._replace(dynamic_size=False) if self.dynamic_size else self), g, registry

    def identity(self) -> TensorArray:
        """The same array (flow ordering is implicit in JAX's dataflow)."""
        return self

    def _make_grad(self, source: str, shape_to_prepend: tuple[int, ...] = ()) -> TensorArray:
        """A fresh gradient accumulator for this (forward) array (§3.1, §3.2)."""
        m = self._meta
        prepend = tuple(int(d) for d in shape_to_prepend)
        es = None if m.element_shape is None else prepend + tuple(m.element_shape)
        meta = dataclasses.replace(
            m, element_shape=es, dynamic_size=False, clear_after_read=True, name=f"{m.name}@{source}",
            is_grad=True, closed=False)
        if self.is_dense:
            base = jnp.zeros_like(self._data)  # the GradV3 leaves ...
            # ... broadcast to `shape_to_prepend ++ element_shape` for TensorArrayGradWithShape.
            cap = base.shape[0]
            data = jnp.broadcast_to(base.reshape((cap,) + (1,) * len(prepend) + base.shape[1:]),
                                    (cap, *prepend, *base.shape[1:]))
            flags = None if self._flags is None else self._flags & C.WRITTEN
            return TensorArray.tree_unflatten(
                meta, (data, flags, self._size, None if self._error is None else C.no_error(), jnp.zeros((), jnp.float32)))
        assert m.slots is not None
        slots = tuple((f & C.WRITTEN, None if s is None else prepend + tuple(s)) for f, s in m.slots)
        meta = dataclasses.replace(meta, slots=slots)
        ta = TensorArray.tree_unflatten(
            meta, ((None,) * len(slots), None, self._size, None if self._error is None else C.no_error(),
                   jnp.zeros((), jnp.float32)))
        return ta._to_dense() if ta._can_be_dense() and m.infer_shape else ta

    def __repr__(self) -> str:
        from ._repr import array_repr  # header, slot strip, error; safe under jit (see jta._repr)

        return array_repr(self)

    def _repr_html_(self) -> str:
        from ._repr import array_html

        return array_html(self)


def _write_bits(old: jax.Array, aggregate: bool) -> jax.Array:
    # int32 constants: under x64, `int32 | convert(int64)` crashes XLA:CPU's compiler (jaxlib 0.10).
    after_read = jnp.where(old & C.READ, jnp.int32(C.E_WRITE_AFTER_READ), jnp.int32(0))
    if aggregate:
        return old | C.WRITTEN | after_read
    twice = jnp.where((old & C.WRITTEN) & ~(old & C.READ) != 0, jnp.int32(C.E_WRITTEN_TWICE), jnp.int32(0))
    return old | C.WRITTEN | after_read | twice


def _static_range(idx: Any) -> Optional[tuple[int, int]]:
    """``(start, stop)`` when ``idx`` is a NumPy vector ``start, start + 1, ..., stop - 1``."""
    if not isinstance(idx, np.ndarray) or idx.ndim != 1 or idx.size == 0:
        return None
    start = int(idx[0])
    return (start, start + idx.size) if np.array_equal(idx, np.arange(start, start + idx.size)) else None


def _take_rows(data: jax.Array, idx: Any) -> jax.Array:
    """``data.at[idx].get(mode="clip")``. Static in-range consecutive indices (``stack()``) are a
    slice, the whole buffer for ``range(capacity)``: no gather, so no copy of the buffer, and the
    gradient flows into the buffer's cotangent as is instead of through a scatter."""
    rows = _static_range(idx)
    if rows is not None and 0 <= rows[0] and rows[1] <= data.shape[0]:
        return lax.slice_in_dim(data, rows[0], rows[1])
    return data.at[idx].get(mode="clip")


def _add_rows(data: jax.Array, idx: Any, value: jax.Array) -> jax.Array:
    """``data.at[idx].add(value, mode="drop")``. Static indices ``range(capacity)`` (``unstack()``
    of a whole array) are an elementwise add, which XLA folds into the fresh zero buffer."""
    if _static_range(idx) == (0, data.shape[0]):
        return jnp.logical_or(data, value) if data.dtype == np.bool_ else data + value
    return _add_at(data, idx, value, mode="drop")


@jax.custom_jvp
def _read_row(data: jax.Array, i: jax.Array) -> jax.Array:
    """``data[i]`` at a traced index (a dynamic slice)."""
    return lax.dynamic_index_in_dim(data, i, 0, keepdims=False)


@_read_row.defjvp
def _read_row_jvp(primals: Any, tangents: Any) -> tuple[jax.Array, jax.Array]:
    # Under differentiation the value read is saved as a residual of the step that uses it.
    # XLA fuses a duplicate of the dynamic slice into that residual's store, a second reader of
    # the buffer that nothing orders before a later in-place write to the same (loop-carried)
    # buffer, so XLA:CPU copies the whole buffer in every step: a loop that reads what it wrote
    # (W3) became O(T^2). A conditional is opaque to fusion: the value is materialized once, by
    # a reader that the write depends on. Both branches compute the same (clamped) slice. It
    # costs ~1 us per differentiated read on CPU; elsewhere (unmeasured: a conditional in a GPU
    # loop may cost a host sync) the plain slice is kept.
    data, i = primals

    def opaque(data: jax.Array, i: jax.Array) -> jax.Array:
        return lax.cond(i >= 0, lambda: lax.dynamic_index_in_dim(data, i, 0, keepdims=False),
                        lambda: lax.dynamic_index_in_dim(data, 0, 0, keepdims=False))

    value = lax.platform_dependent(data, i, cpu=opaque, default=_read_row.fun)
    return value, lax.dynamic_index_in_dim(tangents[0], i, 0, keepdims=False)


def _row(data: jax.Array, i: Index) -> jax.Array:
    return lax.dynamic_index_in_dim(data, i, 0, keepdims=False)


def _set_row(data: jax.Array, i: Index, row: jax.Array) -> jax.Array:
    return lax.dynamic_update_index_in_dim(data, row, i, 0)


def _add_row(data: jax.Array, i: Index, value: jax.Array) -> jax.Array:
    """``data.at[i].add(value)`` for an in-range ``i``: one in-place dynamic-update-slice."""
    old = _row(data, i)
    return _set_row(data, i, jnp.logical_or(old, value) if data.dtype == np.bool_ else old + value)


def _write_row(data: jax.Array, i: Index, value: jax.Array, aggregate: bool) -> jax.Array:
    """Write ``value`` into slot ``i`` (in range) of ``data``: added for an aggregating gradient
    array, set for a forward array. A forward slot is written once, into zeros, so setting equals
    adding and skips reading the old row; with ``checks=False`` a second write overwrites."""
    if not jnp.issubdtype(data.dtype, jnp.inexact):  # not differentiable: no tangent rule needed
        return _write_row_diff.fun(data, i, value, aggregate)
    return _write_row_diff(data, i, value, aggregate)


@functools.partial(jax.custom_jvp, nondiff_argnums=(3,))
def _write_row_diff(data: jax.Array, i: Index, value: jax.Array, aggregate: bool) -> jax.Array:
    return _add_row(data, i, value) if aggregate else _set_row(data, i, value)


@_write_row_diff.defjvp
def _write_row_diff_jvp(aggregate: bool, primals: Any, tangents: Any) -> tuple[jax.Array, jax.Array]:
    # The tangent map is a scatter-add, whatever the primal does. Differentiating a set (or a
    # read-modify-write) of one slot as is would make the transpose zero that slot in the
    # cotangent buffer: a dynamic-update-slice for which XLA copies the whole buffer in every
    # backward step, O(T^2). The transpose of a scatter-add passes the cotangent buffer through
    # and reads out slot ``i``: linear in T. (Both agree on valid programs: a forward slot is
    # written once, into zeros.)
    data, i, value = primals
    t_data, _, t_value = tangents
    return _write_row_diff.fun(data, i, value, aggregate), t_data.at[i].add(t_value, mode="promise_in_bounds")


def _add_at(data: jax.Array, index: Any, value: jax.Array, **kw: Any) -> jax.Array:
    """``data.at[index].add(value)``; for bool (which JAX cannot add) a logical or, as tf2xla does."""
    if data.dtype == np.bool_:
        return data.at[index].max(value, **kw)
    return data.at[index].add(value, **kw)


def _read_bits(old: jax.Array, clears: bool) -> jax.Array:
    new = old | C.READ | C.WRITTEN
    if clears:
        new = new | jnp.where(old & C.READ, jnp.int32(C.E_READ_CLEARED), jnp.int32(0))
    return new


def _length_dtype() -> Any:
    return jax.dtypes.canonicalize_dtype(np.int64)  # int64 under x64, as TensorFlow's; else int32


def _empty(meta: _Meta, n: int, flow: Any) -> TensorArray:
    cap = max(n, meta.capacity or 0)
    error = C.no_error() if meta.checks else None
    flow = jnp.zeros((), jnp.float32) if flow is None else jnp.asarray(flow, jnp.float32)
    size = jnp.asarray(n, jnp.int32) if meta.size is None else None
    if S.fully_defined(meta.element_shape):
        data = jnp.zeros((cap, *meta.element_shape), meta.dtype)  # type: ignore[misc]
        flags = jnp.zeros((cap,), jnp.int32) if meta.checks else None
        return TensorArray.tree_unflatten(meta, (data, flags, size, error, flow))
    meta = dataclasses.replace(meta, slots=((0, None),) * n)
    return TensorArray.tree_unflatten(meta, ((None,) * n, None, size, error, flow))


def _init_from(self: TensorArray, other: TensorArray) -> None:
    for k in TensorArray.__slots__:
        object.__setattr__(self, k, getattr(other, k))
